import ChainwatchCore
import Testing

/// `HelloDelays`: the latest tunnels' delays between their upstream connection and their client's hello, one drawn
/// for each spot check made alone.
@Suite struct HelloDelaysTests {
    @Test func noneHeldDrawsZero() {
        let delays = HelloDelays()
        #expect(delays.count == 0)
        #expect(delays.draw { _ in Issue.record("nothing to pick from"); return 0 } == 0)
    }

    @Test func eachHeldDelayIsDrawnByItsIndex() {
        var delays = HelloDelays(capacity: 4)
        for value: Int64 in [1_500, 62_000, 9_000] { delays.record(value) }
        #expect(delays.count == 3)
        var asked: [Int] = []
        let drawn = (0..<3).map { index in delays.draw { n in asked.append(n); return index } }
        #expect(drawn == [1_500, 62_000, 9_000])
        #expect(asked == [3, 3, 3])
        // A pick out of range is held to the range (never a trap on the loop).
        #expect(delays.draw { _ in 7 } == 9_000)
        #expect(delays.draw { _ in -1 } == 1_500)
    }

    @Test func theOldestGoesOnceFullAndValuesAreBounded() {
        var delays = HelloDelays(capacity: 3)
        for value: Int64 in [10, 20, 30, 40, -5, 5_000_000_000] { delays.record(value) }
        #expect(delays.count == 3)
        let held = Set((0..<3).map { index in delays.draw { _ in index } })
        // 10, 20 and 30 went (oldest first); below zero counts as zero, above the bound as the bound.
        #expect(held == [40, 0, HelloDelays.maxMicroseconds])
    }
}
