import Testing
@testable import ChainwatchCore

/// The probe's hello against the real clients' hellos of `Fixtures/hellos`: the same shape, every per-connection
/// part fresh.
@Suite struct HelloMirrorTests {
    static func mirror(_ name: String, seed: UInt64 = 1) throws -> (client: HelloParts, probe: HelloParts, MirroredHello) {
        let hello = try HelloFixture.bytes(name)
        let mirrored = try HelloMirror.mirror(hello, crypto: MirrorTestCrypto(seed: seed))
        return (try HelloParts(message: hello), try HelloParts(message: mirrored.message), mirrored)
    }

    @Test(arguments: HelloFixture.all)
    func mirrorHasTheClientsShape(_ name: String) throws {
        let hello = try HelloFixture.bytes(name)
        let mirrored = try HelloMirror.mirror(hello, crypto: MirrorTestCrypto(seed: 7))
        #expect(try ClientHelloShape(mirrored.message) == ClientHelloShape(hello))
    }

    /// The padding rule reproduces each fixture's own padding (edge, curl and python-ssl are padded to 512; the
    /// others are not padded), so the probe is exactly as long as the client's hello.
    /// (Chrome's ECH GREASE payload length is drawn per connection: the lengths are compared without it.)
    @Test(arguments: HelloFixture.fresh)
    func mirrorOfAFreshHelloHasItsLength(_ name: String) throws {
        let (client, probe, mirrored) = try Self.mirror(name)
        let drawn = (try probe.ech()?.payload.count ?? 0) - (try client.ech()?.payload.count ?? 0)
        #expect(mirrored.message.count - drawn == (try HelloFixture.bytes(name)).count)
        #expect(probe.body(of: 21) == client.body(of: 21))
    }

    @Test(arguments: HelloFixture.all)
    func everyPerConnectionPartIsFresh(_ name: String) throws {
        let (client, probe, _) = try Self.mirror(name)
        #expect(probe.random.count == 32 && probe.random != client.random)
        #expect(probe.sessionID.count == client.sessionID.count)
        if !client.sessionID.isEmpty { #expect(probe.sessionID != client.sessionID) }
        let clientShares = try client.keyShares(), probeShares = try probe.keyShares()
        #expect(clientShares.map(\.group).filter { !isGREASE($0) } == probeShares.map(\.group).filter { !isGREASE($0) })
        for (mine, theirs) in zip(probeShares, clientShares) where !isGREASE(theirs.group) {
            #expect(mine.value.count == theirs.value.count)
            #expect(mine.value != theirs.value, "group \(theirs.group)")
        }
        if let clientECH = try client.ech(), let probeECH = try probe.ech() {
            let stack = HelloStack(client)
            #expect(probeECH.cipherSuite == clientECH.cipherSuite)
            #expect(probeECH.enc.count == clientECH.enc.count && probeECH.enc != clientECH.enc)
            #expect(probeECH.payload != clientECH.payload)
            if clientECH.drawsPayloadLength(stack) {
                #expect(OuterECH.boringSSLPayloadLengths.contains(probeECH.payload.count))
            } else {
                #expect(probeECH.payload.count == clientECH.payload.count)
            }
        }
    }

    /// GREASE by BoringSSL's rules, place by place (Chrome's permuted extensions sorted back): every place GREASE in
    /// the probe where it is in the client's hello, the two GREASE extension types distinct, and not every value the
    /// client's (each place is a fresh uniform draw: one in 16 repeats the client's value by chance, as two of one
    /// client's own connections do).
    @Test(arguments: HelloFixture.all)
    func greaseIsDrawnByBoringSSLsRules(_ name: String) throws {
        let (client, probe, _) = try Self.mirror(name)
        let stack = HelloStack(client)
        let theirs = try client.greaseByPlace(stack), mine = try probe.greaseByPlace(stack)
        #expect(mine.count == theirs.count)
        #expect(mine.allSatisfy(isGREASE))
        if !theirs.isEmpty { #expect(mine != theirs) }
        let types = (probe.extensions ?? []).map(\.type).filter(isGREASE)
        #expect(Set(types).count == types.count)
        let greaseless = ["openssl", "curl", "python-ssl", "gnutls", "firefox", "firefox-2"].contains(name)
        #expect(theirs.isEmpty == greaseless)
    }

    /// BoringSSL's GREASE group is one value in supported_groups and key_share; its GREASE extensions keep their
    /// bodies (the first empty, the last one zero byte).
    @Test(arguments: ["chrome-1", "edge", "safari", "safari-ios"])
    func boringSSLGreaseRepeatsAndBodiesSurvive(_ name: String) throws {
        let (client, probe, _) = try Self.mirror(name)
        let groupGREASE = try probe.codePoints(of: 10).filter(isGREASE)
        let shareGREASE = try probe.keyShares().map(\.group).filter(isGREASE)
        #expect(groupGREASE.count == 1 && groupGREASE == shareGREASE)
        let clientGREASE = client.extensions?.filter { isGREASE($0.type) }.map(\.body)
        let probeGREASE = probe.extensions?.filter { isGREASE($0.type) }.map(\.body)
        #expect(probeGREASE == clientGREASE && probeGREASE == [[], [0]])
    }

    @Test(arguments: HelloFixture.all)
    func twoMirrorsDifferFromEachOther(_ name: String) throws {
        let (_, first, _) = try Self.mirror(name, seed: 1)
        let (_, second, _) = try Self.mirror(name, seed: 2)
        #expect(first.random != second.random)
        #expect(first.sessionID != second.sessionID)
        for (a, b) in zip(try first.keyShares(), try second.keyShares()) where !isGREASE(a.group) { #expect(a.value != b.value) }
        if let a = try first.ech(), let b = try second.ech() { #expect(a.enc != b.enc && a.payload != b.payload) }
        if !(try first.greaseValues()).isEmpty { #expect(try first.greaseValues() != second.greaseValues()) }
    }

    /// Cipher suites, compression methods and every extension body without per-connection parts, byte for byte
    /// (code-point lists with GREASE: every other code point).
    @Test(arguments: HelloFixture.all)
    func everythingElseIsKeptByteForByte(_ name: String) throws {
        let (client, probe, _) = try Self.mirror(name)
        #expect(probe.legacyVersion == client.legacyVersion)
        #expect(probe.cipherSuites.filter { !isGREASE($0) } == client.cipherSuites.filter { !isGREASE($0) })
        #expect(probe.cipherSuites.map(isGREASE) == client.cipherSuites.map(isGREASE))
        #expect(probe.compressionMethods == client.compressionMethods)
        var fresh: Set<UInt16> = [21, 35, 41, 42, 51, OuterECH.type]
        if HelloStack(client).permutes { fresh.insert(TrustAnchorIDs.type) }
        for ext in client.extensions ?? [] where !fresh.contains(ext.type) && !isGREASE(ext.type) {
            let kept = probe.body(of: ext.type)
            if try HelloParts.codePointOffsets(ext).isEmpty || !(try client.codePoints(of: ext.type)).contains(where: isGREASE) {
                #expect(kept == ext.body, "extension \(ext.type)")
            } else {
                let points = try probe.codePoints(of: ext.type), theirs = try client.codePoints(of: ext.type)
                #expect(points.map { isGREASE($0) ? 0 : $0 } == theirs.map { isGREASE($0) ? 0 : $0 }, "extension \(ext.type)")
            }
        }
    }

    /// Safari's signature_algorithms lists 0x0805 twice, and keeps it so.
    @Test func safarisDuplicateSignatureAlgorithmIsKept() throws {
        let (client, probe, _) = try Self.mirror("safari")
        #expect(try client.codePoints(of: 13).filter { $0 == 0x0805 }.count == 2)
        #expect(probe.body(of: 13) == client.body(of: 13))
    }
}

/// GREASE where no fixture puts it (signature_algorithms, compress_certificate, delegated_credentials), added to
/// Chrome's hello with its cipher suite GREASE value: the probe puts a GREASE value of its own there, each list its
/// own draw.
@Suite struct HelloMirrorGREASEListTests {
    @Test func greaseInOtherListsIsDrawnToo() throws {
        var client = try HelloParts(fixture: "chrome-2")
        let grease = try #require(client.cipherSuites.first)
        #expect(isGREASE(grease))
        for type: UInt16 in [13, 27] {
            let index = try #require(client.index(of: type))
            var body = client.extensions?[index].body ?? []
            body += [UInt8(grease >> 8), UInt8(grease & 0xFF)]
            if type == 13 { body[1] += 2 } else { body[0] += 2 }
            client.extensions?[index].body = body
        }
        client.extensions?.insert(.init(type: 34, body: [0, 4, UInt8(grease >> 8), UInt8(grease & 0xFF), 0x04, 0x03]), at: 2)
        var seen: Set<UInt16> = []
        for seed in 1...32 as ClosedRange<UInt64> {
            let probe = try HelloParts(message: HelloMirror.mirror(client.encoded(), crypto: MirrorTestCrypto(seed: seed)).message)
            let last13 = try #require(try probe.codePoints(of: 13).last)
            let last27 = try #require(try probe.codePoints(of: 27).last)
            let delegated = try probe.codePoints(of: 34)
            #expect(isGREASE(last13) && isGREASE(last27) && delegated.count == 2 && isGREASE(delegated[0]) && delegated[1] == 0x0403)
            seen.formUnion([last13, last27, delegated[0]])
        }
        #expect(seen.count > 8)   // drawn, not one value carried over
    }
}

/// Nothing of the probe's hello may come from the client whose hello it was made from but what that client's
/// `ClientHelloShape` (and record version) holds: clients of one shape share a probe, made from whichever hello came
/// first, so any other byte copied would let one client mark the probe of all the others, and an interceptor spare
/// it (an adversarial try: a client that sent curl's hello in a record of version 0x0303 first, and an interceptor
/// that forged only hellos in 0x0301 records, forged 20 of 20 curl connections through chainwatch with no line).
@Suite struct HelloMirrorMarkTests {
    static func offer(_ message: [UInt8], recordVersion: UInt16) throws -> ClientOffer {
        var hello = try ClientHello.parse(handshakeMessage: message)
        hello.recordVersion = recordVersion
        return ClientOffer(mirroring: hello)
    }

    @Test func theRecordsVersionIsPartOfTheOffer() throws {
        let hello = try HelloFixture.bytes("curl")
        let usual = try Self.offer(hello, recordVersion: 0x0301)
        #expect(usual == (try Self.offer(hello, recordVersion: 0x0301)))
        #expect(usual != (try Self.offer(hello, recordVersion: 0x0303)))
    }

    /// BoringSSL's GREASE key share is one zero byte: a client that sends another value has a shape of its own.
    @Test func aGREASEKeyShareValueIsPartOfTheShape() throws {
        var marked = try HelloParts(fixture: "chrome-1")
        let index = try #require(marked.index(of: TLSExtensionType.keyShare))
        var shares = try marked.keyShares()
        let grease = try #require(shares.firstIndex { isGREASE($0.group) })
        #expect(shares[grease].value == [0])
        shares[grease].value = [1]
        marked.extensions?[index].body = KeyShareEntry.encode(shares)
        #expect(try ClientHelloShape(marked.encoded()) != ClientHelloShape(HelloFixture.bytes("chrome-1")))
        let probe = try HelloParts(message: HelloMirror.mirror(marked.encoded(), crypto: MirrorTestCrypto(seed: 3)).message)
        #expect(try probe.keyShares().first { isGREASE($0.group) }?.value == [1])   // copied, and so in the shape
    }

    /// Whether X25519MLKEM768's X25519 half is the x25519 share (one key for both) is copied by the mirror, so it is
    /// part of the shape: the fixtures' stacks use two keys; a hello that uses one is another shape, and its probe uses
    /// one too.
    @Test func whetherTheHybridSharesItsX25519KeyIsPartOfTheShape() throws {
        var shared = try HelloParts(fixture: "chrome-1")
        let index = try #require(shared.index(of: TLSExtensionType.keyShare))
        var shares = try shared.keyShares()
        let hybrid = try #require(shares.firstIndex { $0.group == 0x11EC })
        let x25519 = try #require(shares.first { $0.group == 0x001D }?.value)
        #expect(Array(shares[hybrid].value.suffix(32)) != x25519)
        shares[hybrid].value.replaceSubrange(shares[hybrid].value.count - 32..<shares[hybrid].value.count, with: x25519)
        shared.extensions?[index].body = KeyShareEntry.encode(shares)
        #expect(try ClientHelloShape(shared.encoded()) != ClientHelloShape(HelloFixture.bytes("chrome-1")))
        let probe = try HelloParts(message: HelloMirror.mirror(shared.encoded(), crypto: MirrorTestCrypto(seed: 9)).message).keyShares()
        let probeHybrid = try #require(probe.first { $0.group == 0x11EC }?.value)
        #expect(Array(probeHybrid.suffix(32)) == probe.first { $0.group == 0x001D }?.value)
    }

    /// An ECH payload length BoringSSL never draws is kept by the shape; one of its four is drawn by the mirror.
    @Test func anECHPayloadLengthIsDrawnOnlyWhereBoringSSLDrawsIt() throws {
        func withPayload(_ fixture: String, _ length: Int) throws -> [UInt8] {
            var parts = try HelloParts(fixture: fixture)
            let index = try #require(parts.index(of: OuterECH.type))
            var ech = try #require(try parts.ech())
            ech.payload = [UInt8](repeating: 7, count: length)
            parts.extensions?[index].body = ech.encoded()
            return parts.encoded()
        }
        let chrome = try HelloFixture.bytes("chrome-1")
        #expect(try ClientHelloShape(withPayload("chrome-1", 144)) == ClientHelloShape(chrome))
        #expect(try ClientHelloShape(withPayload("chrome-1", 100)) != ClientHelloShape(chrome))
        var lengths: Set<Int> = []
        for seed in 1...40 as ClosedRange<UInt64> {
            let probe = try HelloParts(message: HelloMirror.mirror(withPayload("chrome-1", 144), crypto: MirrorTestCrypto(seed: seed)).message)
            lengths.insert(try #require(try probe.ech()).payload.count)
        }
        #expect(lengths == Set(OuterECH.boringSSLPayloadLengths))
        // Firefox's stack (no GREASE extensions: not BoringSSL-shaped) sends one length per build: kept.
        let firefox = try withPayload("firefox", 176)
        #expect(try ClientHelloShape(firefox) != ClientHelloShape(withPayload("firefox", 144)))
        let probe = try HelloParts(message: HelloMirror.mirror(firefox, crypto: MirrorTestCrypto(seed: 5)).message)
        #expect(try #require(try probe.ech()).payload.count == 176)
    }

    /// Where a padding extension is, and whether there is one, is the shape's: the mirror keeps it where the hello has
    /// it and adds none (a second review: curl's hello without its padding made 331-byte probes an interceptor could
    /// spare, 10 of 10 curl tunnels forged). So is early_data's place, which `HelloStack` reads.
    @Test func paddingAndEarlyDataKeepTheirPlaceInTheShape() throws {
        let curl = try HelloFixture.bytes("curl")
        var unpadded = try HelloParts(message: curl)
        let padding = try #require(unpadded.index(of: 21))
        let pad = unpadded.extensions!.remove(at: padding)
        #expect(try ClientHelloShape(unpadded.encoded()) != ClientHelloShape(curl))
        var moved = unpadded
        moved.extensions?.insert(pad, at: 0)
        #expect(try ClientHelloShape(moved.encoded()) != ClientHelloShape(curl))
        var chrome = try HelloParts(fixture: "chrome-1")
        chrome.extensions?.insert(.init(type: TLSExtensionType.earlyData, body: []), at: 0)
        #expect(try ClientHelloShape(chrome.encoded()) != ClientHelloShape(HelloFixture.bytes("chrome-1")))
        #expect(try ClientHelloShape(curl) == ClientHelloShape(HelloMirror.mirror(curl, crypto: MirrorTestCrypto(seed: 4)).message))
    }

    /// An NSS-shaped hello (Firefox: no GREASE extensions) gets random bytes for its ECH enc, as NSS sends HKDF output
    /// there, not a key (a third review: a key told every probe from real Firefox's hellos).
    @Test func anNSSShapedHellosECHEncIsRandomBytes() throws {
        var clear = 0
        for seed in 1...64 as ClosedRange<UInt64> {
            let probe = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes("firefox"), crypto: MirrorTestCrypto(seed: seed)).message)
            let enc = try #require(try probe.ech()).enc
            #expect(enc.count == 32)
            if enc[31] & 0x80 == 0 { clear += 1 }
        }
        #expect(clear > 16 && clear < 48, "\(clear) of 64 with bit 255 clear")   // random: about half; a key: all
    }

    /// The GREASE ECH's `enc` is a key the crypto made (BoringSSL's is an X25519 public key: bit 255 clear, on the
    /// curve), not random bytes, which a second review told from Chrome's by that bit in half of all probes.
    @Test func theECHEncIsAKeyNotRandomBytes() throws {
        for seed in 1...64 as ClosedRange<UInt64> {
            let probe = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes("chrome-2"), crypto: MirrorTestCrypto(seed: seed)).message)
            let enc = try #require(try probe.ech()).enc
            #expect(enc.count == 32 && enc[31] & 0x80 == 0, "seed \(seed)")
        }
    }

    /// BoringSSL draws its two GREASE extension values independently and flips the second by 0x1010 when they are
    /// equal: never equal, neighbours in about 1 of 8 hellos.
    @Test func theTwoGREASEExtensionsFollowBoringSSLsRule() throws {
        var neighbours = 0
        let runs = 400
        for seed in 1...UInt64(runs) {
            let probe = try HelloParts(message: HelloMirror.mirror(HelloFixture.bytes("edge"), crypto: MirrorTestCrypto(seed: seed)).message)
            let types = (probe.extensions ?? []).map(\.type).filter(isGREASE)
            #expect(types.count == 2 && types[0] != types[1])
            if types[1] == types[0] ^ 0x1010 { neighbours += 1 }
        }
        #expect(neighbours >= 25 && neighbours <= 80, "\(neighbours) of \(runs)")   // 50 expected; 27 for distinct draws
    }

    /// A hello whose GREASE places all hold one value has Chrome's shape; the probes made from it draw each place
    /// afresh: that value as often as any other, and the places apart.
    @Test func greaseValuesAndTheirRepeatsAreNotCopied() throws {
        let chrome = try HelloFixture.bytes("chrome-1")
        var marked = try HelloParts(message: chrome)
        try marked.rewriteGREASE { _ in 0x3A3A }
        if var extensions = marked.extensions {   // two equal GREASE extension types would be one extension twice
            if let last = extensions.lastIndex(where: { isGREASE($0.type) }) { extensions[last].type = 0x4A4A }
            marked.extensions = extensions
        }
        #expect(try ClientHelloShape(marked.encoded()) == ClientHelloShape(chrome))
        let stack = HelloStack(marked)
        var repeatsOfTheMark = 0, allEqual = 0
        let runs = 64
        for seed in 1...UInt64(runs) {
            let probe = try HelloParts(message: HelloMirror.mirror(marked.encoded(), crypto: MirrorTestCrypto(seed: seed)).message)
            let places = try probe.greaseByPlace(stack)
            repeatsOfTheMark += places.first == 0x3A3A ? 1 : 0
            if Set(places).count <= 2 { allEqual += 1 }   // the mark's pattern: two values in all
        }
        // The cipher suite place holds 0x3A3A in about 1 of 16 probes (4 of 64); before, never.
        #expect(repeatsOfTheMark >= 1 && repeatsOfTheMark <= 16)
        #expect(allEqual <= 2)
    }
}

/// A client's finite-field key shares cost the probe no key (milliseconds of the loop each): random bytes of their
/// length, while the X25519 share beside them is a real key.
@Suite struct HelloMirrorFiniteFieldTests {
    @Test func aFirstHellosFiniteFieldSharesAreRandomBytesNotKeys() throws {
        let crypto = MirrorTestCrypto(seed: 7)
        let client = [KeyShareEntry(group: 0x001D, value: [UInt8](repeating: 1, count: 32)),
                      KeyShareEntry(group: 0x0100, value: [UInt8](repeating: 2, count: 256)),
                      KeyShareEntry(group: 0x0104, value: [UInt8](repeating: 3, count: 1024))]
        let (fresh, exchanges) = try HelloMirror.freshKeyShares(client, HelloMirrorRandom(crypto: crypto))
        #expect(crypto.asked.withLock { $0 } == [0x001D])
        #expect(exchanges.map(\.group) == [0x001D])
        #expect(fresh.map(\.group) == [0x001D, 0x0100, 0x0104])
        #expect(fresh.map(\.value.count) == [32, 256, 1024])
        #expect(fresh[1].value != client[1].value && fresh[2].value != client[2].value)
    }
}
