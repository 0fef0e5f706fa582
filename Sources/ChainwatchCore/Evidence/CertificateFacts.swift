/// What chainwatch knows about one certificate: everything the checks and the alert log need,
/// extracted once by the OpenSSL layer so that the checks stay pure.
public struct CertificateFacts: Sendable, Hashable {
    /// The public key's algorithm family.
    public enum KeyType: String, Sendable, Hashable { case rsa, ec, ed25519, ed448, dsa, other }

    /// SHA-256 of the DER encoding (the certificate fingerprint).
    public var sha256: [UInt8]
    /// SHA-256 of the DER SubjectPublicKeyInfo (the SPKI pin, as in HPKP and AFNetworking's public-key mode).
    public var spkiSHA256: [UInt8]
    /// Subject distinguished name, RFC 2253 form (`CN=leaf,O=Example`).
    public var subject: String
    /// Issuer distinguished name, RFC 2253 form.
    public var issuer: String
    /// Serial number, uppercase hex.
    public var serialHex: String
    public var notBefore: UnixTime
    public var notAfter: UnixTime
    /// DNS subjectAltNames, as written in the certificate (may hold `*.` wildcards).
    public var dnsNames: [String]
    /// IP subjectAltNames, printed (`127.0.0.1`, `::1`).
    public var ipAddresses: [String]
    /// subjectAltNames left out of `dnsNames` and `ipAddresses` by `withNames(atMost:)` (a known-bad mark's copy).
    public var namesOmitted = 0
    public var keyType: KeyType
    /// Key size in bits (RSA modulus, EC field size).
    public var keyBits: Int
    /// Signature algorithm's short name, e.g. `sha256WithRSAEncryption`, `ecdsa-with-SHA256`.
    public var signatureAlgorithm: String
    /// The digest of the signature, e.g. `SHA256`, `SHA1`, `MD5`; empty for algorithms without a separate digest (Ed25519).
    public var signatureDigest: String
    /// basicConstraints CA flag.
    public var isCA: Bool
    /// Whether subject and issuer are the same and the certificate verifies with its own key.
    public var isSelfSigned: Bool

    public init(sha256: [UInt8], spkiSHA256: [UInt8], subject: String, issuer: String, serialHex: String,
                notBefore: UnixTime, notAfter: UnixTime, dnsNames: [String], ipAddresses: [String],
                keyType: KeyType, keyBits: Int, signatureAlgorithm: String, signatureDigest: String,
                isCA: Bool, isSelfSigned: Bool) {
        self.sha256 = sha256; self.spkiSHA256 = spkiSHA256; self.subject = subject; self.issuer = issuer
        self.serialHex = serialHex; self.notBefore = notBefore; self.notAfter = notAfter
        self.dnsNames = dnsNames; self.ipAddresses = ipAddresses; self.keyType = keyType; self.keyBits = keyBits
        self.signatureAlgorithm = signatureAlgorithm; self.signatureDigest = signatureDigest
        self.isCA = isCA; self.isSelfSigned = isSelfSigned
    }
}

/// The result of building and validating a path with OpenSSL, as plain values.
public struct PathValidation: Sendable, Hashable {
    /// The certificates exactly as the server sent them, in order (leaf first).
    public var presented: [CertificateFacts]
    /// The path OpenSSL built, leaf first, anchor last; empty when no path could be built at all.
    /// When `error` is set this is the partial chain OpenSSL had when it stopped.
    public var path: [CertificateFacts]
    /// nil when the path validated (at the time given), else the failure.
    public var error: ValidationError?
    /// Where the anchor of `path` comes from; nil when the path reached no anchor.
    public var anchorKind: AnchorKind?

    public init(presented: [CertificateFacts], path: [CertificateFacts], error: ValidationError?, anchorKind: AnchorKind?) {
        self.presented = presented; self.path = path; self.error = error; self.anchorKind = anchorKind
    }
}

/// Where a trust anchor comes from: what trusting it means.
public enum AnchorKind: String, Sendable, Hashable, CaseIterable {
    /// A root of the public root program set (Mozilla's, as the OS's ca-certificates package ships it).
    case publicRoot = "public"
    /// A root in the OS trust store that is not in the public set: added on this machine (`update-ca-certificates`,
    /// a management profile). What a TLS-inspection gateway's CA looks like.
    case localRoot = "local"
    /// A CA the operator named (`--ca`, a policy's anchors): trusted deliberately.
    case operatorAnchor = "operator"
    /// A root in the OS trust store, when the public set could not be read: public and local cannot be told apart.
    case systemRoot = "system"
}

/// Why OpenSSL refused a path: the reason code plus OpenSSL's own words and the depth it failed at.
public struct ValidationError: Sendable, Hashable, Error {
    public var reason: Reason          // .untrustedChain, .expired, .notYetValid, .weakKey, .weakSignature, ...
    public var opensslCode: Int32      // X509_V_ERR_*
    public var message: String         // X509_verify_cert_error_string
    public var depth: Int              // 0 = leaf
    public init(reason: Reason, opensslCode: Int32, message: String, depth: Int) {
        self.reason = reason; self.opensslCode = opensslCode; self.message = message; self.depth = depth
    }
}

extension CertificateFacts {
    /// The most names an alert line lists per certificate, and a known-bad mark keeps: a leaf of 7 000 names wrote
    /// about 420 KiB per line, and its mark weighed as much (sixteen of them evicted every other mark). The line says
    /// how many were left out; the certificate's SHA-256 names the whole of it.
    public static let namesListed = 100

    /// This certificate with at most `max` subjectAltNames (DNS names first), the rest counted in `namesOmitted`.
    public func withNames(atMost max: Int) -> CertificateFacts {
        let total = dnsNames.count + ipAddresses.count
        guard total > max else { return self }
        var copy = self
        copy.dnsNames = Array(dnsNames.prefix(max))
        copy.ipAddresses = Array(ipAddresses.prefix(Swift.max(0, max - copy.dnsNames.count)))
        copy.namesOmitted += total - copy.dnsNames.count - copy.ipAddresses.count
        return copy
    }
}

extension Evidence {
    /// This evidence with each certificate's names bounded (`CertificateFacts.withNames(atMost:)`), for a
    /// known-bad mark, which keeps it for minutes.
    public func withNames(atMost max: Int = CertificateFacts.namesListed) -> Evidence {
        let over = { (c: CertificateFacts) in c.dnsNames.count + c.ipAddresses.count > max }
        guard validation.presented.contains(where: over) || validation.path.contains(where: over) else { return self }
        var copy = self
        copy.validation.presented = validation.presented.map { $0.withNames(atMost: max) }
        copy.validation.path = validation.path.map { $0.withNames(atMost: max) }
        copy.rendered = nil
        return copy
    }
}
