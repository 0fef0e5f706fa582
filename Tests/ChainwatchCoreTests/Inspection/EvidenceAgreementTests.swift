import Testing
@testable import ChainwatchCore

/// A TLS 1.3 tunnel's ServerHello against its probe's, on the captured TLS 1.3 handshakes.
@Suite struct EvidenceAgreementTests {
    /// The last ClientHello and the final ServerHello of a captured handshake.
    static func hellos(_ name: String) throws -> (client: ClientHello, server: ServerHello) {
        func facts(_ file: String) throws -> [HandshakeFact] {
            var observer = TLSObserver()
            observer.append(try TLSFixture.bytes(file))
            var facts: [HandshakeFact] = []
            while let fact = try observer.next() { facts.append(fact) }
            return facts
        }
        let client = try facts("\(name).c2s.bin").compactMap { if case .clientHello(let h) = $0 { h } else { nil } }.last
        let server = try facts("\(name).s2c.bin").compactMap { if case .serverHello(let h) = $0, !h.isHelloRetryRequest { h } else { nil } }.last
        return (try #require(client), try #require(server))
    }

    @Test func theSameServerAgreesWithItself() throws {
        let (client, hello) = try Self.hellos("tls13-rsa")
        #expect(EvidenceAgreement.disagreement(tunnel: hello, probe: hello, client: client, probeClient: client) == nil)
        var other = hello
        other.random = Array(repeating: 7, count: 32)   // randoms differ on every connection
        #expect(EvidenceAgreement.disagreement(tunnel: other, probe: hello, client: client, probeClient: client) == nil)
    }

    @Test func anotherSuiteGroupOrExtensionSetDisagreesWhenAskedTheSame() throws {
        let (client, probe) = try Self.hellos("tls13-rsa")
        var forged = probe
        forged.cipherSuite = CipherSuite(rawValue: probe.cipherSuite.rawValue == 0x1301 ? 0x1302 : 0x1301)
        #expect(EvidenceAgreement.disagreement(tunnel: forged, probe: probe, client: client, probeClient: client)?.contains("cipher suite") == true)
        forged = probe
        forged.keyShareGroup = 0x0017
        #expect(EvidenceAgreement.disagreement(tunnel: forged, probe: probe, client: client, probeClient: client)?.contains("key-share group") == true)
        forged = probe
        forged.extensionTypes.append(0x0029)
        #expect(EvidenceAgreement.disagreement(tunnel: forged, probe: probe, client: client, probeClient: client)?.contains("extensions") == true)
    }

    /// A genuine server may choose another group for a client with two key shares than for a probe with one (OpenSSL
    /// 3.0 sends one); another suite when the probe could not offer the client's. Those are no evidence.
    @Test func choicesTheProbeWasNotOfferedAlikeAreNotCompared() throws {
        let (client, probe) = try Self.hellos("tls13-rsa")
        var twoShares = client
        twoShares.keyShareGroups = [0x11EC, 0x001D]   // X25519MLKEM768 first, which OpenSSL 3.0 lacks
        twoShares.supportedGroups = [0x11EC] + client.supportedGroups
        var tunnel = probe
        tunnel.keyShareGroup = 0x11EC
        #expect(EvidenceAgreement.disagreement(tunnel: tunnel, probe: probe, client: twoShares, probeClient: client) == nil)

        var moreSuites = client
        moreSuites.cipherSuites.append(CipherSuite(rawValue: 0x1305))
        tunnel = probe
        tunnel.cipherSuite = CipherSuite(rawValue: 0x1305)
        #expect(EvidenceAgreement.disagreement(tunnel: tunnel, probe: probe, client: moreSuites, probeClient: client) == nil)
        // OpenSSL's own renegotiation SCSV in the probe's list does not make the offers differ.
        var withSCSV = client
        withSCSV.cipherSuites = client.cipherSuites.filter { $0.rawValue != 0x00FF } + [CipherSuite(rawValue: 0x00FF)]
        #expect(EvidenceAgreement.disagreement(tunnel: tunnel, probe: probe, client: client, probeClient: withSCSV)?.contains("cipher suite") == true)
    }

    @Test func aResumedTunnelIsNotCompared() throws {
        let (client, probe) = try Self.hellos("tls13-rsa")
        var resumed = probe
        resumed.acceptsPreSharedKey = true
        resumed.extensionTypes.append(0x0029)
        #expect(EvidenceAgreement.disagreement(tunnel: resumed, probe: probe, client: client, probeClient: client) == nil)
    }

    @Test func theProbesOwnServerHelloParsesFromItsMessage() throws {
        let (_, hello) = try Self.hellos("tls13-rsa")
        let s2c = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        let length = Int(s2c[3]) << 8 | Int(s2c[4])
        let parsed = try ServerHello.parse(handshakeMessage: s2c[5..<(5 + length)])
        #expect(parsed == hello)
    }
}
