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
    @Test(arguments: HelloFixture.fresh)
    func mirrorOfAFreshHelloHasItsLength(_ name: String) throws {
        let (client, probe, mirrored) = try Self.mirror(name)
        #expect(mirrored.message.count == (try HelloFixture.bytes(name)).count)
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
            #expect(probeECH.cipherSuite == clientECH.cipherSuite)
            #expect(probeECH.configID != clientECH.configID)
            #expect(probeECH.enc.count == clientECH.enc.count && probeECH.enc != clientECH.enc)
            #expect(probeECH.payload.count == clientECH.payload.count && probeECH.payload != clientECH.payload)
        }
    }

    /// One bijection: the probe's GREASE values, place by place (Chrome's permuted extensions sorted back), differ
    /// from the client's, and two places hold equal values in the probe exactly when they do in the client's hello.
    @Test(arguments: HelloFixture.all)
    func greaseIsRedrawnThroughOneBijection(_ name: String) throws {
        let (client, probe, _) = try Self.mirror(name)
        let stack = HelloStack(client)
        let theirs = try client.greaseByPlace(stack), mine = try probe.greaseByPlace(stack)
        #expect(mine.count == theirs.count)
        for (a, b) in zip(mine, theirs) { #expect(a != b && isGREASE(a)) }
        for i in theirs.indices { for j in theirs.indices { #expect((theirs[i] == theirs[j]) == (mine[i] == mine[j])) } }
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
/// Chrome's hello with its cipher suite GREASE value: the probe puts its own cipher suite GREASE value there.
@Suite struct HelloMirrorGREASEListTests {
    @Test func greaseInOtherListsFollowsTheBijection() throws {
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
        let probe = try HelloParts(message: HelloMirror.mirror(client.encoded(), crypto: MirrorTestCrypto(seed: 21)).message)
        let mapped = try #require(probe.cipherSuites.first)
        #expect(mapped != grease && isGREASE(mapped))
        #expect(try probe.codePoints(of: 13).last == mapped)
        #expect(try probe.codePoints(of: 27).last == mapped)
        #expect(try probe.codePoints(of: 34) == [mapped, 0x0403])
    }
}

/// An empty legacy session id (a client in TLS 1.3 without middlebox compatibility mode) stays empty.
@Suite struct HelloMirrorSessionIDTests {
    @Test func emptySessionIDStaysEmpty() throws {
        var client = try HelloParts(fixture: "openssl")
        client.sessionID = []
        let mirrored = try HelloMirror.mirror(client.encoded(), crypto: MirrorTestCrypto(seed: 16))
        #expect(mirrored.message.count == client.encoded().count)
        #expect(try HelloParts(message: mirrored.message).sessionID == [])
    }
}
