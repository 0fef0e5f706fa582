import Testing
@testable import ChainwatchCore

/// Extension order (`HelloStack`): Chrome's permuted per mirror, every other stack's kept exactly; and the key
/// shares behind the probe's key_share.
@Suite struct HelloMirrorOrderTests {
    @Test(arguments: HelloFixture.permuting)
    func chromesOrderIsDrawnAfresh(_ name: String) throws {
        let client = try HelloParts(fixture: name)
        #expect(HelloStack(client).permutes)
        let first = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes(name), crypto: MirrorTestCrypto(seed: 1)).message)
        let second = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes(name), crypto: MirrorTestCrypto(seed: 2)).message)
        let clientTypes = client.types.filter { !isGREASE($0) && $0 != TLSExtensionType.preSharedKey }
        for probe in [first, second] {
            let types = probe.types.filter { !isGREASE($0) }
            #expect(types != clientTypes && types.sorted() == clientTypes.sorted())
            #expect(isGREASE(probe.types.first ?? 0) && isGREASE(probe.types.last ?? 0))
        }
        #expect(first.types.filter { !isGREASE($0) } != second.types.filter { !isGREASE($0) })
    }

    @Test(arguments: HelloFixture.ordered)
    func otherStacksKeepTheirOrder(_ name: String) throws {
        let client = try HelloParts(fixture: name)
        #expect(!HelloStack(client).permutes)
        let probe = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes(name), crypto: MirrorTestCrypto(seed: 3)).message)
        #expect(probe.types.map { isGREASE($0) ? 0 : $0 } == client.types.map { isGREASE($0) ? 0 : $0 })
    }

    /// The exchanges come back in key_share order, GREASE left out; an unsupported group gets random bytes of its
    /// length and no exchange.
    @Test(arguments: [("chrome-1", [0x11EC, 0x001D]), ("firefox", [0x11EC, 0x001D, 0x0017]),
                      ("gnutls", [0x0017, 0x001D]), ("curl", [0x001D]), ("safari", [0x11EC, 0x001D])] as [(String, [UInt16])])
    func keyExchangesFollowTheKeyShares(_ name: String, _ groups: [UInt16]) throws {
        let mirrored = try HelloMirror.mirror(HelloFixture.bytes(name), crypto: MirrorTestCrypto(seed: 4))
        #expect(mirrored.keyExchanges.map(\.group) == groups)
        let shares = try HelloParts(message: mirrored.message).keyShares().filter { !isGREASE($0.group) }
        #expect(shares.map(\.value) == mirrored.keyExchanges.map(\.publicShare))
    }

    @Test func anUnsupportedGroupGetsRandomBytesOfItsLength() throws {
        let hello = try HelloFixture.bytes("firefox")
        let mirrored = try HelloMirror.mirror(hello, crypto: MirrorTestCrypto(seed: 5, unsupported: [0x0017]))
        #expect(mirrored.keyExchanges.map(\.group) == [0x11EC, 0x001D])
        let theirs = try HelloParts(message: hello).keyShares(), mine = try HelloParts(message: mirrored.message).keyShares()
        #expect(mine.last?.group == 0x0017 && mine.last?.value.count == 65 && mine.last?.value != theirs.last?.value)
        #expect(mirrored.message.count == hello.count)
    }

    /// The real hellos' hybrid shares do not end in their x25519 share (curl_cffi 0.17's BoringSSL and NSS draw
    /// both): the probe's do not either. A hello whose hybrid does (edited from chrome-1) gets a probe whose does.
    @Test(arguments: ["chrome-1", "firefox", "safari"])
    func hybridX25519HalfFollowsTheClient(_ name: String) throws {
        let mirrored = try HelloMirror.mirror(HelloFixture.bytes(name), crypto: MirrorTestCrypto(seed: 6))
        let hybrid = try #require(mirrored.keyExchanges.first { $0.group == 0x11EC } as? MirrorTestKeyExchange)
        #expect(hybrid.x25519 == nil)
        let x25519 = try #require(mirrored.keyExchanges.first { $0.group == 0x001D })
        #expect(Array(hybrid.publicShare.suffix(32)) != x25519.publicShare)
    }

    @Test func hybridSharingItsX25519HalfKeepsSharing() throws {
        var client = try HelloParts(fixture: "chrome-1")
        let index = try #require(client.index(of: TLSExtensionType.keyShare))
        var entries = try client.keyShares()
        let hybrid = try #require(entries.firstIndex { $0.group == 0x11EC })
        let x25519 = try #require(entries.firstIndex { $0.group == 0x001D })
        entries[x25519].value = Array(entries[hybrid].value.suffix(32))
        client.extensions?[index].body = KeyShareEntry.encode(entries)
        let mirrored = try HelloMirror.mirror(client.encoded(), crypto: MirrorTestCrypto(seed: 6))
        let probeHybrid = try #require(mirrored.keyExchanges.first { $0.group == 0x11EC } as? MirrorTestKeyExchange)
        let probeX25519 = try #require(mirrored.keyExchanges.first { $0.group == 0x001D })
        #expect(probeHybrid.x25519 === probeX25519)
        #expect(Array(probeHybrid.publicShare.suffix(32)) == probeX25519.publicShare)
        #expect(try ClientHelloShape(mirrored.message) == ClientHelloShape(client.encoded()))
    }
}

/// Chrome's trust anchor IDs (0xCA34): the same set in a fresh order per connection, in the client's and the probe's.
@Suite struct HelloMirrorTrustAnchorTests {
    @Test(arguments: HelloFixture.permuting)
    func trustAnchorIDsAreReshuffled(_ name: String) throws {
        let client = try HelloParts(fixture: name)
        let probe = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes(name), crypto: MirrorTestCrypto(seed: 8)).message)
        let theirs = try TrustAnchorIDs.parse(#require(client.body(of: TrustAnchorIDs.type))).ids
        let mine = try TrustAnchorIDs.parse(#require(probe.body(of: TrustAnchorIDs.type))).ids
        #expect(theirs.count == 28 && mine != theirs)
        #expect(mine.sorted { $0.lexicographicallyPrecedes($1) } == theirs.sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test func chromeFixturesHoldOneSetInFourOrders() throws {
        let lists = try HelloFixture.permuting.map { name in
            try TrustAnchorIDs.parse(#require(HelloParts(fixture: name).body(of: TrustAnchorIDs.type))).ids
        }
        #expect(Set(lists).count == 4)
        #expect(Set(lists.map { $0.sorted { $0.lexicographicallyPrecedes($1) } }).count == 1)
    }
}
