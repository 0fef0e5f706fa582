internal import COpenSSL
public import ChainwatchCore
import ChainwatchLock

/// A set of trust anchors for path validation: the system roots, a rule's own anchors, or both; and what kind of
/// anchor each is (`AnchorKind`).
///
/// Owns one `X509_STORE *`. Build it once (loading the system roots parses the whole bundle) and share it:
/// it is `@unchecked Sendable` because nothing mutates the store after init (it has no lookups that would fill a
/// cache: every anchor is added at init), and `X509_verify_cert` only reads the store through an `X509_STORE_CTX` of
/// its own. The facts cache below is behind a `Lock`.
public final class TrustStore: @unchecked Sendable {
    /// The `X509_STORE *` this object owns.
    package let raw: OpaquePointer
    /// Whether the system roots (`SystemRoots`: OpenSSL's default bundle and hashed directory, Debian's
    /// `ca-certificates.crt` and `/etc/ssl/certs`, or `SSL_CERT_FILE` / `SSL_CERT_DIR`) are anchors.
    public let includesSystemRoots: Bool
    /// The anchors the operator named (a rule's own, `--ca`), in order.
    public let extraAnchors: [Certificate]
    /// SHA-256 of `extraAnchors`: an anchor the operator named is `.operatorAnchor`, also when the OS store has it.
    private let operatorDigests: Set<[UInt8]>
    /// The public set that tells public system roots from local ones; nil when it could not be read.
    public let publicRoots: PublicRoots?
    /// Anchors already seen, by `X509 *` address. Sound because the store keeps every certificate it has loaded
    /// (and so its address) until it is freed in deinit, and each `Certificate` here holds a reference of its own.
    private let anchorCertificates: Lock<[UInt: Certificate]>

    /// Builds a store from the system roots (when `systemRoots`) and `extraAnchors`.
    /// - Parameter publicRoots: the public root set; without it, system roots are `.systemRoot` (kind unknown).
    public init(systemRoots: Bool, extraAnchors: [Certificate] = [], publicRoots: PublicRoots? = nil) throws(OpenSSLError) {
        ERR_clear_error()
        guard let store = X509_STORE_new() else { throw .drainingQueue(call: "X509_STORE_new") }
        raw = store
        includesSystemRoots = systemRoots
        self.extraAnchors = extraAnchors
        self.publicRoots = publicRoots
        operatorDigests = Set(extraAnchors.map(\.facts.sha256))
        anchorCertificates = Lock([:])
        // The system roots in memory (`SystemRoots`), not `X509_STORE_set_default_paths`, whose directory lookups
        // went to the filesystem for every issuer not loaded: every validation.
        let anchors = (systemRoots ? SystemRoots.load() : []) + extraAnchors
        for anchor in anchors {
            // X509_STORE_add_cert takes its own reference; a certificate already present is not an error.
            guard X509_STORE_add_cert(store, anchor.raw) == 1 else {
                X509_STORE_free(store)
                throw .drainingQueue(call: "X509_STORE_add_cert")
            }
        }
        ERR_clear_error()
        anchorCertificates.withLock { cache in
            for anchor in anchors { cache[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(anchor.raw)))] = anchor }
        }
    }

    /// A store with the system roots only.
    public static func system(publicRoots: PublicRoots? = nil) throws(OpenSSLError) -> TrustStore {
        try TrustStore(systemRoots: true, publicRoots: publicRoots)
    }

    deinit { X509_STORE_free(raw) }

    /// What kind of anchor a path ending at a certificate of this store is: one the operator named, else (the store
    /// holds nothing else) a system root, public or local by the public set.
    public func kind(ofAnchor anchor: CertificateFacts) -> AnchorKind {
        if operatorDigests.contains(anchor.sha256) || !includesSystemRoots { return .operatorAnchor }
        guard let publicRoots else { return .systemRoot }
        return publicRoots.contains(anchor) ? .publicRoot : .localRoot
    }

    /// Facts of a certificate the store holds (borrowed `X509 *`), computed once per certificate.
    func facts(ofStoreCertificate x509: OpaquePointer) -> CertificateFacts? {
        certificate(ofStoreCertificate: x509)?.facts
    }

    /// A certificate the store holds (borrowed `X509 *`), wrapped once per certificate: the anchors it was built from
    /// (with the bytes they were read from), else OpenSSL's encoding of it.
    func certificate(ofStoreCertificate x509: OpaquePointer) -> Certificate? {
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(x509)))
        if let known = anchorCertificates.withLock({ $0[key] }) { return known }
        guard let certificate = try? Certificate(borrowing: x509) else { return nil }
        anchorCertificates.withLock { $0[key] = certificate }
        return certificate
    }
}
