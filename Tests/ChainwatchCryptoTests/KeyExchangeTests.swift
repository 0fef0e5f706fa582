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

    @Test func unsupported() throws {
        #expect(throws: TLSCryptoError.unsupported("group 0x0019")) { try crypto.keyExchange(group: 0x0019, x25519: nil) }
        let p256 = try crypto.keyExchange(group: 0x0017, x25519: nil)
        #expect(throws: TLSCryptoError.self) { try crypto.keyExchange(group: 0x11EC, x25519: p256) }
    }
}
