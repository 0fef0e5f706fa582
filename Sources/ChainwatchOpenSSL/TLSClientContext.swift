internal import COpenSSL
import ChainwatchLock

/// A client `SSL_CTX` as every `TLSClient` uses it: security level 0 from TLS 1.0 (a weak server still completes
/// and the policy, not the client, judges it), no certificate verification (`PathValidator` judges the chain), no
/// session cache and no tickets (every handshake is full, so the server always presents its chain). Owns the
/// context; configured once in `init` and only read afterwards (`SSL_new` on a shared context is thread-safe in
/// OpenSSL 3), hence the unchecked Sendable.
///
/// Custom extensions are per context in OpenSSL, so an offer that carries extension types OpenSSL does not
/// implement gets a context of its own, kept in a small bounded cache keyed by that ordered list.
final class TLSClientContext: @unchecked Sendable {
    let raw: OpaquePointer   // SSL_CTX *
    /// The extension types this context sends empty in every ClientHello, in this order (before OpenSSL's own).
    let customExtensions: [UInt16]

    /// Suites up to TLS 1.2 when the offer names none: everything that authenticates with a certificate
    /// (anonymous suites would send no chain).
    static let defaultCipherList = "ALL:!aNULL:!eNULL:@SECLEVEL=0"
    /// The largest Certificate message a handshake accepts.
    static let maxCertificateListBytes = 512 * 1024

    private init(customExtensions: [UInt16]) throws(OpenSSLError) {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw .drainingQueue(call: "SSL_CTX_new") }
        raw = ctx
        self.customExtensions = customExtensions
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        SSL_CTX_set_security_level(ctx, 0)
        _ = c_openssl_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_OFF))
        _ = SSL_CTX_set_options(ctx, UInt64(c_openssl_SSL_OP_NO_TICKET()))
        // From TLS 1.0, overriding the system's MinProtocol.
        guard c_openssl_SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION) == 1 else {
            throw .drainingQueue(call: "SSL_CTX_set_min_proto_version")
        }
        guard SSL_CTX_set_cipher_list(ctx, Self.defaultCipherList) == 1 else { throw .drainingQueue(call: "SSL_CTX_set_cipher_list") }
        // OpenSSL's default (100 KiB) fails real chains (badssl's 10000-sans is 210 KB), and under a block rule a
        // failed probe blocks: a genuine server with a long chain would be blocked. Bounded still, per handshake.
        _ = SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_CERT_LIST, Self.maxCertificateListBytes, nil)
        // No add callback: the extension goes out empty. The server may echo it (any message); nothing parses it.
        let where_ = UInt32(SSL_EXT_CLIENT_HELLO | SSL_EXT_TLS1_2_SERVER_HELLO | SSL_EXT_TLS1_3_SERVER_HELLO
                            | SSL_EXT_TLS1_3_ENCRYPTED_EXTENSIONS | SSL_EXT_TLS1_3_CERTIFICATE)
        for type in customExtensions {
            guard SSL_CTX_add_custom_ext(ctx, UInt32(type), where_, nil, nil, nil, nil, nil) == 1 else {
                throw .drainingQueue(call: "SSL_CTX_add_custom_ext(\(type))")
            }
        }
    }

    deinit { SSL_CTX_free(raw) }

    /// The context with no custom extensions, made once.
    static let shared = Result { () throws(OpenSSLError) in try TLSClientContext(customExtensions: []) }

    /// The most contexts with custom extensions kept; past it a new set gets a context of its own, not cached.
    static let maxCached = 32
    private static let cache = Lock<[[UInt16]: TLSClientContext]>([:])

    /// The context that sends `customExtensions` (empty: the shared one).
    static func context(customExtensions: [UInt16]) throws(OpenSSLError) -> TLSClientContext {
        if customExtensions.isEmpty { return try shared.get() }
        if let cached = cache.withLock({ $0[customExtensions] }) { return cached }
        let made = try TLSClientContext(customExtensions: customExtensions)
        return cache.withLock { cache in
            if let raced = cache[customExtensions] { return raced }
            if cache.count < maxCached { cache[customExtensions] = made }
            return made
        }
    }
}

/// What this OpenSSL can offer, by code point: cipher suite, group and signature-algorithm names it accepts.
/// Found once by asking OpenSSL (a scratch `SSL`), so a build without some algorithm simply lacks its entry.
struct TLSCatalogue: Sendable {
    /// Cipher suite code point → OpenSSL's name (`ECDHE-ECDSA-AES128-GCM-SHA256`, `TLS_AES_128_GCM_SHA256`).
    var cipherNames: [UInt16: String] = [:]
    /// Code points of suites that authenticate with no certificate (anonymous): never offered.
    var anonymousSuites: Set<UInt16> = []
    /// TLS group id → the name `SSL_set1_groups_list` accepts.
    var groupNames: [UInt16: String] = [:]
    /// SignatureScheme → the name `SSL_set1_sigalgs_list` accepts.
    var signatureNames: [UInt16: String] = [:]

    static let tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_128_CCM_8_SHA256"

    /// Built from the shared context; empty tables when it cannot be made (every offer then gets OpenSSL's defaults).
    static let shared: TLSCatalogue = {
        var catalogue = TLSCatalogue()
        guard let context = try? TLSClientContext.shared.get(), let ssl = SSL_new(context.raw) else { ERR_clear_error(); return catalogue }
        defer { SSL_free(ssl); ERR_clear_error() }
        if SSL_set_cipher_list(ssl, "ALL:COMPLEMENTOFALL:@SECLEVEL=0") == 1, SSL_set_ciphersuites(ssl, tls13Suites) == 1,
           let stack = SSL_get_ciphers(ssl) {
            for index in 0..<c_openssl_sk_SSL_CIPHER_num(stack) {
                guard let cipher = c_openssl_sk_SSL_CIPHER_value(stack, index), let name = SSL_CIPHER_get_name(cipher) else { continue }
                let code = UInt16(truncatingIfNeeded: SSL_CIPHER_get_protocol_id(cipher))
                catalogue.cipherNames[code] = String(cString: name)
                if SSL_CIPHER_get_auth_nid(cipher) == NID_auth_null { catalogue.anonymousSuites.insert(code) }
            }
        }
        for (code, name) in TLSCodePoints.groups where c_openssl_SSL_set1_groups_list(ssl, name) == 1 {
            catalogue.groupNames[code] = name
        }
        for (code, name) in TLSCodePoints.signatureSchemes where c_openssl_SSL_set1_sigalgs_list(ssl, name) == 1 {
            catalogue.signatureNames[code] = name
        }
        return catalogue
    }()
}

/// IANA code points and the names OpenSSL 3 gives them. Entries this OpenSSL lacks are dropped by `TLSCatalogue`.
enum TLSCodePoints {
    static let groups: [UInt16: String] = [
        22: "secp256k1", 23: "secp256r1", 24: "secp384r1", 25: "secp521r1",
        26: "brainpoolP256r1", 27: "brainpoolP384r1", 28: "brainpoolP512r1", 29: "x25519", 30: "x448",
        256: "ffdhe2048", 257: "ffdhe3072", 258: "ffdhe4096", 259: "ffdhe6144", 260: "ffdhe8192",
    ]
    /// Groups usable in TLS 1.3 (a key share can only be for one of these).
    static let tls13Groups: Set<UInt16> = [23, 24, 25, 29, 30, 256, 257, 258, 259, 260]

    /// OpenSSL 3.0 has no TLS 1.3 style name for the legacy schemes (SHA-1, SHA-224, DSA): those go by
    /// `SIGNATURE+HASH`, which its sigalgs list parser also takes.
    static let signatureSchemes: [UInt16: String] = [
        0x0403: "ecdsa_secp256r1_sha256", 0x0503: "ecdsa_secp384r1_sha384", 0x0603: "ecdsa_secp521r1_sha512",
        0x0303: "ECDSA+SHA224", 0x0203: "ECDSA+SHA1",
        0x0804: "rsa_pss_rsae_sha256", 0x0805: "rsa_pss_rsae_sha384", 0x0806: "rsa_pss_rsae_sha512",
        0x0809: "rsa_pss_pss_sha256", 0x080A: "rsa_pss_pss_sha384", 0x080B: "rsa_pss_pss_sha512",
        0x0807: "ed25519", 0x0808: "ed448",
        0x0401: "rsa_pkcs1_sha256", 0x0501: "rsa_pkcs1_sha384", 0x0601: "rsa_pkcs1_sha512",
        0x0301: "rsa_pkcs1_sha224", 0x0201: "RSA+SHA1",
        0x0402: "DSA+SHA256", 0x0502: "DSA+SHA384", 0x0602: "DSA+SHA512", 0x0302: "DSA+SHA224", 0x0202: "DSA+SHA1",
        0x081A: "ecdsa_brainpoolP256r1tls13_sha256", 0x081B: "ecdsa_brainpoolP384r1tls13_sha384",
        0x081C: "ecdsa_brainpoolP512r1tls13_sha512",
    ]
}
