import ChainwatchCore
import Testing

/// The spot checks waiting for a tunnel to ride beside, as an event table: marks and takes in, whether taken out.
/// Places are strings here, stacks small numbers (the proxy's: an address and name, a User-Agent's hash).
@Suite struct SpotCheckDuesTests {
    @Test func aDueCheckIsTakenByTheNextTunnelToItsPlaceOnly() {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 10_000)
        let none = dues.take("a", stack: 1, now: 0)
        dues.mark("a", stack: 1, now: 1_000)
        let other = dues.take("b", stack: 1, now: 2_000)
        let taken = dues.take("a", stack: 1, now: 2_000)
        let again = dues.take("a", stack: 1, now: 2_001)
        #expect(!none && !other && taken)
        #expect(!again, "one check, one tunnel")
        #expect(dues.count == 0)
    }

    @Test func aCheckNoTunnelTookWithinItsLifetimeIsDropped() {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 10_000, ownStackMilliseconds: 0)
        dues.mark("a", stack: 1, now: 0)
        let inTime = dues.take("a", stack: 1, now: 9_999)
        dues.mark("a", stack: 1, now: 20_000)
        let late = dues.take("a", stack: 1, now: 30_000)
        let lateForAnyone = dues.take("a", stack: 2, now: 30_000)
        #expect(inTime && !late && !lateForAnyone)
        #expect(dues.count == 0)
    }

    /// A check first waits for its own stack's tunnel (another stack's would carry it with another hello), then for
    /// any tunnel to the place.
    @Test func aCheckWaitsForItsOwnStackThenForAnyTunnel() {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 60_000, ownStackMilliseconds: 10_000)
        dues.mark("a", stack: 1, now: 0)
        let otherEarly = dues.take("a", stack: 2, now: 9_999)
        let otherLate = dues.take("a", stack: 2, now: 10_000)
        #expect(!otherEarly && otherLate)
        dues.mark("a", stack: 1, now: 20_000)
        let own = dues.take("a", stack: 1, now: 20_001)
        #expect(own && dues.count == 0)
    }

    /// Two stacks' checks at one place wait side by side; a tunnel takes its own stack's, else the oldest that waited
    /// long enough.
    @Test func eachStackTakesItsOwnCheckFirst() {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 60_000, ownStackMilliseconds: 5_000)
        dues.mark("a", stack: 1, now: 0)
        dues.mark("a", stack: 2, now: 1_000)
        let two = dues.take("a", stack: 2, now: 6_000)   // its own, not stack 1's older one
        let three = dues.take("a", stack: 3, now: 6_000)   // stack 1's, waiting 6 s
        let more = dues.take("a", stack: 3, now: 6_001)
        #expect(two && three && !more)
        #expect(dues.count == 0)
    }

    /// A client that makes up a User-Agent for every CONNECT draws checks for stacks that never come back: at most
    /// `maxStacks` wait per place, the oldest pushed out, and the other places keep theirs.
    @Test func stacksPerPlaceAreBoundedOldestOut() {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 60_000, ownStackMilliseconds: 60_000, maxStacks: 3)
        dues.mark("other", stack: 7, now: 0)
        for stack in 1...10 { dues.mark("a", stack: stack, now: Int64(stack)) }
        let outs = (1...7).map { dues.take("a", stack: $0, now: 100) }
        let ins = (8...10).map { dues.take("a", stack: $0, now: 100) }
        #expect(outs.allSatisfy { !$0 }, "pushed out")
        #expect(ins.allSatisfy { $0 }, "the newest three wait")
        let other = dues.take("other", stack: 7, now: 100)
        #expect(other)
    }

    @Test func markingAgainRenewsAndTheTableIsBounded() {
        var dues = SpotCheckDues<Int, Int>(lifetimeMilliseconds: 1_000, maxEntries: 2)
        let first = dues.mark(1, stack: 0, now: 0), second = dues.mark(2, stack: 0, now: 0)
        let full = dues.mark(3, stack: 0, now: 500)
        let renewed = dues.mark(1, stack: 0, now: 500)
        let anotherStack = dues.mark(1, stack: 9, now: 500)
        #expect(first && second)
        #expect(!full, "full of unexpired checks")
        #expect(renewed && anotherStack, "a place already due takes its stacks' checks, not a new place")
        let roomMade = dues.mark(3, stack: 0, now: 1_200)
        #expect(roomMade, "2 expired and is dropped to make room")
        #expect(dues.count == 2)
        let one = dues.take(1, stack: 0, now: 1_300), three = dues.take(3, stack: 0, now: 1_300), two = dues.take(2, stack: 0, now: 1_300)
        #expect(one && three && !two)
    }

    /// Expired checks leave the table (within a second of the next call), so an empty table means none is waiting and
    /// a `CONNECT` need not look.
    @Test func expiredChecksAreSweptSoTheCountIsOfLiveOnes() {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 10_000)
        dues.mark("a", stack: 0, now: 0)
        dues.mark("b", stack: 0, now: 5_000)
        let none = dues.take("c", stack: 0, now: 11_000)
        #expect(!none && dues.count == 1, "a expired and was swept; b lives until 15 000")
        let b = dues.take("b", stack: 0, now: 11_001)
        #expect(b && dues.count == 0)
    }
}
