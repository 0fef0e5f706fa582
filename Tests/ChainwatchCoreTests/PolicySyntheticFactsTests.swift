import Testing
@testable import ChainwatchCore

/// Synthetic certificates and evidence for the pure policy tests: hashes are repeated bytes, so pins are readable.
enum Synthetic {
    static func cert(_ subject: String, issuer: String? = nil, sha: UInt8, spki: UInt8, dns: [String] = [], ips: [String] = [],
                     key: CertificateFacts.KeyType = .ec, bits: Int = 256, digest: String = "SHA256", ca: Bool = false,
                     notAfter: Int64 = 2_000_000_000) -> CertificateFacts {
        CertificateFacts(sha256: [UInt8](repeating: sha, count: 32), spkiSHA256: [UInt8](repeating: spki, count: 32),
                         subject: subject, issuer: issuer ?? subject, serialHex: "01",
                         notBefore: UnixTime(seconds: 1_600_000_000), notAfter: UnixTime(seconds: notAfter),
                         dnsNames: dns, ipAddresses: ips, keyType: key, keyBits: bits,
                         signatureAlgorithm: digest == "SHA256" ? "ecdsa-with-SHA256" : "sha1WithRSAEncryption",
                         signatureDigest: digest, isCA: ca, isSelfSigned: issuer == nil)
    }

    static let root = cert("CN=Root,O=CA", sha: 0xA1, spki: 0x11, ca: true)
    static let intermediate = cert("CN=Intermediate,O=CA", issuer: "CN=Root,O=CA", sha: 0xA3, spki: 0x33, ca: true)
    static let leaf = cert("CN=api.example.com,O=Example", issuer: "CN=Intermediate,O=CA", sha: 0xA5, spki: 0x55,
                           dns: ["api.example.com", "*.api.example.com"])
    static let goodPath = [leaf, intermediate, root]

    /// A forged chain: same names, other keys, anchored on an installed interception CA.
    static let forgedRoot = cert("CN=Root,O=CA", sha: 0xF1, spki: 0xF1, ca: true)
    static let forgedIntermediate = cert("CN=Intermediate,O=CA", issuer: "CN=Root,O=CA", sha: 0xF3, spki: 0xF3, ca: true)
    static let forgedLeaf = cert("CN=api.example.com,O=Example", issuer: "CN=Intermediate,O=CA", sha: 0xF5, spki: 0xF5,
                                 dns: ["api.example.com"])
    static let forgedPath = [forgedLeaf, forgedIntermediate, forgedRoot]

    static func evidence(host: String = "api.example.com", sni: String? = nil, port: UInt16 = 443, path: [CertificateFacts] = goodPath,
                         error: ValidationError? = nil, anchor: AnchorKind? = .publicRoot, version: TLSVersion? = .tls1_3,
                         cipher: NegotiatedCipher? = NegotiatedCipher(name: "TLS_AES_128_GCM_SHA256", forwardSecret: true)) -> Evidence {
        Evidence(connectHost: host, serverName: sni ?? host, port: port, protocolVersion: version, cipher: cipher,
                 validation: PathValidation(presented: path, path: path, error: error, anchorKind: anchor),
                 source: .passive)
    }

    static func pin(_ byte: UInt8) -> Fingerprint { Fingerprint(bytes: [UInt8](repeating: byte, count: 32))! }
    static let now = UnixTime(seconds: 1_800_000_000)
}

@Test func syntheticGoodPathIsLeafFirstAnchorLast() {
    #expect(Synthetic.goodPath.first?.subject == "CN=api.example.com,O=Example")
    #expect(Synthetic.goodPath.last?.isCA == true)
}
