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
    public var minVersion: TLSVersion?
    /// Minimum signature hash strength in bits (256 = SHA-256); nil: not checked.
    public var minSignatureHashBits: Int?
    public var minRSABits: Int?
    public var minECBits: Int?
    public var requireForwardSecrecy: Bool

    public init(name: String = "custom", minVersion: TLSVersion? = nil, minSignatureHashBits: Int? = nil,
                minRSABits: Int? = nil, minECBits: Int? = nil, requireForwardSecrecy: Bool = false) {
        self.name = name; self.minVersion = minVersion; self.minSignatureHashBits = minSignatureHashBits
        self.minRSABits = minRSABits; self.minECBits = minECBits; self.requireForwardSecrecy = requireForwardSecrecy
    }

    /// Apple's App Transport Security: TLS 1.2+, SHA-256+ signatures, RSA ≥ 2048 / EC ≥ 256, forward secrecy.
    public static let ats = ProtocolProfile(name: "ats", minVersion: .tls1_2, minSignatureHashBits: 256,
                                            minRSABits: 2048, minECBits: 256, requireForwardSecrecy: true)

    /// A minimum's name for messages: `SHA-1` for 160 bits, `SHA-256` for 256.
    public static func digestName(bits: Int) -> String { bits == 160 ? "SHA-1" : "SHA-\(bits)" }

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
