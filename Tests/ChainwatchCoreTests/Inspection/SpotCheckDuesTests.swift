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

    /// A check given back keeps whom it was drawn for and its times: the tunnel that gave it back (another client's,
    /// which took it after the 10 s) does not make it its own, and the wait does not start over. Twice given back,
    /// it is dropped: a client that keeps opening tunnels it ends before their hello cannot hold a check forever.
    @Test func aCheckGivenBackKeepsItsOwnerAndTimesAndIsDroppedAfterTwo() throws {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 60_000, ownStackMilliseconds: 10_000)
        dues.mark("a", stack: 1, now: 0)
        let early = dues.takeDue("a", stack: 2, now: 5_000)
        #expect(early == nil, "stack 1's for 10 s")
        let takenValue = dues.takeDue("a", stack: 2, now: 10_000)
        let taken = try #require(takenValue)
        #expect(taken.stack == 1 && taken.marked == 0 && taken.expires == 60_000 && taken.givenBack == 0)
        let gaveBack = dues.giveBack(taken, at: "a", now: 10_001)
        #expect(gaveBack)
        let againValue = dues.takeDue("a", stack: 3, now: 10_002)
        let again = try #require(againValue, "still 10 s old: any tunnel takes it")
        #expect(again.stack == 1 && again.marked == 0 && again.givenBack == 1)
        let gaveBackAgain = dues.giveBack(again, at: "a", now: 10_003)
        #expect(gaveBackAgain)
        let thirdValue = dues.takeDue("a", stack: 1, now: 10_004)
        let third = try #require(thirdValue, "its own stack's, first")
        #expect(third.givenBack == 2)
        let gaveBackThird = dues.giveBack(third, at: "a", now: 10_005)
        #expect(!gaveBackThird, "given back twice: dropped")
        #expect(dues.count == 0)
    }

    @Test func aCheckGivenBackDoesNotRenewOneWaitingForTheSameStack() throws {
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 60_000, ownStackMilliseconds: 10_000)
        dues.mark("a", stack: 1, now: 0)
        let takenValue = dues.takeDue("a", stack: 1, now: 1_000)
        let taken = try #require(takenValue)
        dues.mark("a", stack: 1, now: 2_000)   // a newer check for the same stack
        let gaveBack = dues.giveBack(taken, at: "a", now: 3_000)
        #expect(gaveBack)
        let waitingValue = dues.takeDue("a", stack: 1, now: 3_001)
        let waiting = try #require(waitingValue)
        #expect(waiting.marked == 2_000, "one check per stack and place: the newer one")
        let none = dues.takeDue("a", stack: 1, now: 3_002)
        #expect(none == nil)
        let expired = dues.giveBack(Due(stack: 1, marked: 0, expires: 2_000), at: "a", now: 3_003)
        #expect(!expired, "expired")
    }

    typealias Due = SpotCheckDues<String, Int>.Due

    /// A full place makes room with a check of the owner (the proxy's: a client) that has the most there: a client
    /// with many User-Agents or shapes of its own crowds out its own checks, not another client's one.
    @Test func aFullPlaceMakesRoomFromTheOwnerWithTheMost() {
        // Stacks 10...19 are owner 1's (a forger's), 20 owner 2's (the victim's).
        var dues = SpotCheckDues<String, Int>(lifetimeMilliseconds: 60_000, ownStackMilliseconds: 60_000, maxStacks: 4,
                                              owner: { $0 / 10 })
        dues.mark("a", stack: 20, now: 0)   // the victim's, oldest of all
        for stack in 10...19 { dues.mark("a", stack: stack, now: Int64(stack)) }
        let victim = dues.take("a", stack: 20, now: 100)
        #expect(victim, "the forger's ten marks pushed out only its own")
        let forgers = (10...19).filter { dues.take("a", stack: $0, now: 100) }
        #expect(forgers == [17, 18, 19], "the newest three of the forger's")
    }
}

