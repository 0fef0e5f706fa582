public import ChainwatchCore
import ChainwatchOpenSSL
import Crypto
import Foundation

/// Core's `TLSCrypto` from maintained libraries: swift-crypto for hashes, HMAC, AEAD (`AEAD`) and key exchange
/// (`makeKeyExchange`, X25519MLKEM768 included), OpenSSL's libcrypto for signature verification (`SignatureVerifier`),
/// Debian's zlib, brotli and zstd for RFC 8879 certificate decompression (`CertificateDecompressor`). Stateless.
public struct SwiftCryptoTLS: TLSCrypto {
    public init() {}

    /// `SystemRandomNumberGenerator`: getrandom(2) on Linux, a CSPRNG.
    public func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    public func transcriptHash(_ algorithm: TLSHashAlgorithm) -> any TLSTranscriptHash {
        switch algorithm {
        case .sha256: SwiftCryptoTranscriptHash(Crypto.SHA256())
        case .sha384: SwiftCryptoTranscriptHash(Crypto.SHA384())
        }
    }

    public func hmac(_ algorithm: TLSHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        let key = SymmetricKey(data: key)
        return switch algorithm {
        case .sha256: Array(HMAC<Crypto.SHA256>.authenticationCode(for: data, using: key))
        case .sha384: Array(HMAC<Crypto.SHA384>.authenticationCode(for: data, using: key))
        }
    }

    public func keyExchange(group: UInt16, x25519: (any TLSKeyExchange)?) throws(TLSCryptoError) -> any TLSKeyExchange {
        try makeKeyExchange(group: group, x25519: x25519)
    }

    public func seal(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        try AEAD(suite: suite, key: key).seal(nonce: nonce, additionalData: additionalData, plaintext: plaintext)
    }

    public func open(suite: UInt16, key: [UInt8], nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        try AEAD(suite: suite, key: key).open(nonce: nonce, additionalData: additionalData, ciphertext: ciphertext)
    }

    /// ecdsa_secp256r1_sha256, the scheme of most servers' CertificateVerify, with BoringSSL's P-256 on the key read
    /// from the certificate's DER (`CertificateKeyInfo`: no OpenSSL decoding, which the path validator does once
    /// anyway); every other scheme with OpenSSL (`SignatureVerifier`). What BoringSSL cannot read (a key or signature
    /// encoding it refuses: explicit curve parameters, say) goes to OpenSSL too, so an unusual but genuine server
    /// is never refused for the reader; a signature BoringSSL read and found wrong is wrong.
    public func verify(scheme: UInt16, certificateDER: [UInt8], content: [UInt8], signature: [UInt8]) -> Bool {
        if scheme == 0x0403, let info = CertificateKeyInfo.subjectPublicKeyInfo(certificateDER),
           let key = try? P256.Signing.PublicKey(derRepresentation: info),
           let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: signature) {
            return key.isValidSignature(ecdsa, for: SHA256.hash(data: content))
        }
        return SignatureVerifier.verify(scheme: scheme, certificateDER: certificateDER, content: content, signature: signature)
    }

    public func decompress(algorithm: UInt16, _ data: [UInt8], uncompressedLength: Int) throws(TLSCryptoError) -> [UInt8] {
        try CertificateDecompressor.decompress(algorithm: algorithm, data, uncompressedLength: uncompressedLength)
    }
}

/// A running swift-crypto hash; `current()` finalizes a copy, so the hash stays usable.
struct SwiftCryptoTranscriptHash<Hash: HashFunction>: TLSTranscriptHash {
    private var hasher: Hash

    init(_ hasher: Hash) { self.hasher = hasher }

    mutating func update(_ bytes: [UInt8]) { hasher.update(data: bytes) }

    func current() -> [UInt8] { Array(hasher.finalize()) }
}
