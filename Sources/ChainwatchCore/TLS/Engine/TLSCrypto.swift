/// The cryptography chainwatch's own TLS client needs, as Core sees it: the engine (key schedule, record layer,
/// handshake) is pure code in Core, and these primitives come from a maintained library behind this protocol
/// (`ChainwatchCrypto`: swift-crypto for key exchange and hashes; OpenSSL for AEAD and signature verification;
/// Debian's brotli, zlib and zstd for certificate decompression). Tests may pass their own, deterministic one.
public protocol TLSCrypto: Sendable {
    /// `count` bytes from a cryptographically secure generator.
    func randomBytes(_ count: Int) -> [UInt8]

    /// A running hash for a handshake transcript.
    func transcriptHash(_ algorithm: TLSHashAlgorithm) -> any TLSTranscriptHash

    /// HMAC of `data` under `key` with the hash `algorithm` (RFC 2104).
    func hmac(_ algorithm: TLSHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8]

    /// A fresh ephemeral key for `group` (RFC 8446 §4.2.7 code points: x25519 0x001D, secp256r1 0x0017, secp384r1
    /// 0x0018, X25519MLKEM768 0x11EC, ...). For X25519MLKEM768, `x25519` gives the X25519 half to use (so that the
    /// hybrid's X25519 half equals a separate x25519 share, as Chrome sends it); nil draws a new one.
    /// Throws `.unsupported` for a group this provider cannot perform.
    func keyExchange(group: UInt16, x25519: (any TLSKeyExchange)?) throws(TLSCryptoError) -> any TLSKeyExchange

    /// AEAD seal for a TLS 1.3 suite (0x1301 AES-128-GCM, 0x1302 AES-256-GCM, 0x1303 ChaCha20-Poly1305; 0x1304 and
    /// 0x1305 may throw `.unsupported`): ciphertext followed by the tag.
    func seal(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8]

    /// AEAD open; `.authenticationFailure` when the tag does not verify.
    func open(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8]

    /// Whether `signature` by the public key of the certificate `certificateDER` over `content` verifies with the
    /// TLS SignatureScheme `scheme` (RFC 8446 §4.2.3: rsa_pss_rsae_*, rsa_pss_pss_*, ecdsa_secp*_sha*, ed25519,
    /// ed448, rsa_pkcs1_* for TLS 1.2). False for a scheme the key cannot make, or a certificate that cannot be read.
    func verify(scheme: UInt16, certificateDER: [UInt8], content: [UInt8], signature: [UInt8]) -> Bool

    /// RFC 8879 decompression: `algorithm` 1 zlib, 2 brotli, 3 zstd. The result must be exactly
    /// `uncompressedLength` bytes; a stream that would produce more is refused without producing it
    /// (`.malformed`), so a decompression bomb costs at most `uncompressedLength` bytes.
    func decompress(algorithm: UInt16, _ data: [UInt8], uncompressedLength: Int) throws(TLSCryptoError) -> [UInt8]
}

/// The hash of a TLS 1.3 cipher suite (and of HKDF over it).
public enum TLSHashAlgorithm: Sendable, Hashable {
    case sha256, sha384

    public var length: Int { self == .sha256 ? 32 : 48 }

    /// The hash of a TLS 1.3 suite: SHA-384 for TLS_AES_256_GCM_SHA384 (0x1302), SHA-256 otherwise.
    public init(suite: UInt16) { self = suite == 0x1302 ? .sha384 : .sha256 }
}

/// A running hash: `update` with bytes, `current()` the digest so far (the hash stays usable).
public protocol TLSTranscriptHash {
    mutating func update(_ bytes: [UInt8])
    func current() -> [UInt8]
}

/// One ephemeral key exchange: the public share for the key_share extension, then the shared secret with the
/// server's share.
public protocol TLSKeyExchange: AnyObject, Sendable {
    var group: UInt16 { get }
    /// The key_exchange bytes of the client's KeyShareEntry (X25519MLKEM768: the ML-KEM-768 encapsulation key then
    /// the X25519 public key, 1216 bytes).
    var publicShare: [UInt8] { get }
    /// The shared secret from the server's KeyShareEntry (X25519MLKEM768: the ML-KEM shared secret then the X25519
    /// one, 64 bytes). Throws `.malformed` for a share of the wrong length or an invalid point.
    func sharedSecret(serverShare: [UInt8]) throws(TLSCryptoError) -> [UInt8]
}

public enum TLSCryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A group, suite, scheme or algorithm this provider cannot perform.
    case unsupported(String)
    /// An AEAD tag that does not verify.
    case authenticationFailure
    /// Input the primitive refuses (a point not on the curve, a share of the wrong length, a corrupt stream).
    case malformed(String)

    public var description: String {
        switch self {
        case .unsupported(let what): "unsupported: \(what)"
        case .authenticationFailure: "authentication failure"
        case .malformed(let what): "malformed: \(what)"
        }
    }
}
