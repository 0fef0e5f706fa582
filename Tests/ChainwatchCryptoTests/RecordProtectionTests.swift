import ChainwatchCore
import ChainwatchCrypto
import Testing

/// TLS13RecordProtection beyond the RFC 8448 records: sequence numbers, padding, and what `open` refuses.
@Suite struct RecordProtectionTests {
    let crypto = SwiftCryptoTLS()
    let key = [UInt8](repeating: 7, count: 16)
    let iv = [UInt8](repeating: 9, count: 12)

    func pair() -> (TLS13RecordProtection, TLS13RecordProtection) {
        (TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: key, iv: iv),
         TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: key, iv: iv))
    }

    @Test func recordsOpenInOrderOnly() throws {
        var (writer, reader) = pair()
        let first = try writer.seal(contentType: 23, Array("one".utf8))
        let second = try writer.seal(contentType: 23, Array("one".utf8))
        #expect(first != second)  // the nonce moved on
        #expect(Array(first.prefix(3)) == [23, 3, 3])
        #expect(Int(first[3]) << 8 | Int(first[4]) == first.count - 5)
        #expect(throws: TLSCryptoError.authenticationFailure) {
            try reader.open(header: Array(second.prefix(5)), payload: Array(second.dropFirst(5)))
        }
        let opened = try reader.open(header: Array(first.prefix(5)), payload: Array(first.dropFirst(5)))
        #expect(opened.contentType == 23 && opened.content == Array("one".utf8))
        let openedSecond = try reader.open(header: Array(second.prefix(5)), payload: Array(second.dropFirst(5)))
        #expect(openedSecond.content == Array("one".utf8))
    }

    /// TLS_AES_256_GCM_SHA384 and TLS_CHACHA20_POLY1305_SHA256: the schedule's sizes, and a record through each.
    @Test(arguments: [(UInt16(0x1302), TLSHashAlgorithm.sha384), (0x1303, .sha256)])
    func otherSuites(suite: UInt16, hash: TLSHashAlgorithm) throws {
        var schedule = TLS13KeySchedule(crypto: crypto, suite: suite)
        #expect(schedule.hash == hash)
        let transcript = crypto.transcriptHash(hash).current()
        let secrets = schedule.handshakeTrafficSecrets(sharedSecret: crypto.randomBytes(32), transcriptHash: transcript)
        #expect(secrets.client.count == hash.length && secrets.client != secrets.server)
        let keys = schedule.trafficKeys(secret: secrets.client)
        #expect(keys.key.count == 32 && keys.iv.count == 12)
        #expect(schedule.finishedVerifyData(baseKey: secrets.client, transcriptHash: transcript).count == hash.length)
        let application = schedule.applicationTrafficSecrets(transcriptHash: transcript)
        #expect(application.server.count == hash.length && application.server != secrets.server)
        var writer = TLS13RecordProtection(crypto: crypto, suite: suite, key: keys.key, iv: keys.iv)
        var reader = TLS13RecordProtection(crypto: crypto, suite: suite, key: keys.key, iv: keys.iv)
        let record = try writer.seal(contentType: 23, [1, 2, 3])
        let opened = try reader.open(header: Array(record.prefix(5)), payload: Array(record.dropFirst(5)))
        #expect(opened.contentType == 23 && opened.content == [1, 2, 3])
    }

    /// A record with zero padding after its content type opens to the content and the real type.
    @Test func paddingIsStripped() throws {
        var (_, reader) = pair()
        let inner: [UInt8] = [1, 2, 3, 21, 0, 0, 0, 0]
        let header: [UInt8] = [23, 3, 3, 0, UInt8(inner.count + 16)]
        let payload = try crypto.seal(suite: 0x1301, key: key, nonce: iv, additionalData: header, plaintext: inner)
        let opened = try reader.open(header: header, payload: payload)
        #expect(opened.contentType == 21 && opened.content == [1, 2, 3])
    }

    @Test func allZeroPlaintextIsMalformed() throws {
        var (_, reader) = pair()
        let header: [UInt8] = [23, 3, 3, 0, 4 + 16]
        let payload = try crypto.seal(suite: 0x1301, key: key, nonce: iv, additionalData: header, plaintext: [0, 0, 0, 0])
        #expect(throws: TLSCryptoError.malformed("record plaintext without a content type")) {
            try reader.open(header: header, payload: payload)
        }
    }

    @Test func oversizedOrMislabelledRecordsAreMalformed() {
        var (writer, reader) = pair()
        let big = [UInt8](repeating: 0, count: (1 << 14) + 257)
        #expect(throws: TLSCryptoError.self) {
            try reader.open(header: [23, 3, 3, UInt8(big.count >> 8), UInt8(big.count & 0xFF)], payload: big)
        }
        #expect(throws: TLSCryptoError.self) { try reader.open(header: [23, 3, 3, 0, 20], payload: [UInt8](repeating: 0, count: 21)) }
        #expect(throws: TLSCryptoError.self) { try reader.open(header: [23, 3, 3, 0], payload: []) }
        #expect(throws: TLSCryptoError.self) { try writer.seal(contentType: 23, [UInt8](repeating: 0, count: (1 << 14) + 1)) }
    }
}
