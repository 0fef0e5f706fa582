/// The deterministic byte stream every bench transfer carries, and its verifier.
///
/// The stream is a 64 KiB pseudo-random block repeated, with the first 8 bytes of each block
/// replaced by the block's index (XOR the block's own first bytes). A receiver that knows only the
/// offset can therefore check every byte: a flipped, dropped, duplicated or reordered byte (or whole
/// block) is caught at its exact offset, which is stronger than comparing a checksum at the end.
/// Immutable after first use; shared by all threads.
enum Pattern {
    static let blockSize = 65_536
    static let stampSize = 8

    /// The base block, filled once by xorshift64* from a fixed seed. Never freed.
    nonisolated(unsafe) static let base: UnsafeMutablePointer<UInt8> = {
        let block = UnsafeMutablePointer<UInt8>.allocate(capacity: blockSize)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for i in stride(from: 0, to: blockSize, by: 8) {
            state ^= state >> 12; state ^= state << 25; state ^= state >> 27
            var word = (state &* 0x2545_F491_4F6C_DD1D).littleEndian
            withUnsafeBytes(of: &word) { raw in
                for j in 0..<8 { block[i + j] = raw[j] }
            }
        }
        return block
    }()

    /// The byte at stream offset `offset`.
    @inline(__always)
    static func byte(at offset: Int) -> UInt8 {
        let index = offset & (blockSize - 1)
        if index < stampSize {
            let block = UInt64(offset / blockSize)
            return UInt8(truncatingIfNeeded: block >> (8 * UInt64(index))) ^ base[index]
        }
        return base[index]
    }

    /// Writes the 8-byte stamp of block `block` into `into`.
    static func stamp(block: Int, into: UnsafeMutablePointer<UInt8>) {
        for i in 0..<stampSize { into[i] = byte(at: block * blockSize + i) }
    }

    /// Fills `count` bytes of the stream starting at `offset` into `into`.
    static func fill(_ into: UnsafeMutablePointer<UInt8>, offset: Int, count: Int) {
        var done = 0
        while done < count {
            let position = offset + done
            let index = position & (blockSize - 1)
            let run = min(blockSize - index, count - done)
            var k = 0
            while index + k < stampSize && k < run { into[done + k] = byte(at: position + k); k += 1 }
            if k < run { (into + done + k).update(from: base + index + k, count: run - k) }
            done += run
        }
    }

    /// Returns the stream offset of the first byte of `bytes` that differs from the stream at
    /// `offset`, or nil when all `count` bytes are right.
    static func firstMismatch(_ bytes: UnsafePointer<UInt8>, offset: Int, count: Int) -> Int? {
        var done = 0
        while done < count {
            let position = offset + done
            let index = position & (blockSize - 1)
            let run = min(blockSize - index, count - done)
            var k = 0
            while index + k < stampSize && k < run {
                if bytes[done + k] != byte(at: position + k) { return position + k }
                k += 1
            }
            if k < run, memcmp(bytes + done + k, base + index + k, run - k) != 0 {
                for j in k..<run where bytes[done + j] != base[index + j] { return position + j }
            }
            done += run
        }
        return nil
    }
}

#if canImport(Glibc)
import Glibc
#endif
