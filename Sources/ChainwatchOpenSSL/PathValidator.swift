internal import COpenSSL
public import ChainwatchCore

/// Builds and validates a certificate path with OpenSSL (`X509_verify_cert`) and reports it as plain values.
///
/// What it does: the leaf is the first certificate presented, every other presented certificate (and
/// `extraUntrusted`) is an untrusted candidate, the anchors are the store's; the purpose is TLS server
/// (`ssl_server`), the time is the one given (never the clock). OpenSSL picks the path itself, so
/// out-of-order, extra or appended certificates never decide which path is judged.
///
/// What it does not do: hostname checks (a pure check reads `dnsNames`/`ipAddresses`), revocation.
///
/// Key and signature strength: the authentication security level is 0, so an RSA-1024 key or a SHA-1
/// signature still validates and is reported as a fact (`keyBits`, `signatureDigest`); the policy's protocol
/// profile decides whether that is a `weak_key` / `weak_signature` finding. (A standalone `X509_STORE_CTX`
/// defaults to no level; libssl would impose its security level, 1 or Debian's 2, and reject some of these
/// as `EE_KEY_TOO_SMALL` / `CA_MD_TOO_WEAK`. We set 0 explicitly so the result does not depend on that.)
public enum PathValidator {
    /// `ValidationError.opensslCode` when a presented certificate is not decodable DER or nothing was
    /// presented: `X509_V_ERR_UNSPECIFIED` (OpenSSL never got to build a path).
    public static let undecodableCode = Int32(X509_V_ERR_UNSPECIFIED)

    /// Validates the chain a server sent (DER, leaf first, as sent) at time `at`.
    ///
    /// Never throws: a certificate that does not decode, an empty chain, or (very unlikely) an OpenSSL failure
    /// to set up the verification is a finding, `.untrustedChain` with `undecodableCode` and a message naming
    /// the failing certificate or call; `presented` then holds the certificates that did decode.
    public static func validate(chain: [[UInt8]], store: TrustStore, at time: UnixTime,
                                extraUntrusted: [Certificate] = []) -> PathValidation {
        let (certificates, failure) = decode(chain)
        if let failure { return failure }
        return validate(decoded: certificates, presentedCount: chain.count, store: store, at: time,
                        extraUntrusted: extraUntrusted)
    }

    /// Validates certificates from `decode` (the first `maxConsideredCertificates` of `presentedCount`); an error
    /// then says how many were considered.
    static func validate(decoded certificates: [Certificate], presentedCount: Int, store: TrustStore, at time: UnixTime,
                         extraUntrusted: [Certificate] = []) -> PathValidation {
        var result = validate(chain: certificates, store: store, at: time, extraUntrusted: extraUntrusted)
        if presentedCount > certificates.count, var error = result.error {
            error.message += " (the first \(certificates.count) of \(presentedCount) presented certificates were considered)"
            result.error = error
        }
        return result
    }

    /// The most presented certificates considered: the leaf and the next 15. Real chains are 2-6 certificates; a
    /// hostile server sending 200 must not make every handshake decode and try 200 (tens of milliseconds of loop
    /// time). Certificates past it are neither decoded nor offered to path building.
    public static let maxConsideredCertificates = 16

    /// The presented certificates decoded, as far as `maxConsideredCertificates`, each once (through `cache`: a
    /// certificate decoded recently, by a probe's handshake or for another chain, is not decoded again); a certificate
    /// that does not decode makes `failure` the validation's result (`.untrustedChain`, `undecodableCode`).
    static func decode(_ chain: [[UInt8]], cache: DecodedCertificates = .shared)
        -> (certificates: [Certificate], failure: PathValidation?)
    {
        var certificates: [Certificate] = []
        for (index, der) in chain.prefix(maxConsideredCertificates).enumerated() {
            do throws(OpenSSLError) {
                certificates.append(try cache.certificate(der: der))
            } catch {
                let error = ValidationError(reason: .untrustedChain, opensslCode: undecodableCode,
                                            message: "presented certificate #\(index) does not decode: \(error)", depth: index)
                return (certificates, PathValidation(presented: certificates.map(\.facts), path: [], error: error, anchorKind: nil))
            }
        }
        return (certificates, nil)
    }

    /// Validates already-decoded certificates (leaf first, as sent) at time `at`. See the DER variant. `signatures`:
    /// the memo of signatures already verified (nil: OpenSSL's own step, every signature checked; for tests).
    public static func validate(chain: [Certificate], store: TrustStore, at time: UnixTime,
                                extraUntrusted: [Certificate] = [], signatures: SignatureMemo? = .shared) -> PathValidation {
        let presented = chain.map(\.facts)
        func failure(_ message: String) -> PathValidation {
            ERR_clear_error()
            return PathValidation(presented: presented, path: [],
                                  error: ValidationError(reason: .untrustedChain, opensslCode: undecodableCode,
                                                         message: message, depth: 0),
                                  anchorKind: nil)
        }
        guard let leaf = chain.first else { return failure("no certificate presented") }

        // The stack borrows the certificates: `chain` and `extraUntrusted` outlive it.
        guard let untrusted = c_openssl_sk_X509_new_null() else { return failure(describe("sk_X509_new_null")) }
        defer { c_openssl_sk_X509_free(untrusted) }
        for certificate in chain.dropFirst() + extraUntrusted {
            guard c_openssl_sk_X509_push(untrusted, certificate.raw) > 0 else { return failure(describe("sk_X509_push")) }
        }
        guard let context = X509_STORE_CTX_new() else { return failure(describe("X509_STORE_CTX_new")) }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store.raw, leaf.raw, untrusted) == 1 else {
            return failure(describe("X509_STORE_CTX_init"))
        }
        // Purpose and trust for a TLS server, as libssl sets them for a client.
        guard X509_STORE_CTX_set_default(context, "ssl_server") == 1 else {
            return failure(describe("X509_STORE_CTX_set_default"))
        }
        let parameters = X509_STORE_CTX_get0_param(context)
        X509_VERIFY_PARAM_set_time(parameters, time_t(time.seconds))
        X509_VERIFY_PARAM_set_auth_level(parameters, 0)
        // Signatures through the memo: a path's intermediate is checked once, not with every new leaf under it.
        let pathSignatures = signatures.map { PathSignatures(memo: $0, presented: chain + extraUntrusted, store: store) }
        if let pathSignatures {
            guard X509_STORE_CTX_set_ex_data(context, 0, Unmanaged.passUnretained(pathSignatures).toOpaque()) == 1 else {
                return failure(describe("X509_STORE_CTX_set_ex_data"))
            }
            X509_STORE_CTX_set_verify(context, verifyPathWithMemo)
        }

        let verified = withExtendedLifetime(pathSignatures) { X509_verify_cert(context) }   // outlives the call
        let code = X509_STORE_CTX_get_error(context)
        if verified < 0 || (verified != 1 && code == X509_V_OK) {
            return failure(describe("X509_verify_cert"))
        }

        // The built path (on failure: as far as OpenSSL got). The stack and its certificates are the
        // context's; the untrusted ones are ours, the rest the store's.
        var byAddress: [UInt: CertificateFacts] = [:]
        for certificate in chain + extraUntrusted { byAddress[address(certificate.raw)] = certificate.facts }
        var path: [CertificateFacts] = []
        if let built = X509_STORE_CTX_get0_chain(context) {
            for index in 0..<c_openssl_sk_X509_num(built) {
                guard let x509 = c_openssl_sk_X509_value(built, index) else { continue }
                if let known = byAddress[address(x509)] {
                    path.append(known)
                } else if let facts = store.facts(ofStoreCertificate: x509) {
                    path.append(facts)
                }
            }
        }
        // The last certificate is an anchor when the path validated, or when it came from the store
        // (OpenSSL counts the untrusted certificates at the start of the chain).
        let fromStore = Int(X509_STORE_CTX_get_num_untrusted(context)) < path.count
        let anchored = (verified == 1 || fromStore) && !path.isEmpty
        let anchorKind = anchored ? store.kind(ofAnchor: path[path.count - 1]) : nil

        var error: ValidationError? = nil
        if verified != 1 {
            error = ValidationError(reason: reason(for: code), opensslCode: code,
                                    message: message(for: code),
                                    depth: Int(X509_STORE_CTX_get_error_depth(context)))
        }
        ERR_clear_error()
        return PathValidation(presented: presented, path: path, error: error, anchorKind: anchorKind)
    }

    /// The reason code for an `X509_V_ERR_*` code.
    public static func reason(for code: Int32) -> Reason {
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED: .expired
        case X509_V_ERR_CERT_NOT_YET_VALID: .notYetValid
        case X509_V_ERR_EE_KEY_TOO_SMALL, X509_V_ERR_CA_KEY_TOO_SMALL: .weakKey
        case X509_V_ERR_CA_MD_TOO_WEAK: .weakSignature
        default: .untrustedChain
        }
    }

    /// OpenSSL's words for an `X509_V_ERR_*` code (`X509_verify_cert_error_string`).
    static func message(for code: Int32) -> String {
        guard let text = X509_verify_cert_error_string(Int(code)) else { return "X509_V_ERR \(code)" }
        return String(cString: text)
    }

    /// "`call` failed: …" with this thread's OpenSSL error queue, drained.
    private static func describe(_ call: String) -> String { OpenSSLError.drainingQueue(call: call).description }

    private static func address(_ pointer: OpaquePointer) -> UInt {
        UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pointer)))
    }
}
