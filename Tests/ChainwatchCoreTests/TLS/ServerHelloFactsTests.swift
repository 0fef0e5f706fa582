import Testing
@testable import ChainwatchCore

/// The ServerHello facts a TLS 1.3 tunnel is compared on, read from the captured hellos (values checked against a
/// separate reading of the fixture bytes).
@Suite struct ServerHelloFactsTests {
    @Test func tls13ServerHelloNamesItsKeyShareGroup() throws {
        let hello = try #require(serverHellos(observedFacts(TLSFixture.bytes("tls13-rsa.s2c.bin"))).first)
        #expect(hello.extensionTypes == [0x002B, 0x0033])
        #expect(hello.keyShareGroup == 0x001D)  // X25519, the client's first share
    }

    @Test func helloRetryRequestNamesTheSelectedGroup() throws {
        let hellos = serverHellos(try observedFacts(TLSFixture.bytes("tls13-hrr.s2c.bin")))
        #expect(hellos.map(\.extensionTypes) == [[0x002B, 0x0033], [0x002B, 0x0033]])
        // s_server -groups P-256 refused the X25519 share and asked for P-256; the second hello uses it.
        #expect(hellos.map(\.keyShareGroup) == [0x0017, 0x0017])
    }

    @Test func tls12ServerHelloHasNoKeyShare() throws {
        let hello = try #require(serverHellos(observedFacts(TLSFixture.bytes("tls12-rsa.s2c.bin"))).first)
        #expect(hello.extensionTypes == [0xFF01, 0x000B, 0x0023, 0x0010, 0x0017])
        #expect(hello.keyShareGroup == nil)
        let resumed = try #require(serverHellos(observedFacts(TLSFixture.bytes("tls12-rsa-resumed.s2c.bin"))).first)
        #expect(resumed.extensionTypes == [0xFF01, 0x0010, 0x0017])
    }

    /// A TLS 1.3 ServerHello record built from parts.
    static func serverHelloRecord(random: [UInt8] = [UInt8](repeating: 0x5A, count: 32),
                                  extensions: [(type: UInt16, data: [UInt8])]) -> [UInt8] {
        var body: [UInt8] = [0x03, 0x03] + random + [0] + uint16(0x1301) + [0]
        body += vector(2, extensions.flatMap { uint16(Int($0.type)) + vector(2, $0.data) })
        return record(22, handshakeMessage(2, body))
    }

    @Test func keyShareOfTheWrongShapeIsRejected() {
        let versions: (UInt16, [UInt8]) = (43, uint16(0x0304))
        // A ServerHello's share carries a key; a HelloRetryRequest's names only the group.
        let bare = observe(Self.serverHelloRecord(extensions: [versions, (51, uint16(0x1D))]))
        #expect(bare.error == .truncatedField("ServerHello.key_share.key_exchange"))
        let retryWithKey = observe(Self.serverHelloRecord(random: ServerHello.helloRetryRequestRandom,
                                                          extensions: [versions, (51, uint16(0x17) + vector(2, [1]))]))
        #expect(retryWithKey.error == .trailingBytes("ServerHello.key_share"))
        let good = observe(Self.serverHelloRecord(extensions: [versions, (51, uint16(0x1D) + vector(2, [1, 2]))]))
        #expect(serverHellos(good.facts).map(\.keyShareGroup) == [0x1D])
    }
}
