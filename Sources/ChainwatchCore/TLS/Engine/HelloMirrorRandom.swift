/// The mirror's random draws, all from `TLSCrypto.randomBytes`: uniform integers, GREASE values and extension
/// permutations.
struct HelloMirrorRandom {
    let crypto: any TLSCrypto

    /// The 16 GREASE values of RFC 8701, 0x0A0A through 0xFAFA.
    static let greaseValues: [UInt16] = (0..<16).map { UInt16($0) << 12 | 0x0A00 | UInt16($0) << 4 | 0x0A }

    /// A uniform integer in 0..<bound (bound > 0; the bias of a 32-bit draw reduced mod 16 or 20 is below 2^-27).
    func below(_ bound: Int) -> Int {
        let bytes = crypto.randomBytes(4)
        let value = bytes.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return Int(value % UInt32(bound))
    }

    /// `count` fresh random bytes.
    func bytes(_ count: Int) -> [UInt8] { count == 0 ? [] : crypto.randomBytes(count) }

    /// `count` GREASE values drawn uniformly, distinct from each other while there are values left (16), else
    /// independent.
    func distinctGREASE(_ count: Int) -> [UInt16] {
        var free = Self.greaseValues
        var drawn: [UInt16] = []
        for _ in 0..<count {
            if free.isEmpty { free = Self.greaseValues }
            drawn.append(free.remove(at: below(free.count)))
        }
        return drawn
    }

    /// A fresh random order of `elements` (Fisher-Yates); for two or more elements, redrawn (a few times) when it
    /// equals the given order, so the probe does not repeat the client's permutation.
    func permuted<T: Equatable>(_ elements: [T]) -> [T] {
        var result = elements
        for _ in 0..<8 {
            result = elements
            var index = result.count - 1
            while index > 0 {
                result.swapAt(index, below(index + 1))
                index -= 1
            }
            if result != elements { break }
        }
        return result
    }
}
