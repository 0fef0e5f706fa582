/// The trust anchors a rule validates chains against: the system roots and/or its own CA certificates.
public struct Anchors: Sendable, Hashable {
    /// One CA certificate named by the policy, kept as DER for the OpenSSL layer to build a trust store from.
    public struct CACertificate: Sendable, Hashable {
        /// DER bytes of the certificate.
        public var der: [UInt8]
        /// Where it came from, for messages: a file path, or `inline (line N)`.
        public var origin: String
        public init(der: [UInt8], origin: String) { self.der = der; self.origin = origin }
    }

    /// Whether the system's root store is trusted.
    public var system: Bool
    /// The rule's own anchors (from PEM files or inline PEM).
    public var certificates: [CACertificate]

    public init(system: Bool, certificates: [CACertificate] = []) {
        self.system = system; self.certificates = certificates
    }

    /// System roots only: the built-in default.
    public static let systemOnly = Anchors(system: true)
}
