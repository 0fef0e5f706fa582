import Testing
@testable import ChainwatchCore

/// A TLS 1.3 tunnel's ServerHello against its probe's, on the captured TLS 1.3 handshakes.
@Suite struct EvidenceAgreementTests {
    static func serverHello(_ name: String) throws -> ServerHello {
        var observer = TLSObserver()
        observer.append(try TLSFixture.bytes("\(name).s2c.bin"))
        var last: ServerHello?
        while let fact = try observer.next() {
            if case .serverHello(let hello) = fact, !hello.isHelloRetryRequest { last = hello }
        }
        return try #require(last)
    }

    @Test func theSameServerAgreesWithItself() throws {
        let hello = try Self.serverHello("tls13-rsa")
        #expect(EvidenceAgreement.disagreement(tunnel: hello, probe: hello) == nil)
        var other = hello
        other.random = Array(repeating: 7, count: 32)   // randoms differ on every connection
        #expect(EvidenceAgreement.disagreement(tunnel: other, probe: hello) == nil)
    }

    @Test func anotherSuiteGroupOrExtensionSetDisagrees() throws {
        let probe = try Self.serverHello("tls13-rsa")
        var forged = probe
        forged.cipherSuite = CipherSuite(rawValue: probe.cipherSuite.rawValue == 0x1301 ? 0x1302 : 0x1301)
        #expect(EvidenceAgreement.disagreement(tunnel: forged, probe: probe)?.contains("cipher suite") == true)
        forged = probe
        forged.keyShareGroup = 0x0017
        #expect(EvidenceAgreement.disagreement(tunnel: forged, probe: probe)?.contains("key-share group") == true)
        forged = probe
        forged.extensionTypes.append(0x0029)
        #expect(EvidenceAgreement.disagreement(tunnel: forged, probe: probe)?.contains("extensions") == true)
        // The HRR fixture's server chose another group than the plain one's: the two are not interchangeable.
        let hrr = try Self.serverHello("tls13-hrr")
        #expect(EvidenceAgreement.disagreement(tunnel: hrr, probe: probe) != nil)
    }

    @Test func aResumedTunnelIsNotCompared() throws {
        let probe = try Self.serverHello("tls13-rsa")
        var resumed = probe
        resumed.acceptsPreSharedKey = true
        resumed.extensionTypes.append(0x0029)
        #expect(EvidenceAgreement.disagreement(tunnel: resumed, probe: probe) == nil)
    }

    @Test func theProbesOwnServerHelloParsesFromItsMessage() throws {
        let hello = try Self.serverHello("tls13-rsa")
        let s2c = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        let length = Int(s2c[3]) << 8 | Int(s2c[4])
        let parsed = try ServerHello.parse(handshakeMessage: s2c[5..<(5 + length)])
        #expect(parsed == hello)
    }
}
