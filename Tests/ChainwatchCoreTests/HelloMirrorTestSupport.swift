import Foundation
import Synchronization
@testable import ChainwatchCore

/// The real ClientHello messages of `Fixtures/hellos` (see its README.md).
enum HelloFixture {
    /// Hellos of fresh connections: the mirror reproduces their length exactly.
    static let fresh = ["chrome-1", "chrome-2", "chrome-3", "edge", "edge-2", "firefox", "firefox-2", "safari",
                        "safari-2", "safari-ios", "curl", "python-ssl", "openssl", "gnutls"]
    /// Every fixture, the resumed Chrome hello (pre_shared_key) included.
    static let all = fresh + ["chrome-resumed"]
    /// Chrome 152: extensions permuted per connection.
    static let permuting = ["chrome-1", "chrome-2", "chrome-3", "chrome-resumed"]
    /// Stacks that keep one extension order.
    static let ordered = ["edge", "edge-2", "firefox", "firefox-2", "safari", "safari-2", "safari-ios", "curl",
                          "python-ssl", "openssl", "gnutls"]

    static func bytes(_ name: String) throws -> [UInt8] {
        guard let base = Bundle.module.resourceURL else { throw FixtureMissing(name: name) }
        return Array(try Data(contentsOf: base.appendingPathComponent("Fixtures/hellos/\(name).bin")))
    }

    struct FixtureMissing: Error { let name: String }
}

/// A deterministic `TLSCrypto` for the mirror's tests: random bytes from a counter (SplitMix64 of seed and
/// counter), key shares of the right length for x25519, secp256r1, secp384r1 and X25519MLKEM768 (its last 32 bytes
/// the given x25519 exchange's share, when one is given); `.unsupported` for other groups and for `unsupported`.
final class MirrorTestCrypto: TLSCrypto {
    let seed: UInt64
    let unsupported: Set<UInt16>
    /// Groups whose share comes out one byte short (to provoke `.keyShareLengthMismatch`).
    let shortGroups: Set<UInt16>
    private let counter = Mutex<UInt64>(0)
    /// The groups `keyExchange` was asked for, in order.
    let asked = Mutex<[UInt16]>([])

    init(seed: UInt64, unsupported: Set<UInt16> = [], shortGroups: Set<UInt16> = []) {
        self.seed = seed
        self.unsupported = unsupported
        self.shortGroups = shortGroups
    }

    func randomBytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in
            let n = counter.withLock { value in value += 1; return value }
            var z = seed &* 0x9E37_79B9_7F4A_7C15 &+ n &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return UInt8(truncatingIfNeeded: z ^ (z >> 31))
        }
    }

    func keyExchange(group: UInt16, x25519: (any TLSKeyExchange)?) throws(TLSCryptoError) -> any TLSKeyExchange {
        asked.withLock { $0.append(group) }
        guard !unsupported.contains(group) else { throw .unsupported("group \(group)") }
        var share: [UInt8]
        switch group {
        case 0x001D: share = randomBytes(31) + [randomBytes(1)[0] & 0x7F]   // as a real X25519 key: bit 255 clear
        case 0x0017: share = [0x04] + randomBytes(64)
        case 0x0018: share = [0x04] + randomBytes(96)
        case 0x11EC: share = randomBytes(1184) + (x25519?.publicShare ?? randomBytes(32))
        case 0x0100: share = randomBytes(256)
        default: throw .unsupported("group \(group)")
        }
        if shortGroups.contains(group) { share.removeLast() }
        return MirrorTestKeyExchange(group: group, publicShare: share, x25519: x25519)
    }

    func transcriptHash(_ algorithm: TLSHashAlgorithm) -> any TLSTranscriptHash { fatalError("not used by the mirror") }
    func hmac(_ algorithm: TLSHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] { fatalError("not used by the mirror") }
    func seal(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        fatalError("not used by the mirror")
    }
    func open(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        fatalError("not used by the mirror")
    }
    func verify(scheme: UInt16, certificateDER: [UInt8], content: [UInt8], signature: [UInt8]) -> Bool { fatalError("not used by the mirror") }
    func decompress(algorithm: UInt16, _ data: [UInt8], uncompressedLength: Int) throws(TLSCryptoError) -> [UInt8] {
        fatalError("not used by the mirror")
    }
}

/// `MirrorTestCrypto`'s key exchange: a share and, for the hybrid, the x25519 exchange it was given.
final class MirrorTestKeyExchange: TLSKeyExchange {
    let group: UInt16
    let publicShare: [UInt8]
    let x25519: (any TLSKeyExchange)?

    init(group: UInt16, publicShare: [UInt8], x25519: (any TLSKeyExchange)?) {
        self.group = group
        self.publicShare = publicShare
        self.x25519 = x25519
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] { fatalError("not used by the mirror") }
}

/// Test views of a hello through the mirror's own parser.
extension HelloParts {
    init(fixture name: String) throws { try self.init(message: HelloFixture.bytes(name)) }

    func keyShares() throws -> [KeyShareEntry] { try KeyShareEntry.parse(body(of: TLSExtensionType.keyShare) ?? [0, 0]) }

    /// GREASE values in wire order after sorting the extensions `stack` permutes by type: place by place.
    func greaseByPlace(_ stack: HelloStack) throws -> [UInt16] {
        var sorted = self
        sorted.extensions?[stack.permutable].sort { $0.type < $1.type }
        return try sorted.greaseValues()
    }

    func ech() throws -> OuterECH? { try body(of: OuterECH.type).flatMap { try OuterECH.parse($0) } }
}
