import ChainwatchCore
import ChainwatchCrypto
import Crypto
import Foundation
import Testing

/// The provider's key exchanges against peers made directly with swift-crypto.
@Suite struct KeyExchangeTests {
    let crypto = SwiftCryptoTLS()

    @Test func x25519() throws {
        let ours = try crypto.keyExchange(group: 0x001D, x25519: nil)
        #expect(ours.group == 0x001D && ours.publicShare.count == 32)
        let peer = Curve25519.KeyAgreement.PrivateKey()
        let theirs = try peer.sharedSecretFromKeyAgreement(with: .init(rawRepresentation: ours.publicShare))
        let secret = try ours.sharedSecret(serverShare: Array(peer.publicKey.rawRepresentation))
        #expect(secret.count == 32 && secret == theirs.withUnsafeBytes { Array($0) })
        #expect(throws: TLSCryptoError.self) { try ours.sharedSecret(serverShare: [UInt8](repeating: 1, count: 31)) }
        #expect(throws: TLSCryptoError.self) { try ours.sharedSecret(serverShare: [UInt8](repeating: 0, count: 32)) }
    }

    /// A swift-crypto peer for secp256r1 or secp384r1: its uncompressed point and the secret with `clientShare`.
    func nistPeer(group: UInt16, clientShare: [UInt8]) throws -> (share: [UInt8], secret: [UInt8]) {
        if group == 0x0017 {
            let peer = P256.KeyAgreement.PrivateKey()
            let secret = try peer.sharedSecretFromKeyAgreement(with: .init(x963Representation: clientShare))
            return (Array(peer.publicKey.x963Representation), secret.withUnsafeBytes { Array($0) })
        }
        let peer = P384.KeyAgreement.PrivateKey()
        let secret = try peer.sharedSecretFromKeyAgreement(with: .init(x963Representation: clientShare))
        return (Array(peer.publicKey.x963Representation), secret.withUnsafeBytes { Array($0) })
    }

    @Test(arguments: [(UInt16(0x0017), 65, 32), (0x0018, 97, 48)])
    func nistCurves(group: UInt16, shareLength: Int, secretLength: Int) throws {
        let ours = try crypto.keyExchange(group: group, x25519: nil)
        #expect(ours.group == group && ours.publicShare.count == shareLength && ours.publicShare.first == 4)
        let peer = try nistPeer(group: group, clientShare: ours.publicShare)
        let secret = try ours.sharedSecret(serverShare: peer.share)
        #expect(secret.count == secretLength && secret == peer.secret)
        var offCurve = peer.share
        offCurve[shareLength - 1] ^= 1
        #expect(throws: TLSCryptoError.self) { try ours.sharedSecret(serverShare: offCurve) }
        #expect(throws: TLSCryptoError.self) { try ours.sharedSecret(serverShare: Array(peer.share.dropFirst())) }
    }

    /// The server side of X25519MLKEM768 built here: encapsulate to the client's ML-KEM key, x25519 with its half.
    func serverSide(for clientShare: [UInt8]) throws -> (share: [UInt8], secret: [UInt8], x25519: [UInt8]) {
        let encapsulation = try MLKEM768.PublicKey(rawRepresentation: clientShare.prefix(1184)).encapsulate()
        let peer = Curve25519.KeyAgreement.PrivateKey()
        let x25519 = try peer.sharedSecretFromKeyAgreement(with: .init(rawRepresentation: clientShare.suffix(32)))
            .withUnsafeBytes { Array($0) }
        return (Array(encapsulation.encapsulated) + Array(peer.publicKey.rawRepresentation),
                encapsulation.sharedSecret.withUnsafeBytes { Array($0) } + x25519, x25519)
    }

    @Test func x25519MLKEM768() throws {
        let ours = try crypto.keyExchange(group: 0x11EC, x25519: nil)
        #expect(ours.group == 0x11EC && ours.publicShare.count == 1216)
        let server = try serverSide(for: ours.publicShare)
        #expect(server.share.count == 1120)
        let secret = try ours.sharedSecret(serverShare: server.share)
        #expect(secret.count == 64 && secret == server.secret)
        #expect(throws: TLSCryptoError.self) { try ours.sharedSecret(serverShare: Array(server.share.dropLast())) }
    }

    @Test func x25519MLKEM768SharesTheGivenX25519Key() throws {
        let classical = try crypto.keyExchange(group: 0x001D, x25519: nil)
        let hybrid = try crypto.keyExchange(group: 0x11EC, x25519: classical)
        #expect(Array(hybrid.publicShare.suffix(32)) == classical.publicShare)
        let server = try serverSide(for: hybrid.publicShare)
        let secret = try hybrid.sharedSecret(serverShare: server.share)
        #expect(secret == server.secret)
        #expect(try classical.sharedSecret(serverShare: Array(server.share.suffix(32))) == Array(secret.suffix(32)))
    }

    /// secp521r1 (Firefox, Safari, curl and GnuTLS offer it; a HelloRetryRequest may ask for it): 133-byte points.
    @Test func secp521r1() throws {
        let ours = try crypto.keyExchange(group: 0x0019, x25519: nil)
        #expect(ours.group == 0x0019 && ours.publicShare.count == 133 && ours.publicShare.first == 4)
        let peer = P521.KeyAgreement.PrivateKey()
        let theirs = try peer.sharedSecretFromKeyAgreement(with: .init(x963Representation: ours.publicShare))
        #expect(try ours.sharedSecret(serverShare: Array(peer.publicKey.x963Representation)) == theirs.withUnsafeBytes { Array($0) })
    }

    /// X25519Kyber768Draft00's share is well-formed (its X25519 key first, then an ML-KEM-768 key, Kyber-768's
    /// encoding: every 12-bit coefficient below q = 3329), reuses a given X25519 key, and makes no secret.
    @Test func x25519Kyber768Draft00IsAWellFormedShareOnly() throws {
        let classical = try crypto.keyExchange(group: 0x001D, x25519: nil)
        let share = try crypto.keyExchange(group: 0x6399, x25519: classical)
        #expect(share.group == 0x6399 && share.publicShare.count == 1216)
        #expect(Array(share.publicShare.prefix(32)) == classical.publicShare)
        let key = Array(share.publicShare.dropFirst(32))
        _ = try MLKEM768.PublicKey(rawRepresentation: key)   // swift-crypto's own check of the encoding
        for i in stride(from: 0, to: 1152, by: 3) {           // 384 × 3 bytes: two 12-bit coefficients each
            let a = Int(key[i]) | (Int(key[i + 1]) & 0x0F) << 8, b = Int(key[i + 1]) >> 4 | Int(key[i + 2]) << 4
            #expect(a < 3329 && b < 3329)
        }
        #expect(throws: TLSCryptoError.self) { try share.sharedSecret(serverShare: [UInt8](repeating: 1, count: 1120)) }
        let alone = try crypto.keyExchange(group: 0x6399, x25519: nil)
        #expect(alone.publicShare.count == 1216 && Array(alone.publicShare.prefix(32)) != classical.publicShare)
    }

    /// X448 and the finite-field groups, through OpenSSL (`KeyAgreement`): a share of the group's length each, and a
    /// share of another length refused as malformed.
    @Test(arguments: [(UInt16(0x001E), 56), (0x0100, 256), (0x0104, 1024)])
    func x448AndFiniteFieldGroups(_ group: UInt16, _ length: Int) throws {
        let client = try crypto.keyExchange(group: group, x25519: nil), server = try crypto.keyExchange(group: group, x25519: nil)
        #expect(client.group == group && client.publicShare.count == length)
        #expect(try client.sharedSecret(serverShare: server.publicShare) == server.sharedSecret(serverShare: client.publicShare))
        #expect(throws: TLSCryptoError.self) { try client.sharedSecret(serverShare: Array(server.publicShare.dropFirst())) }
    }

    @Test func unsupported() throws {
        #expect(throws: TLSCryptoError.unsupported("group 0x001A")) { try crypto.keyExchange(group: 0x001A, x25519: nil) }
        #expect(throws: TLSCryptoError.unsupported("group 0x0105")) { try crypto.keyExchange(group: 0x0105, x25519: nil) }
        let p256 = try crypto.keyExchange(group: 0x0017, x25519: nil)
        #expect(throws: TLSCryptoError.self) { try crypto.keyExchange(group: 0x11EC, x25519: p256) }
    }
}
