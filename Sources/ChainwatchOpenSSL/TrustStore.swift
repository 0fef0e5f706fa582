internal import COpenSSL
public import ChainwatchCore
import Synchronization

/// A set of trust anchors for path validation: the system roots, a rule's own anchors, or both.
///
/// Owns one `X509_STORE *`. Build it once (loading the system roots parses the whole bundle) and share it:
/// it is `@unchecked Sendable` because nothing mutates the store after init except OpenSSL's own lookup
/// cache for the hashed `/etc/ssl/certs` directory, which OpenSSL guards with the store's lock, and
/// `X509_verify_cert` only reads the store through an `X509_STORE_CTX` of its own. The facts cache below
/// is behind a `Mutex`.
public final class TrustStore: @unchecked Sendable {
    /// The `X509_STORE *` this object owns.
    package let raw: OpaquePointer
    /// Whether the system roots (`X509_STORE_set_default_paths`: Debian's `/etc/ssl/certs` and
    /// `ca-certificates.crt`, or `SSL_CERT_FILE` / `SSL_CERT_DIR`) are anchors.
    public let includesSystemRoots: Bool
    /// The anchors given at init, in order.
    public let extraAnchors: [Certificate]
    /// SHA-256 of the extra anchors that are not also system roots: an anchor of a path is a system root
    /// exactly when the system roots are loaded and its digest is not in this set.
    let nonSystemAnchorDigests: Set<[UInt8]>
    /// Facts of anchors already seen, by `X509 *` address. Sound because the store keeps every certificate
    /// it has loaded (and so its address) until it is freed in deinit.
    private let anchorFacts: Mutex<[UInt: CertificateFacts]>

    /// Builds a store from the system roots (when `systemRoots`) and `extraAnchors`.
    /// An extra anchor that is also in the system store counts as a system root.
    public init(systemRoots: Bool, extraAnchors: [Certificate] = []) throws(OpenSSLError) {
        ERR_clear_error()
        guard let store = X509_STORE_new() else { throw .drainingQueue(call: "X509_STORE_new") }
        raw = store
        includesSystemRoots = systemRoots
        self.extraAnchors = extraAnchors
        anchorFacts = Mutex([:])
        var nonSystem = Set<[UInt8]>()
        if systemRoots {
            guard X509_STORE_set_default_paths(store) == 1 else {
                X509_STORE_free(store)
                throw .drainingQueue(call: "X509_STORE_set_default_paths")
            }
            for anchor in extraAnchors {
                let alsoSystem: Bool
                do throws(OpenSSLError) { alsoSystem = try Self.contains(store, anchor) } catch {
                    X509_STORE_free(store)
                    throw error
                }
                if !alsoSystem { nonSystem.insert(anchor.facts.sha256) }
            }
        } else {
            nonSystem = Set(extraAnchors.map(\.facts.sha256))
        }
        for anchor in extraAnchors {
            // X509_STORE_add_cert takes its own reference; a certificate already present is not an error.
            guard X509_STORE_add_cert(store, anchor.raw) == 1 else {
                X509_STORE_free(store)
                throw .drainingQueue(call: "X509_STORE_add_cert")
            }
        }
        ERR_clear_error()
        nonSystemAnchorDigests = nonSystem
        anchorFacts.withLock { cache in
            for anchor in extraAnchors { cache[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(anchor.raw)))] = anchor.facts }
        }
    }

    /// A store with the system roots only.
    public static func system() throws(OpenSSLError) -> TrustStore { try TrustStore(systemRoots: true) }

    deinit { X509_STORE_free(raw) }

    /// Whether a path ending at a certificate with these facts ends at a system root.
    public func isSystemRoot(_ anchor: CertificateFacts) -> Bool {
        includesSystemRoots && !nonSystemAnchorDigests.contains(anchor.sha256)
    }

    /// Facts of a certificate the store holds (borrowed `X509 *`), computed once per certificate.
    func facts(ofStoreCertificate x509: OpaquePointer) -> CertificateFacts? {
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(x509)))
        if let known = anchorFacts.withLock({ $0[key] }) { return known }
        guard let certificate = try? Certificate(borrowing: x509) else { return nil }
        anchorFacts.withLock { $0[key] = certificate.facts }
        return certificate.facts
    }

    /// Whether `store` (borrowed) already holds `certificate`: looks up the certificates with its subject
    /// (`X509_STORE_CTX_get1_certs`, which also searches the hashed directory) and compares with `X509_cmp`.
    private static func contains(_ store: OpaquePointer, _ certificate: Certificate) throws(OpenSSLError) -> Bool {
        guard let context = X509_STORE_CTX_new() else { throw .drainingQueue(call: "X509_STORE_CTX_new") }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, nil, nil) == 1 else { throw .drainingQueue(call: "X509_STORE_CTX_init") }
        guard let matches = X509_STORE_CTX_get1_certs(context, X509_get_subject_name(certificate.raw)) else {
            ERR_clear_error()  // "no certificate with this subject" is an answer, not a failure
            return false
        }
        defer { c_openssl_sk_X509_pop_free(matches) }
        for index in 0..<c_openssl_sk_X509_num(matches) {
            if let candidate = c_openssl_sk_X509_value(matches, index), X509_cmp(candidate, certificate.raw) == 0 {
                return true
            }
        }
        return false
    }
}
