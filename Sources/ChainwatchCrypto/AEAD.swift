import ChainwatchCore
import ChainwatchOpenSSL

/// The AEAD of a TLS 1.3 suite with one key, through OpenSSL's libcrypto (`AEADCipher`): 0x1301 AES-128-GCM, 0x1302
/// AES-256-GCM, 0x1303 ChaCha20-Poly1305. Ciphertexts carry the 16-byte tag at their end; nonces are 12 bytes.
struct AEAD {
    private let cipher: AEADCipher
    private let key: [UInt8]

    /// Throws `.unsupported` for another suite, `.malformed` for a key of the wrong length for it.
    init(suite: UInt16, key: [UInt8]) throws(TLSCryptoError) {
        switch suite {
        case 0x1301: cipher = .aes128GCM
        case 0x1302: cipher = .aes256GCM
        case 0x1303: cipher = .chaCha20Poly1305
        default: throw .unsupported("suite 0x\(hex(suite))")
        }
        // The probe then cannot read this server's records: probe_failed, under `block` no server byte passes.
        guard cipher.isAvailable else { throw .unsupported("suite 0x\(hex(suite)): not offered by OpenSSL's providers here") }
        guard key.count == cipher.keyLength else { throw .malformed("a \(key.count)-byte key for suite 0x\(hex(suite))") }
        self.key = key
    }

    func seal(nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        do {
            return try cipher.seal(key: key, nonce: nonce, additionalData: additionalData, plaintext: plaintext)
        } catch {
            throw Self.mapped(error)
        }
    }

    func open(nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        do {
            return try cipher.open(key: key, nonce: nonce, additionalData: additionalData, ciphertext: ciphertext)
        } catch {
            throw Self.mapped(error)
        }
    }

    /// `AEADCipher`'s failures as Core names them: a tag that does not verify, or input (a nonce or ciphertext of the
    /// wrong length) or a step OpenSSL refused.
    private static func mapped(_ failure: AEADCipher.Failure) -> TLSCryptoError {
        switch failure {
        case .authentication: .authenticationFailure
        case .refused(let what): .malformed(what)
        }
    }
}

/// Four hex digits, as the errors name code points.
func hex(_ value: UInt16) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
