import Testing
@testable import ChainwatchCore

/// The ClientHello lists a probe mirrors, read from the captured hellos. Expected values come from `ja4.py` in
/// `Fixtures/tls`, an independent reading of the same bytes; the HelloRetryRequest client was started with
/// `openssl s_client -tls1_3 -groups X25519:P-256` (PROVENANCE.md), so it offers exactly those groups.
@Suite struct ClientHelloFactsTests {
    /// Python 3.11 `ssl` on OpenSSL 3.0: the signature algorithms of its TLS 1.2-capable hellos.
    static let pythonSignatureAlgorithms: [UInt16] = [
        0x0403, 0x0503, 0x0603, 0x0807, 0x0808, 0x0809, 0x080A, 0x080B, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501,
        0x0601, 0x0303, 0x0301, 0x0302, 0x0402, 0x0502, 0x0602,
    ]

    static func hello(_ file: String, chunkSize: Int = .max) throws -> ClientHello {
        try clientHello(observedFacts(TLSFixture.bytes(file), chunkSize: chunkSize))
    }

    /// The first handshake message of a client stream, without its record header.
    static func firstMessage(_ file: String) throws -> [UInt8] {
        let stream = try TLSFixture.bytes(file)
        let length = Int(stream[3]) << 8 | Int(stream[4])
        return Array(stream[5..<(5 + length)])
    }

    @Test func tls13ClientHelloListsGroupsSharesAndExtensions() throws {
        let hello = try Self.hello("tls13-rsa.c2s.bin")
        #expect(hello.extensionTypes == [0x0000, 0x000B, 0x000A, 0x0023, 0x0010, 0x0016, 0x0017, 0x000D, 0x002B,
                                         0x002D, 0x0033, 0x0015])
        #expect(hello.supportedGroups == [0x001D, 0x0017, 0x001E, 0x0019, 0x0018, 0x0100, 0x0101, 0x0102, 0x0103, 0x0104])
        #expect(hello.keyShareGroups == [0x001D])
        #expect(hello.signatureAlgorithms == Self.pythonSignatureAlgorithms)
        #expect(!hello.offersEarlyData)
    }

    @Test func hrrClientOffersTheGroupsItWasStartedWith() throws {
        let hello = try Self.hello("tls13-hrr.c2s.bin")
        #expect(hello.supportedGroups == [0x001D, 0x0017])  // X25519, P-256
        #expect(hello.keyShareGroups == [0x001D])
        #expect(hello.extensionTypes == [0x0000, 0x000B, 0x000A, 0x0023, 0x0010, 0x0016, 0x0017, 0x000D, 0x002B,
                                         0x002D, 0x0033])
        #expect(hello.signatureAlgorithms == Array(Self.pythonSignatureAlgorithms.prefix(14)))
    }

    @Test func tls12ClientHelloHasNoKeyShare() throws {
        let hello = try Self.hello("tls12-rsa.c2s.bin")
        #expect(hello.keyShareGroups.isEmpty)
        #expect(hello.supportedGroups == [0x001D, 0x0017, 0x001E, 0x0019, 0x0018])
        #expect(hello.extensionTypes == [0x0000, 0x000B, 0x000A, 0x0023, 0x0010, 0x0016, 0x0017, 0x000D])
    }

    @Test(arguments: TLSFixture.handshakes)
    func dripFedHelloGivesSameFacts(_ name: String) throws {
        #expect(try Self.hello("\(name).c2s.bin", chunkSize: 1) == Self.hello("\(name).c2s.bin"))
    }

    @Test(arguments: TLSFixture.handshakes)
    func handshakeMessageParsesLikeTheObserver(_ name: String) throws {
        let message = try Self.firstMessage("\(name).c2s.bin")
        #expect(try ClientHello.parse(handshakeMessage: message) == Self.hello("\(name).c2s.bin"))
    }

    @Test func handshakeMessageOfAnotherTypeOrLengthIsRejected() throws {
        let message = try Self.firstMessage("tls13-rsa.c2s.bin")
        #expect(throws: TLSParseError.unexpectedHandshakeType(2)) {
            try ClientHello.parse(handshakeMessage: [2] + message.dropFirst())
        }
        #expect(throws: TLSParseError.badLength(field: "Handshake.length", declared: message.count - 4,
                                                available: message.count - 5)) {
            try ClientHello.parse(handshakeMessage: message.dropLast())
        }
        #expect(throws: TLSParseError.truncatedField("Handshake.length")) {
            try ClientHello.parse(handshakeMessage: message.prefix(3))
        }
    }

    @Test func greaseIsLeftOutOfEveryList() throws {
        let grease: UInt16 = 0x3A3A
        let hello = try clientHello(observedFacts(clientHelloRecord(suites: [grease, 0x1301], extensions: [
            (grease, []),
            (10, vector(2, [grease, 0x001D].flatMap { uint16(Int($0)) })),
            (13, vector(2, [grease, 0x0804].flatMap { uint16(Int($0)) })),
            (51, vector(2, uint16(Int(grease)) + vector(2, [0]) + uint16(0x1D) + vector(2, [1, 2]))),
            (42, []),
        ])))
        #expect(hello.cipherSuites == [CipherSuite(rawValue: 0x1301)])
        #expect(hello.extensionTypes == [10, 13, 51, 42])
        #expect(hello.supportedGroups == [0x001D])
        #expect(hello.signatureAlgorithms == [0x0804])
        #expect(hello.keyShareGroups == [0x001D])
        #expect(hello.offersEarlyData)
    }

    @Test func oddLengthGroupListIsTruncated() throws {
        let observation = observe(clientHelloRecord(extensions: [(10, vector(2, [0, 0x1D, 0]))]))
        #expect(observation.error == .truncatedField("ClientHello.supported_groups"))
        let shares = observe(clientHelloRecord(extensions: [(51, vector(2, uint16(0x1D) + [0, 5, 1]))]))
        #expect(shares.error == .badLength(field: "ClientHello.key_share.key_exchange", declared: 5, available: 1))
    }

    @Test func offerMirrorsEveryField() throws {
        let hello = try Self.hello("tls13-rsa.c2s.bin")
        let offer = ClientOffer(mirroring: hello)
        // The hello itself rides along for the probe to mirror, and its shape keys the offer.
        #expect(offer.template?.message == hello.message && hello.message.count == 512)
        #expect(offer.shape == (try ClientHelloShape(hello.message)) && offer.shape?.bytes.isEmpty == false)
        var fields = offer
        fields.shape = nil
        fields.template = nil
        #expect(fields == ClientOffer(
            serverName: "tls13.chainwatch.test", alpn: ["h2", "http/1.1"], versions: [.tls1_3, .tls1_2],
            legacyVersion: .tls1_2, cipherSuites: hello.cipherSuites.map(\.rawValue),
            supportedGroups: hello.supportedGroups, keyShareGroups: [0x001D],
            signatureAlgorithms: Self.pythonSignatureAlgorithms, extensionTypes: hello.extensionTypes))
        #expect(offer.cipherSuites.first == 0x1302 && offer.cipherSuites.count == 18)
        #expect(offer.maximumVersion == hello.maximumVersion)
    }
}
