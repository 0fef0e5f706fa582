import ChainwatchCore
import ChainwatchOpenSSL
import Crypto
import Foundation

/// The groups `SwiftCryptoTLS` performs (RFC 8446 §4.2.7 and draft-ietf-tls-ecdhe-mlkem code points).
enum NamedGroup {
    static let secp256r1: UInt16 = 0x0017
    static let secp384r1: UInt16 = 0x0018
    static let x25519: UInt16 = 0x001D
    static let secp521r1: UInt16 = 0x0019
    static let x25519MLKEM768: UInt16 = 0x11EC
    static let x25519Kyber768Draft00: UInt16 = 0x6399
    /// With OpenSSL's libcrypto (`KeyAgreement`): X448, and RFC 7919's ffdhe2048 (0x0100) to ffdhe8192 (0x0104).
    static let x448: UInt16 = 0x001E
    static let ffdhe: [UInt16: Int] = [0x0100: 2048, 0x0101: 3072, 0x0102: 4096, 0x0103: 6144, 0x0104: 8192]
}

/// A fresh exchange for `group`; for X25519MLKEM768, `x25519` (an `X25519Exchange` of this provider) gives the X25519
/// half. `.unsupported` for other groups, or an `x25519` exchange this provider did not make.
func makeKeyExchange(group: UInt16, x25519: (any TLSKeyExchange)?) throws(TLSCryptoError) -> any TLSKeyExchange {
    switch group {
    case NamedGroup.x25519: return X25519Exchange()
    case NamedGroup.secp256r1: return NISTExchange(.p256(P256.KeyAgreement.PrivateKey()))
    case NamedGroup.secp384r1: return NISTExchange(.p384(P384.KeyAgreement.PrivateKey()))
    case NamedGroup.secp521r1: return NISTExchange(.p521(P521.KeyAgreement.PrivateKey()))
    case NamedGroup.x25519MLKEM768, NamedGroup.x25519Kyber768Draft00:
        let classical: X25519Exchange
        if let x25519 {
            guard let given = x25519 as? X25519Exchange else {
                throw .unsupported("an X25519 half from another provider (group 0x\(hex(x25519.group)))")
            }
            classical = given
        } else {
            classical = X25519Exchange()
        }
        return group == NamedGroup.x25519MLKEM768 ? try X25519MLKEM768Exchange(x25519: classical)
            : try X25519Kyber768Draft00Share(x25519: classical)
    case NamedGroup.x448: return try OpenSSLGroupExchange(group: group, .x448)
    default:
        guard let bits = NamedGroup.ffdhe[group] else { throw .unsupported("group 0x\(hex(group))") }
        return try OpenSSLGroupExchange(group: group, .ffdhe(bits: bits))
    }
}

/// X448 or a finite-field group, with OpenSSL's libcrypto as libssl performs them (`KeyAgreement`).
final class OpenSSLGroupExchange: TLSKeyExchange {
    let group: UInt16
    let publicShare: [UInt8]
    private let agreement: KeyAgreement

    init(group: UInt16, _ kind: KeyAgreement.Kind) throws(TLSCryptoError) {
        self.group = group
        do throws(OpenSSLError) {
            agreement = try KeyAgreement(kind)
        } catch {
            throw .unsupported("group 0x\(hex(group)): \(error)")
        }
        publicShare = agreement.publicShare
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        do throws(OpenSSLError) {
            return try agreement.sharedSecret(peerShare: serverShare)
        } catch {
            throw .malformed("group 0x\(hex(group)) share: \(error)")
        }
    }
}

/// An x25519 exchange (RFC 7748): 32-byte shares, a 32-byte secret; an all-zero secret is refused (RFC 8446 §7.4.2).
final class X25519Exchange: TLSKeyExchange {
    let group = NamedGroup.x25519
    let publicShare: [UInt8]
    private let privateKey: Curve25519.KeyAgreement.PrivateKey

    init() {
        privateKey = Curve25519.KeyAgreement.PrivateKey()
        publicShare = Array(privateKey.publicKey.rawRepresentation)
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard serverShare.count == 32 else { throw .malformed("x25519 share of \(serverShare.count) bytes") }
        let secret: [UInt8]
        do {
            let peer = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: serverShare)
            secret = try privateKey.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
        } catch {
            throw .malformed("x25519 share: \(error)")
        }
        guard secret.contains(where: { $0 != 0 }) else { throw .malformed("x25519 share gives an all-zero secret") }
        return secret
    }
}

/// A secp256r1 or secp384r1 ECDHE exchange (RFC 8446 §4.2.8.2): shares are uncompressed points (65 or 97 bytes),
/// the secret is the x coordinate (32 or 48 bytes). swift-crypto refuses a point not on the curve.
final class NISTExchange: TLSKeyExchange {
    /// The private key, by curve.
    enum Key {
        case p256(P256.KeyAgreement.PrivateKey)
        case p384(P384.KeyAgreement.PrivateKey)
        case p521(P521.KeyAgreement.PrivateKey)
    }
    let group: UInt16
    let publicShare: [UInt8]
    private let key: Key

    init(_ key: Key) {
        self.key = key
        switch key {
        case .p256(let key): (group, publicShare) = (NamedGroup.secp256r1, Array(key.publicKey.x963Representation))
        case .p384(let key): (group, publicShare) = (NamedGroup.secp384r1, Array(key.publicKey.x963Representation))
        case .p521(let key): (group, publicShare) = (NamedGroup.secp521r1, Array(key.publicKey.x963Representation))
        }
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard serverShare.count == publicShare.count, serverShare.first == 0x04 else {
            throw .malformed("group 0x\(hex(group)) share of \(serverShare.count) bytes, not an uncompressed point")
        }
        do {
            switch key {
            case .p256(let key):
                let peer = try P256.KeyAgreement.PublicKey(x963Representation: serverShare)
                return try key.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
            case .p384(let key):
                let peer = try P384.KeyAgreement.PublicKey(x963Representation: serverShare)
                return try key.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
            case .p521(let key):
                let peer = try P521.KeyAgreement.PublicKey(x963Representation: serverShare)
                return try key.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
            }
        } catch {
            throw .malformed("group 0x\(hex(group)) share: \(error)")
        }
    }
}

/// The X25519MLKEM768 hybrid (draft-ietf-tls-ecdhe-mlkem): the client share is the ML-KEM-768 encapsulation key
/// (1184 bytes) then the X25519 public key (32); the server's is the ML-KEM ciphertext (1088) then its X25519 key
/// (32); the secret is the ML-KEM shared secret (32) then the X25519 one (32).
final class X25519MLKEM768Exchange: TLSKeyExchange {
    static let encapsulationKeyLength = 1184
    static let ciphertextLength = 1088
    let group = NamedGroup.x25519MLKEM768
    let publicShare: [UInt8]
    private let mlkem: MLKEM768.PrivateKey
    private let x25519: X25519Exchange

    /// A fresh ML-KEM-768 key beside `x25519` (which may also be offered on its own).
    init(x25519: X25519Exchange) throws(TLSCryptoError) {
        do {
            mlkem = try MLKEM768.PrivateKey()
        } catch {
            throw .unsupported("ML-KEM-768 key generation: \(error)")
        }
        self.x25519 = x25519
        publicShare = Array(mlkem.publicKey.rawRepresentation) + x25519.publicShare
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard serverShare.count == Self.ciphertextLength + 32 else {
            throw .malformed("X25519MLKEM768 share of \(serverShare.count) bytes")
        }
        let mlkemSecret: [UInt8]
        do {
            mlkemSecret = try mlkem.decapsulate(serverShare.prefix(Self.ciphertextLength)).withUnsafeBytes { Array($0) }
        } catch {
            throw .malformed("X25519MLKEM768 ciphertext: \(error)")
        }
        return mlkemSecret + (try x25519.sharedSecret(serverShare: Array(serverShare.suffix(32))))
    }
}

/// X25519Kyber768Draft00 (draft-tls-westerbaan-xyber768d00; Chrome 124 to 130, Go 1.23's default): the client share is
/// the X25519 public key (32) then a Kyber-768 public key (1184), whose encoding ML-KEM-768's encapsulation key shares
/// (the 12-bit coefficients of t̂, then ρ), so the share is well-formed as a real client's is (random bytes, as sent
/// before, decode as such about once in 10^69: a tell). The secret cannot be made: Kyber's round-3 decapsulation is not
/// ML-KEM's, and swift-crypto has only ML-KEM. A server that picks this group fails the probe, as before.
final class X25519Kyber768Draft00Share: TLSKeyExchange {
    let group = NamedGroup.x25519Kyber768Draft00
    let publicShare: [UInt8]

    init(x25519: X25519Exchange) throws(TLSCryptoError) {
        let key: MLKEM768.PrivateKey
        do { key = try MLKEM768.PrivateKey() } catch { throw .unsupported("ML-KEM-768 key generation: \(error)") }
        publicShare = x25519.publicShare + Array(key.publicKey.rawRepresentation)
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        throw .unsupported("X25519Kyber768Draft00: Kyber-768's round-3 decapsulation, which only the share was made for")
    }
}
