import Testing
@testable import ChainwatchCore

/// The observer on real handshakes captured from Python `ssl` and the openssl CLI.
@Suite struct TLSObserverFixtureTests {
    @Test(arguments: TLSFixture.streams)
    func dripFedStreamGivesSameFactsAsWholeStream(_ file: String) throws {
        let stream = try TLSFixture.bytes(file)
        let whole = observe(stream)
        #expect(whole.error == nil)
        #expect(whole.facts.last == .encrypted)
        #expect(observe(stream, chunkSize: 1) == whole)
        #expect(observe(stream, chunkSize: 7) == whole)
    }

    @Test(arguments: TLSFixture.streams)
    func oneBytePerRecordGivesSameFacts(_ file: String) throws {
        let stream = try TLSFixture.bytes(file)
        #expect(try observedFacts(reframed(stream, recordSize: 1)) == observedFacts(stream))
    }

    @Test func tls12RSAClientHelloOffersSNIAndALPN() throws {
        let facts = try observedFacts(TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let hello = try clientHello(facts)
        #expect(facts.count == 2 && facts.last == .encrypted)
        #expect(hello.legacyVersion == .tls1_2)
        #expect(hello.maximumVersion == .tls1_2)
        #expect(hello.random.count == 32)
        #expect(hello.serverName == "rsa.chainwatch.test")
        #expect(hello.alpnProtocols == ["h2", "http/1.1"])
        #expect(hello.cipherSuites.contains(CipherSuite(rawValue: 0xC02F)))
        #expect(!hello.offersPreSharedKey)
        #expect(!hello.offersSessionTicket)
    }

    @Test func tls12RSAServerSendsLeafAndIntermediate() throws {
        let facts = try observedFacts(TLSFixture.bytes("tls12-rsa.s2c.bin"))
        let expectedChain = [try TLSFixture.der(pem: "rsa-leaf.pem"), try TLSFixture.der(pem: "rsa-intermediate.pem")]
        #expect(facts.count == 4)
        #expect(facts.dropFirst() == [.certificate(expectedChain), .serverHelloDone, .encrypted])
        let hello = try #require(serverHellos(facts).first)
        #expect(hello.version == .tls1_2)
        #expect(hello.cipherSuite.name == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        #expect(hello.cipherSuite.isForwardSecret)
        #expect(hello.alpnProtocol == "h2")
        #expect(!hello.isHelloRetryRequest)
    }

    @Test func tls12ECDSAServerSendsLeafAndIntermediate() throws {
        let client = try clientHello(observedFacts(TLSFixture.bytes("tls12-ecdsa.c2s.bin")))
        let facts = try observedFacts(TLSFixture.bytes("tls12-ecdsa.s2c.bin"))
        let expectedChain = [try TLSFixture.der(pem: "ecdsa-leaf.pem"), try TLSFixture.der(pem: "ecdsa-intermediate.pem")]
        #expect(client.serverName == "ecdsa.chainwatch.test")
        #expect(facts.dropFirst() == [.certificate(expectedChain), .serverHelloDone, .encrypted])
        let hello = try #require(serverHellos(facts).first)
        #expect(hello.cipherSuite.name == "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
        #expect(!hello.resumes(client))
    }

    @Test func tls12ResumptionEchoesSessionIDAndSendsNoCertificate() throws {
        let client = try clientHello(observedFacts(TLSFixture.bytes("tls12-rsa-resumed.c2s.bin")))
        let facts = try observedFacts(TLSFixture.bytes("tls12-rsa-resumed.s2c.bin"))
        #expect(client.offersSessionTicket)
        #expect(client.sessionID.count == 32)
        #expect(facts.count == 2 && facts.last == .encrypted)
        let hello = try #require(serverHellos(facts).first)
        #expect(hello.sessionID == client.sessionID)
        #expect(hello.resumes(client))
    }

    @Test func tls13ServerHelloAnnouncesVersionInSupportedVersions() throws {
        let client = try clientHello(observedFacts(TLSFixture.bytes("tls13-rsa.c2s.bin")))
        #expect(client.serverName == "tls13.chainwatch.test")
        #expect(client.supportedVersions.first == .tls1_3)
        #expect(client.maximumVersion == .tls1_3)
        #expect(client.legacyVersion == .tls1_2)

        let facts = try observedFacts(TLSFixture.bytes("tls13-rsa.s2c.bin"))
        #expect(facts.count == 2 && facts.last == .encrypted)
        let hello = try #require(serverHellos(facts).first)
        #expect(hello.legacyVersion == .tls1_2)
        #expect(hello.version == .tls1_3)
        #expect(hello.cipherSuite.isTLS13 && hello.cipherSuite.isForwardSecret)
        // TLS 1.3 compatibility mode echoes the session ID; that is not resumption.
        #expect(hello.sessionID == client.sessionID)
        #expect(!hello.resumes(client))
    }

    @Test func helloRetryRequestIsFollowedByTheRealServerHello() throws {
        let facts = try observedFacts(TLSFixture.bytes("tls13-hrr.s2c.bin"))
        let hellos = serverHellos(facts)
        #expect(facts.count == 3 && facts.last == .encrypted)
        #expect(hellos.map(\.isHelloRetryRequest) == [true, false])
        #expect(hellos.map(\.version) == [.tls1_3, .tls1_3])
        #expect(hellos[0].random == ServerHello.helloRetryRequestRandom)

        // The client direction stops at the compatibility ChangeCipherSpec before the second ClientHello.
        let clientFacts = try observedFacts(TLSFixture.bytes("tls13-hrr.c2s.bin"))
        #expect(clientFacts.count == 2 && clientFacts.last == .encrypted)
        let client = try clientHello(clientFacts)
        #expect(client.serverName == "hrr.chainwatch.test")
        #expect(client.alpnProtocols == ["h2", "http/1.1"])
    }

    @Test func finishedObserverDropsBytes() throws {
        var observer = TLSObserver()
        observer.append(try TLSFixture.bytes("tls13-rsa.s2c.bin"))
        while try observer.next() != nil {}
        observer.append([UInt8](repeating: 0x17, count: 1 << 20))
        #expect(try observer.next() == nil)
        #expect(try observer.next() == nil)
        #expect(observer.reassemblyByteCount == 0)
    }
}
