import Testing
@testable import ChainwatchCore

/// The second hello after a HelloRetryRequest, and malformed input.
@Suite struct HelloMirrorRetryTests {
    static let cookie: [UInt8] = Array(0..<40)

    /// Each fixture with the extension its stack puts right before the cookie (nil: Chrome, a random place among
    /// its permuted extensions).
    static let cookiePlaces: [(String, UInt16?)] = [
        ("chrome-1", nil), ("chrome-3", nil), ("firefox", 0x000D), ("safari", 0x002B), ("edge", 0x002B),
        ("curl", 0x0033), ("python-ssl", 0x0033), ("gnutls", 0x0000),
    ]

    @Test(arguments: cookiePlaces)
    func retryForSecp256r1WithACookie(_ name: String, _ beforeCookie: UInt16?) throws {
        let crypto = MirrorTestCrypto(seed: 9)
        let first = try HelloMirror.mirror(HelloFixture.bytes(name), crypto: crypto)
        let firstParts = try HelloParts(message: first.message)
        let alreadyShared = try firstParts.keyShares().contains { $0.group == 0x0017 }
        let group: UInt16 = alreadyShared ? 0x0018 : 0x0017
        let retry = try first.retry(group: group, cookie: Self.cookie, crypto: crypto)
        let parts = try HelloParts(message: retry.message)
        let shares = try parts.keyShares()
        #expect(shares.map(\.group) == [group] && shares.first?.value.count == (group == 0x0017 ? 65 : 97))
        #expect(retry.keyExchanges.map(\.group) == [group] && shares.first?.value == retry.keyExchanges.first?.publicShare)
        #expect(parts.body(of: 44) == [0, 40] + Self.cookie)
        #expect(parts.index(of: TLSExtensionType.earlyData) == nil)
        let cookieIndex = try #require(parts.index(of: 44))
        if let beforeCookie {
            #expect(parts.types[cookieIndex - 1] == beforeCookie)
        } else {
            #expect(cookieIndex > 0 && cookieIndex < parts.types.count - 1)
            #expect(isGREASE(parts.types[0]) && isGREASE(parts.types[parts.types.count - 1]))
        }
        // Everything else as in the first hello: GREASE values, order, random, session id, suites, ECH, ...
        var expected = firstParts
        let index = try #require(expected.index(of: TLSExtensionType.keyShare))
        expected.extensions?[index].body = KeyShareEntry.encode(shares)
        expected.extensions?.insert(.init(type: 44, body: [0, 40] + Self.cookie), at: cookieIndex)
        expected.extensions?.removeAll { $0.type == 21 }
        var unpadded = parts
        unpadded.extensions?.removeAll { $0.type == 21 }
        #expect(unpadded == expected)
    }

    /// BoringSSL does not pad its second ClientHello; OpenSSL pads it by the same rule as the first (Python's retry
    /// for secp256r1 with a 40-byte cookie is 359 bytes unpadded: 280 as sent, 33 more for the P-256 share, 46 for the
    /// cookie; padded to 512).
    @Test func retryPadding() throws {
        let crypto = MirrorTestCrypto(seed: 15)
        let edge = try HelloMirror.mirror(HelloFixture.bytes("edge"), crypto: crypto)
        #expect(try HelloParts(message: edge.message).index(of: 21) != nil)
        let edgeRetry = try edge.retry(group: 0x0017, cookie: Self.cookie, crypto: crypto)
        #expect(try HelloParts(message: edgeRetry.message).index(of: 21) == nil)
        let python = try HelloMirror.mirror(HelloFixture.bytes("python-ssl"), crypto: crypto)
        let pythonRetry = try python.retry(group: 0x0017, cookie: Self.cookie, crypto: crypto)
        #expect(pythonRetry.message.count == 512)
        #expect(try HelloParts(message: pythonRetry.message).body(of: 21)?.count == 512 - 359 - 4)
    }

    @Test func retryWithoutGroupKeepsTheShares() throws {
        let crypto = MirrorTestCrypto(seed: 10)
        let first = try HelloMirror.mirror(HelloFixture.bytes("chrome-2"), crypto: crypto)
        let retry = try first.retry(group: nil, cookie: Self.cookie, crypto: crypto)
        #expect(try HelloParts(message: retry.message).keyShares() == HelloParts(message: first.message).keyShares())
        #expect(retry.keyExchanges.map(\.group) == first.keyExchanges.map(\.group))
        let noCookie = try first.retry(group: nil, cookie: nil, crypto: crypto)
        #expect(noCookie.message == first.message)
    }

    @Test func retryRefusesWhatTheClientWouldRefuse() throws {
        let crypto = MirrorTestCrypto(seed: 11)
        let first = try HelloMirror.mirror(HelloFixture.bytes("chrome-1"), crypto: crypto)
        #expect(throws: HelloMirrorError.retryGroupAlreadyShared(0x001D)) { try first.retry(group: 0x001D, cookie: nil, crypto: crypto) }
        #expect(throws: HelloMirrorError.retryGroupNotOffered(0x0019)) { try first.retry(group: 0x0019, cookie: nil, crypto: crypto) }
        let limited = MirrorTestCrypto(seed: 12, unsupported: [0x0018])
        #expect(throws: HelloMirrorError.retryGroupUnsupported(0x0018)) { try first.retry(group: 0x0018, cookie: nil, crypto: limited) }
    }

    @Test func malformedHellosThrowNamedErrors() throws {
        let hello = try HelloFixture.bytes("curl")
        let crypto = MirrorTestCrypto(seed: 13)
        for length in 0..<hello.count {
            #expect(throws: HelloMirrorError.self) { try HelloMirror.mirror(Array(hello.prefix(length)), crypto: crypto) }
            #expect(throws: HelloMirrorError.self) { try ClientHelloShape(Array(hello.prefix(length))) }
        }
        #expect(throws: HelloMirrorError.notClientHello(handshakeType: 2)) { try HelloMirror.mirror([2] + hello.dropFirst(), crypto: crypto) }
        var duplicate = try HelloParts(message: hello)
        duplicate.extensions?.append(.init(type: 0x0017, body: []))
        #expect(throws: HelloMirrorError.duplicateExtension(0x0017)) { try HelloMirror.mirror(duplicate.encoded(), crypto: crypto) }
        var badShare = try HelloParts(message: hello)
        let index = try #require(badShare.index(of: TLSExtensionType.keyShare))
        badShare.extensions?[index].body.removeLast()
        #expect(throws: HelloMirrorError.malformedExtension(TLSExtensionType.keyShare)) { try HelloMirror.mirror(badShare.encoded(), crypto: crypto) }
        #expect(throws: HelloMirrorError.keyShareLengthMismatch(group: 0x001D, client: 32, probe: 31)) {
            try HelloMirror.mirror(hello, crypto: MirrorTestCrypto(seed: 14, shortGroups: [0x001D]))
        }
        #expect(throws: HelloMirrorError.badLength(field: "ClientHello handshake message")) { try HelloMirror.mirror(hello + [0], crypto: crypto) }
    }
}
