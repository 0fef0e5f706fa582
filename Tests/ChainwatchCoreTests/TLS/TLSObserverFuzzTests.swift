import Testing
@testable import ChainwatchCore

/// A small deterministic fuzz pass: real fixtures with random bytes changed, fed whole and in random chunks.
/// A crash fails the run; every outcome must also be the same however the bytes were chunked.
/// A case that ever fails here becomes a named case in `MalformedTLSTests`.
@Suite struct TLSObserverFuzzTests {
    /// SplitMix64: a tiny PRNG with a fixed seed, so every run mutates the same way.
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let iterations = 4_000

    @Test func mutatedFixturesNeverCrashAndDoNotDependOnChunking() throws {
        let streams = try TLSFixture.streams.map(TLSFixture.bytes)
        var random = SplitMix64(state: 0xC4A1_7A7C)
        for iteration in 0..<Self.iterations {
            var bytes = streams[Int.random(in: 0..<streams.count, using: &random)]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let offset = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes[offset] = UInt8.random(in: 0...255, using: &random)
                case 1: bytes[offset] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                case 2: bytes[offset] = Bool.random(using: &random) ? 0x00 : 0xFF
                default: bytes.removeSubrange(offset..<min(bytes.count, offset + Int.random(in: 1...8, using: &random)))
                }
                if bytes.isEmpty { break }
            }
            let whole = observe(bytes)
            let chunked = observe(bytes, chunkSize: Int.random(in: 1...64, using: &random))
            #expect(whole == chunked, "iteration \(iteration)")
        }
    }
}
