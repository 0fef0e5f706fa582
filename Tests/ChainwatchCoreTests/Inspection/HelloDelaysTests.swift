import ChainwatchCore
import Testing

/// `HelloDelays`: the latest tunnels' delays before their hellos (the first after their upstream connection, the
/// second after a HelloRetryRequest), one tunnel's pair drawn for each spot check made alone.
@Suite struct HelloDelaysTests {
    typealias Sample = HelloDelays.Sample

    @Test func noneHeldDrawsNothing() {
        let delays = HelloDelays()
        #expect(delays.count == 0)
        #expect(delays.draw { _ in Issue.record("nothing to pick from"); return 0 } == nil)
    }

    @Test func aTunnelsTwoDelaysAreDrawnTogether() {
        var delays = HelloDelays(capacity: 4)
        // A fast client and a slow one of one hello shape: a check is one or the other, never fast then slow.
        delays.record(Sample(hello: 1_500, retry: 600))
        delays.record(Sample(hello: 41_000, retry: 40_500))
        delays.record(Sample(hello: 9_000))   // no retry: its second hello would have come a round trip later too
        var asked: [Int] = []
        let drawn = (0..<3).map { index in delays.draw { n in asked.append(n); return index } }
        #expect(drawn.map(\.?.hello) == [1_500, 41_000, 9_000])
        #expect(drawn.map(\.?.retry) == [600, 40_500, 9_000])
        #expect(asked == [3, 3, 3])
        // A pick out of range is held to the range (never a trap on the loop).
        #expect(delays.draw { _ in 7 }?.hello == 9_000)
        #expect(delays.draw { _ in -1 }?.hello == 1_500)
    }

    @Test func theOldestGoesOnceFullAndValuesAreBounded() {
        var delays = HelloDelays(capacity: 3)
        for value: Int64 in [10, 20, 30, 40] { delays.record(Sample(hello: value)) }
        delays.record(Sample(hello: -5, retry: -1))
        delays.record(Sample(hello: 5_000_000_000, retry: 7))
        #expect(delays.count == 3)
        let held = (0..<3).compactMap { index in delays.draw { _ in index } }
        // 10, 20 and 30 went (oldest first); below zero counts as zero, above the bound as the bound.
        #expect(held.map(\.hello) == [40, 0, HelloDelays.maxMicroseconds])
        #expect(held.map(\.retry) == [40, 0, 7])
    }
}
