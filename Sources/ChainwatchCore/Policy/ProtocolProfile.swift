/// A TLS protocol version as its wire value (named `ProtocolVersion` to stay clear of the TLS parser's own type).
public struct ProtocolVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var wireValue: UInt16
    public init(wireValue: UInt16) { self.wireValue = wireValue }

    public static let ssl3 = ProtocolVersion(wireValue: 0x0300)
    public static let tls10 = ProtocolVersion(wireValue: 0x0301)
    public static let tls11 = ProtocolVersion(wireValue: 0x0302)
    public static let tls12 = ProtocolVersion(wireValue: 0x0303)
    public static let tls13 = ProtocolVersion(wireValue: 0x0304)

    public static func < (a: ProtocolVersion, b: ProtocolVersion) -> Bool { a.wireValue < b.wireValue }

    /// `TLS 1.2`, `SSL 3.0`, or the hex wire value for anything else.
    public var description: String {
        switch wireValue {
        case 0x0300: return "SSL 3.0"
        case 0x0301...0x0304: return "TLS 1.\(wireValue - 0x0301)"
        default:
            let hex = String(wireValue, radix: 16, uppercase: true)
            return "0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }
    }

    /// Parses `1.0`…`1.3` or `TLS 1.2` / `tls1.2` / `TLSv1.2`.
    public init?(policyText text: String) {
        var t = HostName.normalize(text)
        for prefix in ["tlsv", "tls ", "tls"] where t.hasPrefix(prefix) { t = String(t.dropFirst(prefix.count)); break }
        switch t {
        case "1.0", "1": self = .tls10
        case "1.1": self = .tls11
        case "1.2": self = .tls12
        case "1.3": self = .tls13
        default: return nil
        }
    }
}

/// The negotiated cipher suite as the checks need it: its name and whether its key exchange is forward secret.
public struct NegotiatedCipher: Sendable, Hashable {
    /// IANA or OpenSSL name, for the log.
    public var name: String
    /// nil: unknown (the check then passes: it cannot tell).
    public var forwardSecret: Bool?
    public init(name: String, forwardSecret: Bool?) { self.name = name; self.forwardSecret = forwardSecret }

    /// From the wire code point: the IANA name and forward secrecy when the suite is known, else its hex and unknown.
    public init(_ suite: CipherSuite) {
        name = suite.name ?? suite.description
        forwardSecret = suite.name == nil ? nil : suite.isForwardSecret
    }
}

/// A protocol floor: the minimum version and, optionally, App Transport Security style strength requirements.
public struct ProtocolProfile: Sendable, Hashable {
    /// The name it was given in the policy (`ats`, or `custom`).
    public var name: String
    public var minVersion: ProtocolVersion?
    /// Minimum signature hash strength in bits (256 = SHA-256); nil: not checked.
    public var minSignatureHashBits: Int?
    public var minRSABits: Int?
    public var minECBits: Int?
    public var requireForwardSecrecy: Bool

    public init(name: String = "custom", minVersion: ProtocolVersion? = nil, minSignatureHashBits: Int? = nil,
                minRSABits: Int? = nil, minECBits: Int? = nil, requireForwardSecrecy: Bool = false) {
        self.name = name; self.minVersion = minVersion; self.minSignatureHashBits = minSignatureHashBits
        self.minRSABits = minRSABits; self.minECBits = minECBits; self.requireForwardSecrecy = requireForwardSecrecy
    }

    /// Apple's App Transport Security: TLS 1.2+, SHA-256+ signatures, RSA ≥ 2048 / EC ≥ 256, forward secrecy.
    public static let ats = ProtocolProfile(name: "ats", minVersion: .tls12, minSignatureHashBits: 256,
                                            minRSABits: 2048, minECBits: 256, requireForwardSecrecy: true)

    /// Strength in bits of a signature digest name (`SHA256` → 256, `SHA1` → 160); nil when unknown.
    /// An empty digest (Ed25519, Ed448: the hash is part of the algorithm) counts as strong.
    public static func digestBits(_ digest: String) -> Int? {
        let d = HostName.normalize(digest).filter { $0 != "-" && $0 != "_" }
        switch d {
        case "": return 512
        case "md2", "md4", "md5": return 128
        case "sha1": return 160
        case "sha224", "sha3224": return 224
        case "sha256", "sha3256", "sm3": return 256
        case "sha384", "sha3384": return 384
        case "sha512", "sha3512": return 512
        default: return nil
        }
    }
}
