import ChainwatchEventLoop
import ChainwatchOpenSSL
import Testing

/// `PreciseTimer`: a spot check's hello waits a delay drawn from tunnels' own (often under a millisecond on a
/// network near by), which libevent's millisecond timers round up or fire at once. These run a real loop.
@Suite struct PreciseTimerTests {
    @Test func firesOnceAfterItsDelayNotOnTheNextWholeMillisecond() throws {
        let loop = try EventLoop()
        var fired: [UInt64] = []
        let start = MonotonicClock.nanoseconds()
        let timer = try #require(PreciseTimer(loop: loop) { fired.append(MonotonicClock.nanoseconds()) })
        let stop = Timer(loop: loop) { loop.stop() }
        timer.schedule(microseconds: 700)
        stop.schedule(milliseconds: 30)
        loop.run()
        #expect(fired.count == 1)
        let elapsed = Int64((fired.first ?? start) &- start) / 1000
        // At least the delay; well under the 1 ms a millisecond timer would round 700 µs up to, unless this machine
        // is loaded (a bound that only a stalled scheduler misses).
        #expect(elapsed >= 700 && elapsed < 10_000, "fired after \(elapsed) µs")
    }

    @Test func aCancelledTimerDoesNotFireAndARescheduledOneFiresAtItsNewTime() throws {
        let loop = try EventLoop()
        var cancelledFired = false
        var rescheduled: [UInt64] = []
        let start = MonotonicClock.nanoseconds()
        let cancelled = try #require(PreciseTimer(loop: loop) { cancelledFired = true })
        let moved = try #require(PreciseTimer(loop: loop) { rescheduled.append(MonotonicClock.nanoseconds()) })
        let stop = Timer(loop: loop) { loop.stop() }
        cancelled.schedule(microseconds: 500)
        cancelled.cancel()
        moved.schedule(microseconds: 500)
        moved.schedule(microseconds: 5_000)   // replaces the first time
        stop.schedule(milliseconds: 30)
        loop.run()
        #expect(!cancelledFired)
        #expect(rescheduled.count == 1)
        #expect(Int64((rescheduled.first ?? start) &- start) / 1000 >= 5_000)
    }
}
