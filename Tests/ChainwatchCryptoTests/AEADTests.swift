import ChainwatchCore
import ChainwatchCrypto
import Testing

/// The three TLS 1.3 AEADs: round trip, a flipped bit, unsupported suites.
@Suite struct AEADTests {
    let crypto = SwiftCryptoTLS()

    @Test(arguments: [(UInt16(0x1301), 16), (0x1302, 32), (0x1303, 32)])
    func roundTrip(suite: UInt16, keyLength: Int) throws {
        let key = crypto.randomBytes(keyLength)
        let nonce = crypto.randomBytes(12)
        let aad: [UInt8] = [23, 3, 3, 0, 21]
        let sealed = try crypto.seal(suite: suite, key: key, nonce: nonce, additionalData: aad, plaintext: Array("hello".utf8))
        #expect(sealed.count == 5 + 16)
        #expect(try crypto.open(suite: suite, key: key, nonce: nonce, additionalData: aad, ciphertext: sealed) == Array("hello".utf8))
        for index in [0, sealed.count - 1] {
            var flipped = sealed
            flipped[index] ^= 0x01
            #expect(throws: TLSCryptoError.authenticationFailure) {
                try crypto.open(suite: suite, key: key, nonce: nonce, additionalData: aad, ciphertext: flipped)
            }
        }
        #expect(throws: TLSCryptoError.authenticationFailure) {
            try crypto.open(suite: suite, key: key, nonce: nonce, additionalData: [23, 3, 3, 0, 22], ciphertext: sealed)
        }
    }

    @Test func unsupportedSuitesAndBadKeys() {
        #expect(throws: TLSCryptoError.unsupported("suite 0x1304")) {
            try crypto.seal(suite: 0x1304, key: [UInt8](repeating: 0, count: 16), nonce: [UInt8](repeating: 0, count: 12), additionalData: [], plaintext: [])
        }
        #expect(throws: TLSCryptoError.self) {
            try crypto.seal(suite: 0x1301, key: [UInt8](repeating: 0, count: 32), nonce: [UInt8](repeating: 0, count: 12), additionalData: [], plaintext: [])
        }
    }

    @Test func randomBytesAndHashes() {
        #expect(crypto.randomBytes(32).count == 32)
        #expect(crypto.randomBytes(32) != crypto.randomBytes(32))
        var sha384 = crypto.transcriptHash(.sha384)
        sha384.update(Array("abc".utf8))
        let once = sha384.current()
        #expect(once == sha384.current())  // current() leaves the hash usable
        #expect(once == hex("cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"))
        // RFC 4231 test case 2.
        #expect(crypto.hmac(.sha256, key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
                == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }
}
