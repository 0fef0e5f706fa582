/// A TLS cipher suite code point, with its IANA name when it is one of the common suites.
public struct CipherSuite: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The IANA name (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`), or nil for a suite outside `CipherSuite.ianaNames`.
    public var name: String? { Self.ianaNames[rawValue] }

    /// Whether a session with this suite has forward secrecy: every TLS 1.3 suite, and the (EC)DHE suites of
    /// earlier versions. An unknown suite counts as not forward secret.
    public var isForwardSecret: Bool {
        guard let name else { return false }
        return isTLS13 || name.hasPrefix("TLS_ECDHE_") || name.hasPrefix("TLS_DHE_")
    }

    /// Whether this is one of the named TLS 1.3 suites (`0x1301`-`0x1305`), which fix only the AEAD and the hash.
    public var isTLS13: Bool { rawValue >> 8 == 0x13 && name != nil }

    /// The IANA name, else the hex value (`0x1234`).
    public var description: String { name ?? rawValue.hexDescription }
}
