import ChainwatchCore
import FuzzSupport

/// A deterministic `TLSCrypto` for fuzzing the probe client's reading of server bytes. A FUZZING STAND-IN, NOT
/// CRYPTOGRAPHY: it authenticates nothing, so that a fuzzer, which cannot forge a real AEAD tag or signature, reaches
/// the message parsers behind the record layer. The key schedule, record layer and handshake logic are Core's own
/// (they run unchanged); only these primitives are replaced. `make-corpus.py` mirrors them in Python to seal seeds.
///
/// - random bytes: byte n of one stream (n counting from 0 for each instance) is `(n * 167 + 13) mod 256`;
/// - hashes: Core's pure `SHA256`. SHA-384 (suite 0x1302) is stood in for by 48 bytes,
///   SHA256(m) ‖ SHA256(0x38 ‖ m)[0..<16], and its HMAC by HMAC-SHA256(k, m) ‖ HMAC-SHA256(k, 0x38 ‖ m)[0..<16];
/// - key exchange (x25519 0x001D, secp256r1 0x0017, secp384r1 0x0018, X25519MLKEM768 0x11EC): a fixed public share
///   of the group's length (0x42 bytes; P-256/P-384 with the 0x04 prefix; the hybrid's last 32 bytes the given
///   x25519 share), and a shared secret derived from the server's share alone (so the input controls it):
///   SHA256(share), cut or repeated to the group's secret length (32, 32, 48, 64); a server share of the wrong
///   length (32, 65, 97, 1088 + 32) is `.malformed`, as a real provider refuses it. Other groups: `.unsupported`;
/// - AEAD: seal = plaintext ‖ 16 × 0xAA; open accepts a ciphertext iff its last 16 bytes are 0xAA and returns the
///   bytes before them (key, nonce and additional data are ignored);
/// - verify: returns `verifies`, a flag the input chooses, so both branches are reached;
/// - decompress: the data itself when it is exactly `uncompressedLength` bytes, else `.malformed`; refuses an
///   `uncompressedLength` over 16 MiB. The engine must never ask for more than `maxCertificateList`: checked.
final class StandInCrypto: TLSCrypto, @unchecked Sendable {
    let verifies: Bool
    let maxCertificateList: Int
    private var counter = 0

    init(verifies: Bool, maxCertificateList: Int) {
        self.verifies = verifies
        self.maxCertificateList = maxCertificateList
    }

    /// Where the random stream stands, and a move back to such a place: the harness mirrors each hello once and
    /// replays every input from the state right after it (`main.swift`, `Start`).
    var position: Int {
        get { counter }
        set { counter = newValue }
    }

    func randomBytes(_ count: Int) -> [UInt8] {
        defer { counter += count }
        return (counter..<(counter + count)).map { UInt8(truncatingIfNeeded: $0 &* 167 &+ 13) }
    }

    func transcriptHash(_ algorithm: TLSHashAlgorithm) -> any TLSTranscriptHash { StandInHash(algorithm) }

    func hmac(_ algorithm: TLSHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        let mac = Self.hmacSHA256(key: key, data: data)
        return algorithm == .sha256 ? mac : mac + Self.hmacSHA256(key: key, data: [0x38] + data).prefix(16)
    }

    static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        inner.update(data)
        var outer = SHA256()
        outer.update(block.map { $0 ^ 0x5C })
        outer.update(inner.finalize())
        return outer.finalize()
    }

    func keyExchange(group: UInt16, x25519: (any TLSKeyExchange)?) throws(TLSCryptoError) -> any TLSKeyExchange {
        let fixed = { (count: Int) in [UInt8](repeating: 0x42, count: count) }
        switch group {
        case 0x001D: return StandInExchange(group: group, publicShare: fixed(32), serverShare: 32, secret: 32)
        case 0x0017: return StandInExchange(group: group, publicShare: [4] + fixed(64), serverShare: 65, secret: 32)
        case 0x0018: return StandInExchange(group: group, publicShare: [4] + fixed(96), serverShare: 97, secret: 48)
        case 0x11EC:
            let half = x25519?.publicShare ?? fixed(32)
            return StandInExchange(group: group, publicShare: fixed(1184) + half, serverShare: 1088 + 32, secret: 64)
        default: throw .unsupported("group \(group) (stand-in)")
        }
    }

    static let tag = [UInt8](repeating: 0xAA, count: 16)

    func seal(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8],
              plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        plaintext + Self.tag
    }

    func open(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8],
              ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard ciphertext.count >= 16, ciphertext.suffix(16).elementsEqual(Self.tag) else { throw .authenticationFailure }
        return Array(ciphertext.dropLast(16))
    }

    func verify(scheme: UInt16, certificateDER: [UInt8], content: [UInt8], signature: [UInt8]) -> Bool { verifies }

    func decompress(algorithm: UInt16, _ data: [UInt8], uncompressedLength: Int) throws(TLSCryptoError) -> [UInt8] {
        check(uncompressedLength <= maxCertificateList,
              "decompression of \(uncompressedLength) bytes asked for, over maxCertificateList \(maxCertificateList)")
        guard uncompressedLength <= 16 << 20 else { throw .malformed("uncompressed length \(uncompressedLength)") }
        guard data.count == uncompressedLength else {
            throw .malformed("stand-in: \(data.count) bytes, not \(uncompressedLength)")
        }
        return data
    }
}

/// The stand-in transcript hash: SHA256, or the 48-byte SHA-384 stand-in (see `StandInCrypto`).
struct StandInHash: TLSTranscriptHash {
    private var main = SHA256()
    private var extra: SHA256?

    init(_ algorithm: TLSHashAlgorithm) {
        if algorithm == .sha384 {
            var second = SHA256()
            second.update([0x38])
            extra = second
        }
    }

    mutating func update(_ bytes: [UInt8]) {
        main.update(bytes)
        extra?.update(bytes)
    }

    func current() -> [UInt8] {
        let copy = main
        let digest = copy.finalize()
        guard let extra else { return digest }
        return digest + extra.finalize().prefix(16)
    }
}

final class StandInExchange: TLSKeyExchange {
    let group: UInt16
    let publicShare: [UInt8]
    let serverShareLength: Int
    let secretLength: Int

    init(group: UInt16, publicShare: [UInt8], serverShare: Int, secret: Int) {
        self.group = group
        self.publicShare = publicShare
        serverShareLength = serverShare
        secretLength = secret
    }

    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard serverShare.count == serverShareLength else { throw .malformed("share of \(serverShare.count) bytes") }
        let digest = SHA256.hash(serverShare)
        return Array((digest + digest).prefix(secretLength))
    }
}
