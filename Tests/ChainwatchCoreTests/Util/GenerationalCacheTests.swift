import ChainwatchCore
import Testing

@Suite struct GenerationalCacheTests {
    @Test func holdsAtMostItsCapacityAndForgetsTheOldest() {
        var cache = GenerationalCache<Int, String>(capacity: 4)
        for key in 0..<10 { cache.insert("v\(key)", for: key) }
        #expect(cache.count <= 4)
        #expect(cache.value(for: 9) == "v9")
        #expect(cache.value(for: 0) == nil)
    }

    @Test func anEntryUsedOncePerHalfCapacityStays() {
        var cache = GenerationalCache<Int, Int>(capacity: 4)   // generations of 2
        cache.insert(0, for: 0)
        for key in 1..<50 {
            cache.insert(key, for: key)
            #expect(cache.value(for: 0) == 0, "lost after \(key) insertions")
        }
        #expect(cache.count <= 4)
    }

    @Test func insertingAHeldKeyKeepsTheFirstValue() {
        var cache = GenerationalCache<String, Int>(capacity: 8)
        cache.insert(1, for: "a")
        cache.insert(2, for: "a")
        #expect(cache.value(for: "a") == 1 && cache.count == 1 && cache.contains("a") && !cache.contains("b"))
    }

    @Test func byteKeysMatchOnTheExactBytesOnly() {
        var cache = GenerationalCache<ByteKey, Int>(capacity: 8)
        let der = (0..<1_000).map { UInt8($0 % 251) }
        cache.insert(1, for: ByteKey(der))
        #expect(cache.value(for: ByteKey(der)) == 1)
        #expect(ByteKey(der).hashValue == ByteKey(Array(der)).hashValue)
        var changed = der
        changed[999] ^= 1
        #expect(cache.value(for: ByteKey(changed)) == nil)
        #expect(cache.value(for: ByteKey(Array(der.prefix(999)))) == nil)
        #expect(cache.value(for: ByteKey(der + [0])) == nil)
        // Equal by content; a key and its extension by a zero byte are different keys.
        #expect(ByteKey([]) != ByteKey([0]) && ByteKey([1, 2]) == ByteKey([1, 2]) && ByteKey([1]) != ByteKey([1, 0]))
    }
}
