public import ChainwatchCore
import ChainwatchOpenSSL
import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Core's `TLSCrypto` from maintained libraries: swift-crypto for hashes, HMAC and key exchange (`makeKeyExchange`,
/// X25519MLKEM768 included), OpenSSL's libcrypto for AEAD (`AEAD`, through `AEADCipher`) and signature verification
/// (`SignatureVerifier`), Debian's zlib, brotli and zstd for RFC 8879 certificate decompression
/// (`CertificateDecompressor`). Stateless.
public struct SwiftCryptoTLS: TLSCrypto {
    public init() {}

    /// The kernel's CSPRNG: getentropy(3), one getrandom(2) call per 256 bytes. (`SystemRandomNumberGenerator`, which
    /// this replaced, made one system call per byte drawn through `UInt8.random`: a Chrome hello's mirror drew a few
    /// hundred.) Should the call fail, which glibc documents only for a kernel without getrandom, the bytes come from
    /// `SystemRandomNumberGenerator`, eight per call.
    public func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let filled = bytes.withUnsafeMutableBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let chunk = min(256, raw.count - offset)
                guard getentropy(raw.baseAddress! + offset, chunk) == 0 else { return false }
                offset += chunk
            }
            return true
        }
        if !filled {
            var generator = SystemRandomNumberGenerator()
            for start in stride(from: 0, to: count, by: 8) {
                withUnsafeBytes(of: generator.next() as UInt64) { word in
                    for i in 0..<min(8, count - start) { bytes[start + i] = word[i] }
                }
            }
        }
        return bytes
    }

    public func transcriptHash(_ algorithm: TLSHashAlgorithm) -> any TLSTranscriptHash {
        switch algorithm {
        case .sha256: SwiftCryptoTranscriptHash(Crypto.SHA256())
        case .sha384: SwiftCryptoTranscriptHash(Crypto.SHA384())
        }
    }

    /// RFC 2104 over swift-crypto's SHA-256 and SHA-384, written out: H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ data)). swift-crypto's
    /// `HMAC`, which this replaced, gave the same bytes at about three times the instructions (its generic code runs
    /// unspecialized from here), and a TLS 1.3 first contact computes a few dozen HMACs.
    public func hmac(_ algorithm: TLSHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        switch algorithm {
        case .sha256: Self.hmac(Crypto.SHA256.self, key: key, data: data)
        case .sha384: Self.hmac(Crypto.SHA384.self, key: key, data: data)
        }
    }

    private static func hmac<Hash: HashFunction>(_: Hash.Type, key: [UInt8], data: [UInt8]) -> [UInt8] {
        let blockSize = Hash.blockByteCount
        var pad = key.count > blockSize ? digestBytes(Hash.hash(data: key)) : key
        pad.append(contentsOf: repeatElement(0, count: blockSize - pad.count))
        for i in pad.indices { pad[i] ^= 0x36 }
        var inner = Hash()
        pad.withUnsafeBytes { inner.update(bufferPointer: $0) }
        data.withUnsafeBytes { inner.update(bufferPointer: $0) }
        let innerDigest = digestBytes(inner.finalize())
        for i in pad.indices { pad[i] ^= 0x36 ^ 0x5C }
        var outer = Hash()
        pad.withUnsafeBytes { outer.update(bufferPointer: $0) }
        innerDigest.withUnsafeBytes { outer.update(bufferPointer: $0) }
        return digestBytes(outer.finalize())
    }

    private static func digestBytes<D: Crypto.Digest>(_ digest: D) -> [UInt8] {
        digest.withUnsafeBytes { Array($0) }
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

    func current() -> [UInt8] { hasher.finalize().withUnsafeBytes { Array($0) } }
}
