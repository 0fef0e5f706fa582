import Testing
@testable import ChainwatchCore

/// The watcher on real captured handshakes (Fixtures/tls), fed whole and one byte at a time, interleaved as in a tunnel.
@Suite struct HandshakeWatchTests {
    /// Feeds the client stream, then the server stream, `chunk` bytes at a time; returns the first decided need.
    func watch(_ name: String, chunk: Int = .max) throws -> (HandshakeWatch.Need, HandshakeWatch) {
        let c2s = try TLSFixture.bytes("\(name).c2s.bin")
        let s2c = try TLSFixture.bytes("\(name).s2c.bin")
        var w = HandshakeWatch()
        var need = HandshakeWatch.Need.moreBytes
        var i = 0
        while i < c2s.count {
            need = w.client(c2s[i..<min(c2s.count, i &+ chunk)])
            i = min(c2s.count, i &+ chunk)
        }
        i = 0
        while i < s2c.count, need == .moreBytes {
            need = w.server(s2c[i..<min(s2c.count, i &+ chunk)])
            i = min(s2c.count, i &+ chunk)
        }
        return (need, w)
    }

    @Test(arguments: [Int.max, 1, 7])
    func tls12GivesThePassiveChain(chunk: Int) throws {
        let (need, w) = try watch("tls12-rsa", chunk: chunk)
        let leaf = try TLSFixture.der(pem: "rsa-leaf.pem")
        guard case .chain(let ders) = need else { Issue.record("got \(need)"); return }
        #expect(ders.first == leaf)
        #expect(w.serverHello?.version == .tls1_2)
        #expect(w.clientHello?.serverName != nil)
    }

    @Test(arguments: ["tls13-rsa", "tls13-hrr"])
    func tls13AsksForAProbeWithTheClientsParameters(name: String) throws {
        let (need, w) = try watch(name, chunk: 1)
        guard case .probe(let offer) = need, let hello = w.clientHello else { Issue.record("got \(need)"); return }
        // The probe repeats the client's whole offer, not OpenSSL's defaults.
        #expect(offer == ClientOffer(mirroring: hello))
        #expect(offer.serverName == hello.serverName && offer.alpn == hello.alpnProtocols)
        #expect(offer.cipherSuites == hello.cipherSuites.map(\.rawValue) && !offer.cipherSuites.isEmpty)
        #expect(offer.keyShareGroups == hello.keyShareGroups && !offer.keyShareGroups.isEmpty)
        #expect(offer.maximumVersion == .tls1_3)
        #expect(w.serverHello?.version == .tls1_3)
    }

    @Test func resumedTLS12WithoutCertificateAsksForAProbe() throws {
        let (need, w) = try watch("tls12-rsa-resumed")
        guard case .probe = need else { Issue.record("got \(need)"); return }
        #expect(w.serverHello?.version == .tls1_2)
    }

    /// A TLS 1.2 server flight whose Certificate message carries the fixture's leaf and a `padding`-byte second
    /// entry, in 16 KiB records.
    static func largeCertificateFlight(padding: Int) throws -> (stream: [UInt8], ders: [[UInt8]], bodyLength: Int) {
        func u24(_ n: Int) -> [UInt8] { [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }
        func message(_ type: UInt8, _ body: [UInt8]) -> [UInt8] { [type] + u24(body.count) + body }
        func records(_ bytes: [UInt8]) -> [UInt8] {
            stride(from: 0, to: bytes.count, by: 16_384).flatMap { start -> [UInt8] in
                let payload = bytes[start..<min(bytes.count, start + 16_384)]
                return [22, 3, 3, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
            }
        }
        let ders = [try TLSFixture.der(pem: "rsa-leaf.pem"), [UInt8](repeating: 0x30, count: padding)]
        let list = ders.flatMap { u24($0.count) + $0 }
        let hello = message(2, [3, 3] + [UInt8](repeating: 7, count: 32) + [0, 0xC0, 0x2F, 0])
        let certificate = message(11, u24(list.count) + list)
        return (records(hello) + records(certificate), ders, list.count + 3)
    }

    /// The proxy reads a Certificate message past the default 224 KiB, up to the protocol's 16 MiB, once it has taken
    /// room for it: the watch says how long the message will be as soon as its header is in, before its bytes.
    @Test(arguments: [Int.max, 1_000, 16_389])
    func aLargeCertificateIsAnnouncedThenRead(chunk: Int) throws {
        let (stream, ders, length) = try Self.largeCertificateFlight(padding: 300_000)
        #expect(length > TLSObserver.maxServerHandshakeMessageLength)

        var byDefault = HandshakeWatch()
        guard case .oversizedHandshake = byDefault.server(stream) else { Issue.record("read past the default limit"); return }

        var w = HandshakeWatch(serverMessageLimit: TLSObserver.maxProtocolMessageLength)
        var need = HandshakeWatch.Need.moreBytes
        var announced: [Int] = []
        var mostBuffered = 0
        var i = 0
        while i < stream.count, need == .moreBytes {
            need = w.server(stream[i..<min(stream.count, i &+ chunk)])
            i = min(stream.count, i &+ chunk)
            if let length = w.announcedServerMessageLength, announced.last != length { announced.append(length) }
            mostBuffered = max(mostBuffered, w.serverObserver.bufferedByteCount)
            // Announced by the end of the Certificate's first record, while most of it is still to come.
            if i >= 47 + 5 + 16_384, need == .moreBytes { #expect(announced.last == length) }
        }
        #expect(need == .chain(ders))
        #expect(w.announcedServerMessageLength == nil)   // decided
        if chunk < stream.count {   // fed in pieces: seen while it was being read
            #expect(announced == [length])
            #expect(mostBuffered > TLSObserver.maxServerHandshakeMessageLength)   // reassembled past the default limit
        }
        w.release()
        #expect(w.serverObserver.bufferedByteCount == 0)
        #expect(w.decided == .chain(ders) && w.serverHello?.version == .tls1_2)
    }

    @Test func plainHTTPIsNotTLS() {
        var w = HandshakeWatch()
        guard case .notTLS(let detail) = w.client(Array("GET / HTTP/1.1\r\n\r\n".utf8)) else { Issue.record("not flagged"); return }
        // A sentence, not the error's case name (the detail read `client: notTLS`, issue 27).
        #expect(detail == "client: not TLS: the first bytes are not a TLS handshake or alert record")
        #expect(w.server([0x16, 0x03, 0x03]) == w.decided)   // decided stays decided
    }

    @Test func serverSpeakingFirstIsNotTLS() {
        var w = HandshakeWatch()
        guard case .notTLS(let detail) = w.server(Array("SSH-2.0-OpenSSH_9.2\r\n".utf8)) else { Issue.record("not flagged"); return }
        #expect(detail.hasPrefix("server:"))
    }

    /// A HelloRetryRequest has no certificate and its client needs it: the bytes up to the end of its record may pass
    /// while the rest is held. The fixture's HRR is one 88-byte message in one record (5 + 88 = 93 bytes).
    @Test(arguments: [Int.max, 1, 7])
    func helloRetryRequestMayPass(chunk: Int) throws {
        let (_, w) = try watch("tls13-hrr", chunk: chunk)
        #expect(w.passableServerBytes == 93)
        let s2c = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        #expect(s2c[0] == 22 && Int(s2c[3]) << 8 | Int(s2c[4]) == 88)
        #expect(s2c[93] == 20)   // the compatibility ChangeCipherSpec that follows is not part of it
        let (_, plain) = try watch("tls13-rsa", chunk: chunk)
        #expect(plain.passableServerBytes == 0)
    }

    /// A forger that packs more into the HelloRetryRequest's record (a ServerHello, a Certificate) gets nothing
    /// through early: the record may pass only when the HRR is alone in it.
    @Test func helloRetryRequestWithMoreInItsRecordDoesNotPass() throws {
        let s2c = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        let hrr = Array(s2c[5..<93])   // the HRR message, header included
        let extra: [UInt8] = [0x0B, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00]   // an empty Certificate message
        var record: [UInt8] = [0x16, 0x03, 0x03]
        let body = hrr + extra
        record += [UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls13-hrr.c2s.bin"))
        _ = w.server(record)
        #expect(w.passableServerBytes == 0)
    }
}

@Suite struct HandshakeWatchMalformedTests {
    /// A Certificate message over the cap (a forged chain padded past 64 KiB) must not pass as "not TLS":
    /// it is a handshake chainwatch cannot judge, and the rule's action applies.
    @Test func aServersRefusalBeforeAnyServerHelloMayPass() throws {
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
        let refusal: [UInt8] = [21, 0x03, 0x03, 0x00, 0x02, 2, 70]   // fatal protocol_version
        #expect(w.server(refusal) == .moreBytes)
        #expect(w.passableServerBytes == refusal.count)
        // After a ServerHello an alert passes nothing more.
        let (_, after) = try HandshakeWatchTests().watch("tls12-rsa")
        #expect(after.passableServerBytes == 0)
    }

    /// A stream of alert records is no handshake: a server (or a client before its hello) that sends more than a
    /// TLS peer does is decided at once, not read for as long as it sends them. And the observer reports each of
    /// 98 304 alerts (192 KiB, twelve 16 KiB records) once, its buffer never over one record. Its reading is linear
    /// (an index, where `removeFirst(2)` shifted the rest per alert); that is not timed here: this test took 44 ms
    /// before the index and 24 ms after, in a debug build.
    @Test func aStreamOfAlertsIsDecidedAndEachAlertReportedOnce() throws {
        let record: [UInt8] = [21, 3, 3, 0x40, 0x00] + [UInt8](repeating: 1, count: 16_384)   // warnings, 8 192 of them
        var observer = TLSObserver()
        var alerts = 0, largest = 0
        for _ in 0..<12 {
            observer.append(record)
            while let fact = try observer.next() {
                if case .alert = fact { alerts += 1 }
                largest = max(largest, observer.reassemblyByteCount)
            }
        }
        #expect(alerts == 12 * 8_192)
        #expect(largest <= 16_384)

        var server = HandshakeWatch()
        _ = server.client(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
        guard case .malformedHandshake(let detail) = server.server(record) else { Issue.record("a stream of alerts was read on"); return }
        #expect(detail.contains("more than \(HandshakeWatch.maxServerAlerts) alert records"))
        #expect(server.decidedByServer)

        var client = HandshakeWatch()
        guard case .notTLS = client.client(record) else { Issue.record("a client's stream of alerts was read on"); return }
        #expect(!client.decidedByServer)
        // Two alerts, as a refusing server sends them, are still read (and the first may pass).
        var refusing = HandshakeWatch()
        _ = refusing.client(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
        #expect(refusing.server([21, 3, 3, 0, 4, 1, 0, 2, 70]) == .moreBytes)
    }

    /// A 75 KB Certificate (badssl's 1000-sans) is read; one over the server limit is its own finding, not "not TLS"
    /// and not a malformed handshake.
    @Test func largeCertificateIsReadAndAnOversizedOneIsItsOwnFinding() throws {
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let large: [UInt8] = [0x0B, 0x01, 0x24, 0xF8]   // Certificate, 75 000 bytes: wait for the rest
        #expect(w.server(record(0x16, large + Array(repeating: 0, count: 100))) == .moreBytes)

        var o = HandshakeWatch()
        _ = o.client(try TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let over = TLSObserver.maxServerHandshakeMessageLength + 1
        let header: [UInt8] = [0x0B, UInt8(over >> 16), UInt8(over >> 8 & 0xFF), UInt8(over & 0xFF)]
        guard case .oversizedHandshake(let detail) = o.server(record(0x16, header + Array(repeating: 0, count: 100))) else {
            Issue.record("an oversized Certificate was not its own finding"); return
        }
        #expect(detail.contains("\(over) bytes") && detail.contains("type 11"))
    }

    /// A TLS 1.2 ServerHello (suite 0xC02B) with the given extensions, as a handshake message.
    static func serverHello12(extensions: [UInt8]) -> [UInt8] {
        handshakeMessage(2, [0x03, 0x03] + Array(repeating: 0x42, count: 32) + [0] + [0xC0, 0x2B, 0] + vector(2, extensions))
    }

    /// The ServerHello echoed status_request: the chain comes with the CertificateStatus that follows the Certificate
    /// (same flight, no wait), or without a staple at the end of the flight when none came.
    @Test(arguments: [true, false])
    func stapledResponseComesWithTheChain(stapled: Bool) throws {
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let ocsp: [UInt8] = [0x30, 0x05, 0x0A, 0x01, 0x00, 0xA0, 0x00]
        var flight = Self.serverHello12(extensions: uint16(5) + uint16(0)) + handshakeMessage(11, vector(3, vector(3, der)))
        if stapled { flight += handshakeMessage(22, [1] + vector(3, ocsp)) }
        flight += handshakeMessage(12, [1, 2, 3]) + handshakeMessage(14, [])
        var needs: [HandshakeWatch.Need] = []
        for byte in record(22, flight) { needs.append(w.server([byte])) }   // one byte at a time
        #expect(needs.filter { $0 != .moreBytes } .first == .chain([der]))
        #expect(w.stapledOCSP == (stapled ? ocsp : nil))
    }

    /// A server whose stream ends (or whose tunnel closes) after a Certificate that waits for its promised
    /// CertificateStatus has shown its chain: the end returns it, without a staple. Any other end decides nothing.
    @Test func anEndAfterAChainAwaitingItsStatusReturnsTheChain() throws {
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let hello = Self.serverHello12(extensions: uint16(5) + uint16(0))
        #expect(w.server(record(22, hello)) == .moreBytes)
        #expect(w.nothingMoreFromTheServer() == nil, "no chain yet")
        #expect(w.server(record(22, handshakeMessage(11, vector(3, vector(3, der))))) == .moreBytes)
        #expect(w.nothingMoreFromTheServer() == .chain([der]))
        #expect(w.decided == .chain([der]) && w.decidedByServer && w.stapledOCSP == nil)
        #expect(w.nothingMoreFromTheServer() == nil, "decided once")
    }

    /// A server that decided before the client's hello (it spoke first): the hello is still read, in any chunking, for
    /// its SNI (which may pick the rule); the decision stands, but a TLS 1.3 ServerHello sent first is probed with the
    /// hello's offer, not with none. Client bytes that cannot be a hello say so (`clientSentNoHello`).
    @Test func aServerThatSpokeFirstIsAnsweredOnceTheHelloIsWhole() throws {
        let hello = try TLSFixture.bytes("tls12-rsa.c2s.bin")
        var w = HandshakeWatch()
        let chain = w.server(try TLSFixture.bytes("tls12-rsa.s2c.bin"))
        guard case .chain = chain else { Issue.record("no chain: \(chain)"); return }
        #expect(w.client(Array(hello.prefix(40))) == chain, "decided is decided; the caller waits for the hello")
        #expect(w.clientHello == nil && !w.clientSentNoHello)
        #expect(w.client(Array(hello.dropFirst(40))) == chain)
        #expect(w.clientHello?.serverName == "rsa.chainwatch.test")

        let c2s13 = try TLSFixture.bytes("tls13-rsa.c2s.bin"), s2c13 = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        var t = HandshakeWatch()
        #expect(t.server(s2c13) == .probe(ClientOffer(serverName: nil)))
        var mirror = HandshakeWatch()
        _ = mirror.client(c2s13)
        #expect(t.client(c2s13) == .probe(ClientOffer(mirroring: try #require(mirror.clientHello))))

        var plain = HandshakeWatch()
        let early = plain.server(try TLSFixture.bytes("tls12-rsa.s2c.bin"))
        #expect(plain.client(Array("EHLO mail.test\r\n".utf8)) == early && plain.clientSentNoHello && plain.clientHello == nil)
    }

    /// Without status_request in the ServerHello the chain is returned at once, as before.
    @Test func noPromisedStatusMeansTheChainAtOnce() throws {
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let flight = Self.serverHello12(extensions: []) + handshakeMessage(11, vector(3, vector(3, der)))
        #expect(w.server(record(22, flight)) == .chain([der]))
    }

    /// A CertificateStatus of another type (ocsp_multi) or malformed is no staple, never a failure.
    @Test func unreadableStatusIsNoStaple() throws {
        var w = HandshakeWatch()
        _ = w.client(try TLSFixture.bytes("tls12-rsa.c2s.bin"))
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let flight = Self.serverHello12(extensions: uint16(5) + uint16(0)) + handshakeMessage(11, vector(3, vector(3, der)))
            + handshakeMessage(22, [2] + vector(3, [1, 2, 3]))
        #expect(w.server(record(22, flight)) == .chain([der]))
        #expect(w.stapledOCSP == nil)
    }
}
