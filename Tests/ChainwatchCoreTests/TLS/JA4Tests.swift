import Testing
@testable import ChainwatchCore

/// JA4 against the specification's worked example and against `Fixtures/tls/ja4.py`, an independent Python
/// implementation of the same specification run on the captured hellos.
@Suite struct JA4Tests {
    /// `ja4.py`'s output for the first ClientHello of each `*.c2s.bin`.
    static let fixtureFingerprints: [(String, String)] = [
        ("tls12-rsa", "t12d0208h2_b06afd972a5c_e7e480e5a997"),
        ("tls12-rsa-resumed", "t12d0209h2_b06afd972a5c_8932e62835fd"),
        ("tls12-ecdsa", "t12d0208h2_6a7d5ebe9983_e7e480e5a997"),
        ("tls13-rsa", "t13d1812h2_85036bcba153_d41ae481755e"),
        ("tls13-hrr", "t13d0411h2_16476d049b0b_78f1d400d464"),
    ]

    @Test(arguments: fixtureFingerprints)
    func fixtureHelloMatchesIndependentImplementation(_ name: String, _ expected: String) throws {
        let hello = try clientHello(observedFacts(TLSFixture.bytes("\(name).c2s.bin")))
        #expect(hello.ja4 == expected)
    }

    /// The example of technical_details/JA4.md ("JA4 = t13d1516h2_8daaf6152771_e5627efa2ab1").
    static func specificationExample() -> ClientHello {
        ClientHello(
            legacyVersion: .tls1_2, random: [], sessionID: [],
            cipherSuites: [0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8, 0xC013, 0xC014,
                           0x009C, 0x009D, 0x002F, 0x0035].map { CipherSuite(rawValue: $0) },
            serverName: "example.com", supportedVersions: [.tls1_3, .tls1_2], alpnProtocols: ["h2", "http/1.1"],
            offersPreSharedKey: false, offersSessionTicket: false,
            extensionTypes: [0x001B, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002D, 0x000D, 0x0005, 0x0023, 0x0012,
                             0x002B, 0xFF01, 0x000B, 0x000A, 0x0015],
            signatureAlgorithms: [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601])
    }

    @Test func specificationExample() {
        var hello = Self.specificationExample()
        #expect(hello.ja4 == "t13d1516h2_8daaf6152771_e5627efa2ab1")
        // "If there are no signature algorithms ... the string ends without an underscore" (= 6d807ffa2a79).
        hello.signatureAlgorithms = []
        #expect(hello.ja4 == "t13d1516h2_8daaf6152771_6d807ffa2a79")
    }

    /// The key a proxy remembers fingerprints by: hellos that differ only where JA4 does not look (random, session
    /// id, the server name's value) share it; a change JA4 sees gives another key and another fingerprint.
    @Test func ja4InputKeysTheFingerprint() {
        let hello = Self.specificationExample()
        var other = hello
        other.random = Array(repeating: 7, count: 32)
        other.sessionID = [1, 2, 3]
        other.serverName = "other.example"
        #expect(other.ja4Input == hello.ja4Input && other.ja4 == hello.ja4)
        for change in [{ (h: inout ClientHello) in h.signatureAlgorithms.removeLast() },
                       { h in h.cipherSuites.swapAt(0, 1) },   // order: the key differs though the sorted hash does not
                       { h in h.firstALPNBytes = Array("http/1.1".utf8) },
                       { h in h.supportedVersions = [.tls1_2] }] {
            var changed = hello
            change(&changed)
            #expect(changed.ja4Input != hello.ja4Input)
            #expect(changed.ja4Input.fingerprint == changed.ja4)
        }
    }

    @Test func noSNINoALPNNoSuitesNoExtensions() {
        var hello = Self.specificationExample()
        hello.extensionTypes = [0x0000, 0x0010]
        hello.cipherSuites = []
        hello.supportedVersions = []
        hello.legacyVersion = .tls1_0
        #expect(hello.ja4.hasPrefix("t10d0002h2_000000000000_000000000000"))
        hello.extensionTypes = []
        hello.firstALPNBytes = []
        #expect(hello.ja4 == "t10i0000" + "00_000000000000_000000000000")
    }

    @Test func countsAreCappedAt99() {
        var hello = Self.specificationExample()
        hello.cipherSuites = (0..<150).map { CipherSuite(rawValue: UInt16($0)) }
        #expect(hello.ja4.hasPrefix("t13d9916h2_"))
    }

    /// The specification's list of non-alphanumeric ALPN names.
    @Test func alpnHexRule() {
        let cases: [([UInt8], String)] = [
            ([0xAB], "ab"), ([0x20], "20"), ([0xAB, 0xCD], "ad"), ([0x20, 0x61], "21"), ([0x30, 0xAB], "3b"),
            ([0x61, 0x20], "60"), ([0x30, 0x31, 0xAB, 0xCD], "3d"), ([0x30, 0xAB, 0xCD, 0x31], "01"),
            (Array("http/1.1".utf8), "h1"), (Array("h".utf8), "hh"), ([], "00"),
        ]
        for (name, code) in cases { #expect(JA4.alpnCode(name) == code, "\(name)") }
    }

    @Test func nonUTF8ALPNNameKeepsItsBytes() throws {
        let hello = try clientHello(observedFacts(clientHelloRecord(extensions: [(16, vector(2, vector(1, [0xAB, 0xCD])))])))
        #expect(hello.ja4.hasPrefix("t12i0201ad_"))
    }
}
