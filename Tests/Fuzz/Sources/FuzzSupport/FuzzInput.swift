/// One fuzzer input: decisions read from its front (option bits, split seeds), the bytes under test after them.
/// Reading past the end gives zeros, so every input is usable.
public struct FuzzInput {
    /// The bytes not read yet.
    public private(set) var rest: ArraySlice<UInt8>

    /// Copies the `count` bytes libFuzzer passes at `start` (borrowed for the call only).
    public init(_ start: UnsafePointer<UInt8>?, _ count: Int) {
        rest = count == 0 ? [] : Array(UnsafeBufferPointer(start: start, count: count))[...]
    }

    public init(_ bytes: [UInt8]) { rest = bytes[...] }

    /// The next byte, or 0 past the end.
    public mutating func byte() -> UInt8 {
        rest.popFirst() ?? 0
    }

    /// The next two bytes, big-endian.
    public mutating func uint16() -> UInt16 {
        UInt16(byte()) << 8 | UInt16(byte())
    }

    /// Up to `count` next bytes.
    public mutating func take(_ count: Int) -> ArraySlice<UInt8> {
        let taken = rest.prefix(count)
        rest = rest.dropFirst(taken.count)
        return taken
    }
}

/// Split points chosen by the input: chunk lengths in 1...maxChunk from a 16-bit seed (xorshift), so a mutation of
/// the two header bytes moves every boundary and `maxChunk` 1 feeds a byte at a time.
public struct ChunkSizes {
    private var state: UInt32
    private let maxChunk: Int

    /// `header` is the input byte that picks the largest chunk: 0 → 1 byte, 255 → 256 bytes.
    public init(header: UInt8, seed: UInt16) {
        maxChunk = Int(header) + 1
        state = UInt32(seed) << 8 | 0x5A   // never zero
    }

    public mutating func next() -> Int {
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return Int(state % UInt32(maxChunk)) + 1
    }

    /// `bytes` cut into consecutive chunks (none empty; no chunk at all for empty bytes).
    public mutating func split(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var chunks: [ArraySlice<UInt8>] = []
        var rest = bytes
        while !rest.isEmpty {
            let chunk = rest.prefix(next())
            chunks.append(chunk)
            rest = rest.dropFirst(chunk.count)
        }
        return chunks
    }
}

/// Stops the run when an invariant fails: a trap, which libFuzzer reports as a crash and saves the input for.
public func check(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    if !condition { fatalError("invariant: \(message())", file: file, line: line) }
}
