/// SHA-256 (FIPS 180-4) in pure Swift, for the fingerprints Core computes itself (JA4). Not constant-time and not
/// fast: hash public data only; certificate digests come from OpenSSL in `ChainwatchOpenSSL`.
public struct SHA256: Sendable {
    /// The digest length in bytes.
    public static let digestLength = 32
    private static let blockLength = 64

    private static let roundConstants: [UInt32] = [
        0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
        0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
        0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
        0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
        0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
        0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
        0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
        0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
    ]

    private var state: [UInt32] = [
        0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
    ]
    /// Bytes not yet hashed: always less than one block.
    private var pending: [UInt8] = []
    private var totalLength: UInt64 = 0

    public init() {}

    /// The digest of `bytes`.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    public mutating func update(_ bytes: some Collection<UInt8>) {
        totalLength &+= UInt64(bytes.count)
        pending.append(contentsOf: bytes)
        var start = 0
        while pending.count - start >= Self.blockLength {
            compress(pending[start..<(start + Self.blockLength)])
            start += Self.blockLength
        }
        pending.removeFirst(start)
    }

    /// The digest of everything given to `update`.
    public consuming func finalize() -> [UInt8] {
        let bitLength = totalLength &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % Self.blockLength != Self.blockLength - 8 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        for start in stride(from: 0, to: tail.count, by: Self.blockLength) {
            compress(tail[start..<(start + Self.blockLength)])
        }
        var digest = [UInt8](repeating: 0, count: Self.digestLength)
        for (i, word) in state.enumerated() {
            for j in 0..<4 { digest[4 * i + j] = UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32(j))) }
        }
        return digest
    }

    private mutating func compress(_ block: ArraySlice<UInt8>) {
        // The message schedule on the stack and the block read through a pointer: a heap array per block was most of
        // a JA4's cost (two hashes per alert line).
        block.withUnsafeBufferPointer { bytes in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                for t in 0..<16 {
                    let i = 4 * t
                    w[t] = UInt32(bytes[i]) << 24 | UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
                }
                for t in 16..<64 {
                    let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
                    let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
                    w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                }
                var a = state[0], b = state[1], c = state[2], d = state[3]
                var e = state[4], f = state[5], g = state[6], h = state[7]
                Self.roundConstants.withUnsafeBufferPointer { k in
                    for t in 0..<64 {
                        let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ s1 &+ choice &+ k[t] &+ w[t]
                        let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = s0 &+ majority
                        h = g; g = f; f = e; e = d &+ t1
                        d = c; c = b; b = a; a = t1 &+ t2
                    }
                }
                state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
                state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
            }
        }
    }

    private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { x >> n | x << (32 - n) }
}
