import ChainwatchCore
import ChainwatchCrypto
import Testing

/// The probe client on RFC 8448 §3's handshake: with the trace's random and key share drawn, its hello is the trace's
/// hello byte for byte, it reads the server's flight (CertificateVerify checked with the trace's RSA certificate by
/// OpenSSL, Finished with the handshake secret), and its own Finished record is the trace's.
@Suite struct ProbeClientTests {
    typealias Trace = RFC8448Tests

    /// The real provider, but for what the trace fixed: the client random, and the x25519 exchange (the trace's
    /// public share; the shared secret is the trace's ECDHE secret).
    struct TraceCrypto: TLSCrypto {
        let real = SwiftCryptoTLS()
        func randomBytes(_ count: Int) -> [UInt8] {
            count == 32 ? Array(Trace.clientHello[6..<38]) : real.randomBytes(count)
        }
        func transcriptHash(_ algorithm: TLSHashAlgorithm) -> any TLSTranscriptHash { real.transcriptHash(algorithm) }
        func hmac(_ algorithm: TLSHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] { real.hmac(algorithm, key: key, data: data) }
        func keyExchange(group: UInt16, x25519: (any TLSKeyExchange)?) throws(TLSCryptoError) -> any TLSKeyExchange {
            guard group == 0x001D else { throw .unsupported("group") }
            return TraceExchange()
        }
        func seal(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
            try real.seal(suite: suite, key: key, nonce: nonce, additionalData: additionalData, plaintext: plaintext)
        }
        func open(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
            try real.open(suite: suite, key: key, nonce: nonce, additionalData: additionalData, ciphertext: ciphertext)
        }
        func verify(scheme: UInt16, certificateDER: [UInt8], content: [UInt8], signature: [UInt8]) -> Bool {
            real.verify(scheme: scheme, certificateDER: certificateDER, content: content, signature: signature)
        }
        func decompress(algorithm: UInt16, _ data: [UInt8], uncompressedLength: Int) throws(TLSCryptoError) -> [UInt8] {
            try real.decompress(algorithm: algorithm, data, uncompressedLength: uncompressedLength)
        }
    }

    final class TraceExchange: TLSKeyExchange {
        let group: UInt16 = 0x001D
        let publicShare = hex("99381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae4d5413691e529aaf2c")
        func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
            guard serverShare == hex("c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f") else { throw .malformed("share") }
            return Trace.ecdheSecret
        }
    }

    static var serverHelloRecord: [UInt8] { [22, 3, 3, 0, UInt8(Trace.serverHello.count)] + Trace.serverHello }

    func client() throws -> ProbeClient {
        try ProbeClient(clientHello: Trace.clientHello, recordVersion: 0x0301, crypto: TraceCrypto(), maxCertificateList: 512 * 1024)
    }

    /// Feeds `bytes` in chunks of `chunk`; the last step.
    func feed(_ client: inout ProbeClient, _ bytes: [UInt8], chunk: Int) throws(ProbeClientError) -> ProbeClient.Step {
        var step = ProbeClient.Step.needsMoreBytes(send: [])
        var offset = 0
        while offset < bytes.count {
            step = try client.receive(bytes[offset..<min(bytes.count, offset + chunk)])
            offset += chunk
            if case .done = step { return step }
        }
        return step
    }

    @Test func theTracesHandshakeByteForByte() throws {
        var probe = try client()
        #expect(probe.start() == [22, 3, 1, 0, UInt8(Trace.clientHello.count)] + Trace.clientHello)
        let step = try feed(&probe, Self.serverHelloRecord + Trace.serverFlightRecord, chunk: 1 << 20)
        guard case .done(let result, let send) = step else { Issue.record("not done: \(step)"); return }
        #expect(Array(send.prefix(Trace.clientFinishedRecord.count)) == Trace.clientFinishedRecord)
        #expect(send.count == Trace.clientFinishedRecord.count + 5 + 2 + 1 + 16)   // then close_notify, sealed
        #expect(result.chainDER == [Array(Trace.certificate[11..<(11 + 0x1b0)])])
        #expect(result.version == .tls1_3 && result.cipher.rawValue == 0x1301 && result.proofVerified)
        #expect(result.serverMessages.map(\.type) == [8, 11, 15, 20])
        #expect(result.serverRecordLengths == [Trace.serverFlightRecord.count - 5])
        #expect(result.clientHello == Trace.clientHello && result.serverHello == Trace.serverHello)
    }

    @Test func chunkingDoesNotChangeTheResult() throws {
        var whole = try client()
        var dripped = try client()
        let flight = Self.serverHelloRecord + Trace.serverFlightRecord
        guard case .done(let expected, let sent) = try feed(&whole, flight, chunk: 1 << 20),
              case .done(let result, let send) = try feed(&dripped, flight, chunk: 1) else {
            Issue.record("not done"); return
        }
        #expect(result == expected)
        #expect(send.prefix(Trace.clientFinishedRecord.count) == sent.prefix(Trace.clientFinishedRecord.count))
    }

    /// The flight re-sealed with one message changed: the server's handshake key is known here, as an interceptor
    /// replaying the genuine chain to the probe would have its own.
    func resealed(_ change: (inout [UInt8]) -> Void) -> [UInt8] {
        let crypto = SwiftCryptoTLS()
        var schedule = TLS13KeySchedule(crypto: crypto, suite: 0x1301)
        var transcript = crypto.transcriptHash(.sha256)
        transcript.update(Trace.clientHello + Trace.serverHello)
        let secrets = schedule.handshakeTrafficSecrets(sharedSecret: Trace.ecdheSecret, transcriptHash: transcript.current())
        let keys = schedule.trafficKeys(secret: secrets.server)
        var protection = TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: keys.key, iv: keys.iv)
        var plain = Trace.encryptedExtensions + Trace.certificate + Trace.certificateVerify + Trace.serverFinished
        change(&plain)
        return (try? protection.seal(contentType: 22, plain)) ?? []
    }

    @Test func theUnchangedResealedFlightIsTheTraces() {
        #expect(resealed { _ in } == Trace.serverFlightRecord)
    }

    @Test func aCertificateVerifyThatDoesNotVerifyIsRefused() throws {
        var probe = try client()
        let signatureByte = Trace.encryptedExtensions.count + Trace.certificate.count + 20
        let flight = resealed { $0[signatureByte] ^= 1 }
        #expect(throws: ProbeClientError.verificationFailed("the server's CertificateVerify does not verify with its certificate's key")) {
            _ = try feed(&probe, Self.serverHelloRecord + flight, chunk: 1 << 20)
        }
    }

    @Test func aFinishedThatDoesNotVerifyIsRefused() throws {
        var probe = try client()
        let flight = resealed { $0[$0.count - 1] ^= 1 }
        #expect(throws: ProbeClientError.verificationFailed("the server's Finished does not verify")) {
            _ = try feed(&probe, Self.serverHelloRecord + flight, chunk: 1 << 20)
        }
    }

    @Test func anotherChainWithTheGenuineProofIsRefused() throws {
        // A forger's certificate (one byte of the key changed) before the genuine CertificateVerify: the signature
        // was made with the genuine key over a transcript with the genuine certificate.
        var probe = try client()
        let keyByte = Trace.encryptedExtensions.count + 11 + 200
        let flight = resealed { $0[keyByte] ^= 0x10 }
        #expect(throws: ProbeClientError.self) { _ = try feed(&probe, Self.serverHelloRecord + flight, chunk: 1 << 20) }
    }

    @Test func aTLS12ServerHelloWithATLS13SuiteIsRefused() throws {
        // Without the refusal the flight would be read as an RSA key exchange, which has no signature to check, and
        // pass as proven (found by FuzzProbeClient's invariant).
        var probe = try client()
        let body: [UInt8] = [3, 3] + [UInt8](repeating: 7, count: 32) + [0] + [0x13, 0x01] + [0]
        let record: [UInt8] = [22, 3, 3, 0, UInt8(body.count + 4), 2, 0, 0, UInt8(body.count)] + body
        #expect(throws: ProbeClientError.protocolViolation("the server chose suite TLS_AES_128_GCM_SHA256 for TLS 1.2 or older")) {
            _ = try probe.receive(record)
        }
    }

    /// The trace's hello with TLS_RSA_WITH_AES_128_GCM_SHA256 (0x009C) offered after its TLS 1.3 suites, as curl's
    /// hello offers TLS 1.2 suites.
    static var clientHelloWithATLS12Suite: [UInt8] {
        var hello = Trace.clientHello
        let suites = 38 + 1 + Int(hello[38])   // type, length, version, random; the session id
        let count = Int(hello[suites]) << 8 | Int(hello[suites + 1])
        hello.insert(contentsOf: [0x00, 0x9C], at: suites + 2 + count)
        hello[suites + 1] += 2
        let length = hello.count - 4
        hello[1] = UInt8(length >> 16); hello[2] = UInt8((length >> 8) & 0xFF); hello[3] = UInt8(length & 0xFF)
        return hello
    }

    /// Below TLS 1.3 the version is the ServerHello's legacy_version, TLS 1.0 to 1.2: one of 0x0304 without
    /// supported_versions made a plain TLS 1.2 flight (RSA key exchange) a TLS 1.3 result without TLS 1.3's proof
    /// (found by FuzzProbeClient's invariant); supported_versions naming anything but TLS 1.3 is refused as RFC 8446
    /// §4.2.1 says. The same ServerHello with 0x0303 is read on (the client then waits for the server's Certificate).
    @Test(arguments: [([3, 4] as [UInt8], [] as [UInt8], "the ServerHello names version 0x0304 without TLS 1.3's supported_versions"),
                      ([3, 0], [], "the ServerHello names version 0x0300 without TLS 1.3's supported_versions"),
                      ([3, 3], [0, 6, 0, 43, 0, 2, 3, 3], "the ServerHello selects version 0x0303, which is not TLS 1.3"),
                      ([3, 3], [], nil)])
    func aServerHelloBelowTLS13MustNameItsVersionAsTLS12Does(_ version: [UInt8], _ extensions: [UInt8], _ message: String?) throws {
        var probe = try ProbeClient(clientHello: Self.clientHelloWithATLS12Suite, recordVersion: 0x0301, crypto: TraceCrypto(),
                                    maxCertificateList: 512 * 1024)
        _ = probe.start()
        let body: [UInt8] = version + [UInt8](repeating: 7, count: 32) + [0] + [0x00, 0x9C] + [0] + extensions
        let record: [UInt8] = [22, 3, 3, 0, UInt8(body.count + 4), 2, 0, 0, UInt8(body.count)] + body
        if let message {
            #expect(throws: ProbeClientError.protocolViolation(message)) { _ = try probe.receive(record) }
        } else {
            guard case .needsMoreBytes(let send) = try probe.receive(record) else {
                Issue.record("a TLS 1.2 ServerHello ended the handshake")
                return
            }
            #expect(send.isEmpty)
        }
    }

    @Test func aServerAlertIsTheFailure() throws {
        var probe = try client()
        #expect(throws: ProbeClientError.alert(40)) { _ = try probe.receive([21, 3, 3, 0, 2, 2, 40]) }
        #expect(ProbeClientError.alert(40).description == "the server sent alert handshake_failure (40)")
    }

    @Test func aCertificateOverTheLimitCanBeReadWithMoreRoom() throws {
        var probe = try ProbeClient(clientHello: Trace.clientHello, crypto: TraceCrypto(), maxCertificateList: 100)
        do {
            _ = try feed(&probe, Self.serverHelloRecord + Trace.serverFlightRecord, chunk: 1 << 20)
            Issue.record("a 445-byte Certificate passed a 100-byte limit")
        } catch {
            #expect(error.isExcessiveMessageSize)
        }
    }
}
