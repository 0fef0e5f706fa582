/// The mirror's random draws, all from `TLSCrypto.randomBytes`: uniform integers, the GREASE bijection and
/// extension permutations.
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

    /// A fresh random injective map of the distinct GREASE values in `values` onto GREASE values, with no value
    /// mapped to itself: one bijection of the 16 values restricted to those the client used, so values the client
    /// repeated stay equal, values it kept distinct stay distinct, and none repeats the client's (while at most 15
    /// distinct values are used, there is always a choice; at 16 the last may have to stay).
    func greaseMapping(for values: [UInt16]) -> [UInt16: UInt16] {
        var mapping: [UInt16: UInt16] = [:]
        var free = Self.greaseValues
        for value in values where mapping[value] == nil {
            let choices = free.filter { $0 != value }
            let pick = choices.isEmpty ? value : choices[below(choices.count)]
            mapping[value] = pick
            free.removeAll { $0 == pick }
        }
        return mapping
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
