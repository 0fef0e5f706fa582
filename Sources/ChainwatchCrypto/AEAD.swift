import ChainwatchCore
import Crypto
import Foundation

/// The AEAD of a TLS 1.3 suite with one key (swift-crypto): 0x1301 AES-128-GCM, 0x1302 AES-256-GCM, 0x1303
/// ChaCha20-Poly1305. Ciphertexts carry the 16-byte tag at their end; nonces are 12 bytes.
struct AEAD {
    private enum Cipher { case aesGCM, chaChaPoly }
    static let tagLength = 16
    static let nonceLength = 12

    private let cipher: Cipher
    private let key: SymmetricKey

    /// Throws `.unsupported` for another suite, `.malformed` for a key of the wrong length for it.
    init(suite: UInt16, key: [UInt8]) throws(TLSCryptoError) {
        let keyLength: Int
        switch suite {
        case 0x1301: (cipher, keyLength) = (.aesGCM, 16)
        case 0x1302: (cipher, keyLength) = (.aesGCM, 32)
        case 0x1303: (cipher, keyLength) = (.chaChaPoly, 32)
        default: throw .unsupported("suite 0x\(hex(suite))")
        }
        guard key.count == keyLength else { throw .malformed("a \(key.count)-byte key for suite 0x\(hex(suite))") }
        self.key = SymmetricKey(data: key)
    }

    func seal(nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard nonce.count == Self.nonceLength else { throw .malformed("a \(nonce.count)-byte nonce") }
        do {
            switch cipher {
            case .aesGCM:
                let box = try AES.GCM.seal(plaintext, using: key, nonce: AES.GCM.Nonce(data: nonce), authenticating: additionalData)
                return Array(box.ciphertext) + Array(box.tag)
            case .chaChaPoly:
                let box = try ChaChaPoly.seal(plaintext, using: key, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: additionalData)
                return Array(box.ciphertext) + Array(box.tag)
            }
        } catch {
            throw .malformed("AEAD seal: \(error)")
        }
    }

    func open(nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard nonce.count == Self.nonceLength else { throw .malformed("a \(nonce.count)-byte nonce") }
        guard ciphertext.count >= Self.tagLength else { throw .malformed("a ciphertext shorter than its tag") }
        let body = ciphertext.dropLast(Self.tagLength)
        let tag = ciphertext.suffix(Self.tagLength)
        let opened: Data
        do {
            switch cipher {
            case .aesGCM:
                let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: body, tag: tag)
                opened = try AES.GCM.open(box, using: key, authenticating: additionalData)
            case .chaChaPoly:
                let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: body, tag: tag)
                opened = try ChaChaPoly.open(box, using: key, authenticating: additionalData)
            }
        } catch {
            throw .authenticationFailure
        }
        return Array(opened)
    }
}

/// Four hex digits, as the errors name code points.
func hex(_ value: UInt16) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
