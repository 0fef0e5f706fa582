import Testing
@testable import ChainwatchCore

/// A TLS 1.3 tunnel's encrypted server flight against its probe's, on the captured TLS 1.3 handshake's hellos and
/// record lists built from message sizes (overhead: 1 content-type byte + 16-byte tag per record).
@Suite struct FlightAgreementTests {
    /// EncryptedExtensions, Certificate, CertificateVerify, Finished as one record each (OpenSSL's way).
    static let genuine: [(type: UInt8, length: Int)] = [(8, 10), (11, 2_104), (15, 264), (20, 36)]
    static func records(_ messages: [(type: UInt8, length: Int)]) -> [Int] { messages.map { $0.length + 17 } }
    static let probe = FlightAgreement.ProbeFlight(messages: genuine, recordLengths: records(genuine))

    func compare(_ tunnel: [Int], ended: Bool = false, tracking: EncryptedRecordTracking = .tracking,
                 probe: FlightAgreement.ProbeFlight = probe, client: ClientHello? = nil) throws -> FlightAgreement.Outcome {
        let (hello, server) = try EvidenceAgreementTests.hellos("tls13-rsa")
        return FlightAgreement.compare(tunnel: tunnel.map { EncryptedRecord(contentType: 23, length: $0) }, tracking: tracking,
                                       flightEnded: ended, probe: probe, serverHello: server, clientHello: client ?? hello,
                                       probeClientHello: hello)
    }

    @Test func theSameFlightAgrees() throws {
        #expect(try compare(Self.records(Self.genuine)) == .agrees)
        // Records after the flight (a ticket, the response) do not count.
        #expect(try compare(Self.records(Self.genuine) + [250, 16_401]) == .agrees)
        // A server that packs its flight into one record does so for the probe too.
        let packed = FlightAgreement.ProbeFlight(messages: Self.genuine, recordLengths: [10 + 2_104 + 264 + 36 + 17])
        #expect(try compare([10 + 2_104 + 264 + 36 + 17, 250], probe: packed) == .agrees)
    }

    @Test func anECDSASignatureAFewBytesShorterStillAgrees() throws {
        #expect(try compare([27, 2_121, 264 + 17 - 2, 53]) == .agrees)
        #expect(try compare([27, 2_121, 264 + 17 + 3, 53]) == .agrees)
        guard case .differs = try compare([27, 2_121, 264 + 17 + 40, 53]) else { Issue.record("a long signature passed"); return }
        // Packed into one record with the rest, the signature's slack is that record's.
        let packed = FlightAgreement.ProbeFlight(messages: Self.genuine, recordLengths: [27 + 2_104, 264 + 36 + 17])
        #expect(try compare([27 + 2_104, 264 + 36 + 17 - 1], probe: packed) == .agrees)
        guard case .differs = try compare([27 + 2_104 - 1, 264 + 36 + 17], probe: packed) else { Issue.record("slack leaked"); return }
    }

    @Test func aForgedChainOfAnotherLengthDiffers() throws {
        // A longer chain (another key, another issuer name): its records add up to more.
        guard case .differs(let detail) = try compare([27, 2_121 + 300, 281, 53]) else { Issue.record("not caught"); return }
        #expect(detail.contains("record 2") && detail.contains("2421") && detail.contains("2121"))
        // One byte longer (an ECDSA signature in a certificate that came out a byte longer) is another chain.
        guard case .differs = try compare([27, 2_122, 281, 53]) else { Issue.record("a one-byte difference passed"); return }
        // Lined up with the genuine total at a record boundary (EncryptedExtensions + certificate = the whole genuine
        // flight), it still takes four records.
        guard case .differs = try compare([27, 2_414 - 10 + 17, 281, 53]) else { Issue.record("a lined-up chain passed"); return }
        // A flight that stops after two of the four records: undecided until the flight's deadline or the stream's
        // end, then a difference.
        let short = [27, 2_121]
        #expect(try compare(short) == .needsMoreRecords)
        guard case .differs = try compare(short, ended: true) else { Issue.record("short flight not caught at its end"); return }
    }

    @Test func aPartialFlightWaits() throws {
        #expect(try compare([27]) == .needsMoreRecords)
        #expect(try compare([]) == .needsMoreRecords)
    }

    @Test func aTrackingThatCannotGoOnDecides() throws {
        guard case .differs = try compare([27], tracking: .invalidHeader) else { Issue.record("bad header passed"); return }
        guard case .differs = try compare(Array(repeating: 18, count: 32), tracking: .full) else {
            Issue.record("a flight cut into 32 tiny records passed"); return
        }
    }

    @Test func whatCannotBeComparedIsSaidSo() throws {
        // A server that pads its records: the probe's own records are longer than its messages.
        let padded = FlightAgreement.ProbeFlight(messages: Self.genuine, recordLengths: Self.records(Self.genuine).map { $0 + 32 })
        guard case .undecidable = try compare(Self.records(Self.genuine), probe: padded) else { Issue.record("padding compared"); return }
        // A probe that saw no Finished.
        let cut = FlightAgreement.ProbeFlight(messages: Array(Self.genuine.prefix(2)), recordLengths: Array(Self.records(Self.genuine).prefix(2)))
        guard case .undecidable = try compare(Self.records(Self.genuine), probe: cut) else { Issue.record("no Finished compared"); return }
        // A client that offered certificate compression, or record_size_limit, which the probe cannot offer.
        for type: UInt16 in [27, 28] {
            var client = try EvidenceAgreementTests.hellos("tls13-rsa").client
            client.extensionTypes.append(type)
            guard case .undecidable(let why) = try compare([27, 900, 281, 53], client: client), why.contains("\(type)") else {
                Issue.record("extension \(type) the probe lacked, compared anyway"); return
            }
        }
        // Padding, or a pre-shared key the server turned down, changes nothing the server sends.
        var padding = try EvidenceAgreementTests.hellos("tls13-rsa").client
        padding.extensionTypes += [21, 41]
        guard case .differs = try compare([27, 900, 281, 53], client: padding) else { Issue.record("padding made it undecidable"); return }
    }

    @Test func theCapturedHandshakeShowsItsFlight() throws {
        // The watcher walks the real TLS 1.3 stream's record headers after the ServerHello, whatever the chunking.
        func flight(chunk: Int) throws -> [EncryptedRecord] {
            var w = HandshakeWatch()
            _ = w.client(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
            let s2c = try TLSFixture.bytes("tls13-rsa.s2c.bin")
            var i = 0
            while i < s2c.count {
                _ = w.server(s2c[i..<min(s2c.count, i &+ chunk)])
                i = min(s2c.count, i &+ chunk)
            }
            #expect(w.serverFlightTracking == .tracking)
            return w.serverFlight
        }
        let whole = try flight(chunk: .max)
        #expect(try flight(chunk: 1) == whole && (try flight(chunk: 7)) == whole)
        #expect(whole.allSatisfy { $0.contentType == 23 } && whole.count >= 4)
        // The leaf and intermediate are in there: the flight is at least their DER plus framing, a 2048-bit RSA
        // CertificateVerify (264) and a SHA-256 Finished (36).
        let certificates = try TLSFixture.der(pem: "rsa-leaf.pem").count + TLSFixture.der(pem: "rsa-intermediate.pem").count
        let plain = whole.reduce(0) { $0 + $1.length - 17 }
        #expect(plain >= certificates + 264 + 36)
    }
}
