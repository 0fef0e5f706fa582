/// One direction of TLS 1.3 record protection (RFC 8446 §5.2-5.3): seals or opens TLSCiphertext records with the
/// suite's AEAD under one traffic key and IV, counting the sequence number. Pure: the AEAD comes from a `TLSCrypto`.
/// Seals without padding; opens records with any padding.
public struct TLS13RecordProtection: Sendable {
    /// The largest TLSInnerPlaintext content (2^14, RFC 8446 §5.1).
    public static let maxPlaintext = 1 << 14
    /// The largest encrypted_record of a TLSCiphertext (2^14 + 256, RFC 8446 §5.2).
    public static let maxCiphertext = (1 << 14) + 256
    /// The AEAD tag length of every TLS 1.3 suite.
    static let tagLength = 16

    private let crypto: any TLSCrypto
    private let suite: UInt16
    private let key: [UInt8]
    private let iv: [UInt8]
    private var sequence: UInt64 = 0

    /// Protection for suite `suite` with the traffic `key` and 12-byte `iv` (from `TLS13KeySchedule.trafficKeys`).
    public init(crypto: any TLSCrypto, suite: UInt16, key: [UInt8], iv: [UInt8]) {
        self.crypto = crypto
        self.suite = suite
        self.key = key
        self.iv = iv
    }

    /// One protected record, its 5-byte header (23, 0x0303, length) included: TLSInnerPlaintext is `content` then
    /// `contentType`, no padding; the AAD is the header; the nonce the IV XOR the sequence number; then the sequence
    /// number counts one. `.malformed` for content over 2^14 bytes or an exhausted sequence number.
    public mutating func seal(contentType: UInt8, _ content: [UInt8]) throws(TLSCryptoError) -> [UInt8] {
        guard content.count <= Self.maxPlaintext else { throw .malformed("record content of \(content.count) bytes") }
        let length = content.count + 1 + Self.tagLength
        let header: [UInt8] = [23, 0x03, 0x03, UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        let sealed = try crypto.seal(suite: suite, key: key, nonce: try nextNonce(), additionalData: header,
                                     plaintext: content + [contentType])
        sequence += 1
        return header + sealed
    }

    /// Opens one record: `header` is its 5 bytes (the AAD), `payload` the rest. Strips the zero padding and returns
    /// the real content type and the content. `.malformed` for a header that is not 5 bytes or does not give the
    /// payload's length, a payload over 2^14 + 256 bytes, content over 2^14 bytes, or an all-zero plaintext (no
    /// content type); `.authenticationFailure` from the AEAD. The sequence number counts only records that open.
    public mutating func open(header: [UInt8], payload: [UInt8]) throws(TLSCryptoError) -> (contentType: UInt8, content: [UInt8]) {
        guard header.count == 5 else { throw .malformed("record header of \(header.count) bytes") }
        guard Int(header[3]) << 8 | Int(header[4]) == payload.count else {
            throw .malformed("record header length differs from the payload's \(payload.count) bytes")
        }
        guard payload.count <= Self.maxCiphertext else { throw .malformed("record payload of \(payload.count) bytes") }
        var plaintext = try crypto.open(suite: suite, key: key, nonce: try nextNonce(), additionalData: header,
                                        ciphertext: payload)
        sequence += 1
        guard let typeIndex = plaintext.lastIndex(where: { $0 != 0 }) else {
            throw .malformed("record plaintext without a content type")
        }
        let contentType = plaintext[typeIndex]
        plaintext.removeSubrange(typeIndex...)
        guard plaintext.count <= Self.maxPlaintext else { throw .malformed("record content of \(plaintext.count) bytes") }
        return (contentType, plaintext)
    }

    /// The per-record nonce (RFC 8446 §5.3): the IV XOR the sequence number, big-endian, left-padded to its length.
    private func nextNonce() throws(TLSCryptoError) -> [UInt8] {
        guard sequence < UInt64.max else { throw .malformed("record sequence number exhausted") }
        var nonce = iv
        for byteIndex in 0..<min(8, nonce.count) {
            nonce[nonce.count - 1 - byteIndex] ^= UInt8(truncatingIfNeeded: sequence >> (8 * UInt64(byteIndex)))
        }
        return nonce
    }
}
