import ChainwatchCore
import ChainwatchCrypto
import Crypto
import Foundation
import Testing

/// The three TLS 1.3 AEADs (OpenSSL's): round trip, a flipped bit, unsupported suites, RFC 8439's vector, and the same
/// bytes as swift-crypto's (BoringSSL) for random keys, nonces and lengths.
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

    @Test(arguments: [(UInt16(0x1301), 16), (0x1302, 32), (0x1303, 32)])
    func sameBytesAsSwiftCrypto(suite: UInt16, keyLength: Int) throws {
        for length in [0, 1, 15, 16, 17, 255, 1_000, 16_385] {
            let key = crypto.randomBytes(keyLength), nonce = crypto.randomBytes(12)
            let aad = crypto.randomBytes(length % 2 == 1 ? 0 : 5), plaintext = crypto.randomBytes(length)   // none with odd
            let sealed = try crypto.seal(suite: suite, key: key, nonce: nonce, additionalData: aad, plaintext: plaintext)
            let symmetric = SymmetricKey(data: key)
            let reference: [UInt8]
            if suite == 0x1303 {
                let box = try ChaChaPoly.seal(plaintext, using: symmetric, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: aad)
                reference = Array(box.ciphertext) + Array(box.tag)
            } else {
                let box = try AES.GCM.seal(plaintext, using: symmetric, nonce: AES.GCM.Nonce(data: nonce), authenticating: aad)
                reference = Array(box.ciphertext) + Array(box.tag)
            }
            #expect(sealed == reference, "suite \(suite), \(length) bytes")
            #expect(try crypto.open(suite: suite, key: key, nonce: nonce, additionalData: aad, ciphertext: reference) == plaintext)
            var forged = reference
            forged[forged.count - 1] ^= 0x80   // the tag's last byte: refused even with no plaintext to return
            #expect(throws: TLSCryptoError.authenticationFailure) {
                try crypto.open(suite: suite, key: key, nonce: nonce, additionalData: aad, ciphertext: forged)
            }
        }
        #expect(throws: TLSCryptoError.malformed("a ciphertext shorter than its tag")) {
            try crypto.open(suite: suite, key: crypto.randomBytes(keyLength), nonce: crypto.randomBytes(12), additionalData: [],
                            ciphertext: crypto.randomBytes(15))
        }
        #expect(throws: TLSCryptoError.malformed("a 13-byte nonce")) {
            try crypto.open(suite: suite, key: crypto.randomBytes(keyLength), nonce: crypto.randomBytes(13), additionalData: [],
                            ciphertext: crypto.randomBytes(16))
        }
    }

    /// RFC 8439 §2.8.2: ChaCha20-Poly1305, the sunscreen message.
    @Test func chaCha20Poly1305KnownAnswer() throws {
        let key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
        let nonce = hex("070000004041424344454647")
        let aad = hex("50515253c0c1c2c3c4c5c6c7")
        let plaintext = Array(("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
                               + "future, sunscreen would be it.").utf8)
        let expected = hex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b"
                           + "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc"
                           + "3ff4def08e4b7a9de576d26586cec64b6116" + "1ae10b594f09e26a7e902ecbd0600691")
        #expect(try crypto.seal(suite: 0x1303, key: key, nonce: nonce, additionalData: aad, plaintext: plaintext) == expected)
        #expect(try crypto.open(suite: 0x1303, key: key, nonce: nonce, additionalData: aad, ciphertext: expected) == plaintext)
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
        #expect(crypto.hmac(.sha384, key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
                == hex("af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649"))
        // RFC 4231 test case 6: a key longer than either hash's block (131 bytes), hashed first.
        let longKey = [UInt8](repeating: 0xAA, count: 131)
        let message = Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)
        #expect(crypto.hmac(.sha256, key: longKey, data: message)
                == hex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"))
        #expect(crypto.hmac(.sha384, key: longKey, data: message)
                == hex("4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952"))
        // A key of exactly one block, and an empty one: the padding's edges (expected values from `openssl mac`).
        #expect(crypto.hmac(.sha256, key: [UInt8](repeating: 0x0B, count: 64), data: message)
                == hex("d8e4aaea3b027f0f75234669945908e31f6101dc9631331676fe126de1d82cf1"))
        #expect(crypto.hmac(.sha256, key: [], data: message)
                == hex("79e2a6536cb16b4a1e9c2af81759764afd026173526f79f7816e9a3bc5fbaba8"))
        #expect(crypto.hmac(.sha384, key: [UInt8](repeating: 0x0B, count: 128), data: message)
                == hex("20bf49f966019bbbefbf9c5d88479db189a0026b64bf0d87d40e220b4e7fe09d874c9b952e363289bcabd69f039c3dac"))
        #expect(crypto.hmac(.sha384, key: [], data: message)
                == hex("77f1f643b8a25cb64d6391ee146e23afd3de77574300e47ede21b60e07c56b9742c35ddf7ae4debb05b1d158fe547224"))
        // Random draws longer than one getentropy call (256 bytes) are filled to the end.
        let long = crypto.randomBytes(700)
        #expect(long.count == 700 && Set(long[600...]).count > 1)
    }
}
