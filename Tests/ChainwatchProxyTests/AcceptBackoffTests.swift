import ChainwatchEventLoop
import Testing

/// Out of descriptors, an accept loop pauses and logs once per burst (issue 26, item 10: the admin listener logged a
/// warning per attempt, 2.9 million lines in 10 s, and spun).
@Suite struct AcceptBackoffTests {
    @Test func oneLinePerBurstAndLongerPausesWhileItLasts() {
        var b = AcceptBackoff()
        let first = b.failed("Too many open files")
        #expect(first.pauseMilliseconds == 100)
        #expect(first.log?.hasPrefix("cannot accept: Too many open files;") == true)
        var lines = 0
        var pauses: [Int] = []
        for _ in 0..<10_000 {
            let (pause, log) = b.failed("Too many open files")
            if log != nil { lines += 1 }
            pauses.append(pause)
        }
        #expect(lines == 0)
        #expect(Array(pauses.prefix(6)) == [200, 400, 800, 1_600, 1_600, 1_600])
        #expect(pauses.allSatisfy { $0 >= 100 }, "never retried at once")
        #expect(b.accepted() == "accepting again, after 10001 failed attempt(s)", "the burst's end is said when it ends")
        #expect(b.accepted() == nil)
        let next = b.failed("Too many open files")
        #expect(next.pauseMilliseconds == 100)
        #expect(next.log?.hasPrefix("cannot accept: Too many open files;") == true)
    }

    @Test func acceptingWithoutFailuresSaysNothing() {
        var b = AcceptBackoff()
        #expect(b.accepted() == nil)
        #expect(b.failuresInBurst == 0)
    }
}
