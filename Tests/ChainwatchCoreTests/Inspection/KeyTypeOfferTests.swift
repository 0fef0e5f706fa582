@testable import ChainwatchCore
import Testing

/// Whether a client's offer leaves a server with an RSA and an ECDSA certificate one choice (then its blocked verdict
/// marks the host known-bad for no one).
struct KeyTypeOfferTests {
    static func hello(schemes: [UInt16], suites: [UInt16]) -> ClientHello {
        ClientHello(legacyVersion: .tls1_2, random: [UInt8](repeating: 0, count: 32), sessionID: [],
                    cipherSuites: suites.map(CipherSuite.init(rawValue:)), serverName: "example.com",
                    supportedVersions: [.tls1_3, .tls1_2], alpnProtocols: [], offersPreSharedKey: false,
                    offersSessionTicket: false, signatureAlgorithms: schemes)
    }

    // ecdsa_secp256r1_sha256, rsa_pss_rsae_sha256, rsa_pkcs1_sha256; ECDHE-ECDSA- and ECDHE-RSA-AES128-GCM-SHA256.
    static let ecdsa: UInt16 = 0x0403, pss: UInt16 = 0x0804, pkcs1: UInt16 = 0x0401
    static let ecdsaSuite: UInt16 = 0xC02B, rsaSuite: UInt16 = 0xC02F, tls13Suite: UInt16 = 0x1301

    @Test func anOrdinaryOfferLeavesTheServerItsChoice() {
        let hello = Self.hello(schemes: [Self.ecdsa, Self.pss, Self.pkcs1], suites: [Self.tls13Suite, Self.ecdsaSuite, Self.rsaSuite])
        #expect(hello.onlyKeyType(version: .tls1_3) == nil)
        #expect(hello.onlyKeyType(version: .tls1_2) == nil)
        #expect(hello.onlyKeyType(version: nil) == nil)
    }

    @Test func signatureAlgorithmsOfOneKeyTypePickIt() {
        #expect(Self.hello(schemes: [Self.pss, Self.pkcs1], suites: [Self.tls13Suite]).onlyKeyType(version: .tls1_3) == .rsa)
        #expect(Self.hello(schemes: [Self.ecdsa], suites: [Self.tls13Suite]).onlyKeyType(version: .tls1_3) == .ec)
    }

    @Test func tls12SuitesOfOneKeyTypePickIt() {
        let rsaSuitesOnly = Self.hello(schemes: [Self.ecdsa, Self.pss], suites: [Self.tls13Suite, Self.rsaSuite])
        #expect(rsaSuitesOnly.onlyKeyType(version: .tls1_2) == .rsa)
        #expect(rsaSuitesOnly.onlyKeyType(version: .tls1_3) == nil)   // suites do not authenticate in 1.3
    }
}
