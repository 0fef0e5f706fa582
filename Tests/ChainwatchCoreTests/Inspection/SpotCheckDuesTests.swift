import ChainwatchCore
import Testing

/// The spot checks waiting for a tunnel to ride beside, as an event table: marks and takes in, whether taken out.
@Suite struct SpotCheckDuesTests {
    @Test func aDueCheckIsTakenByTheNextTunnelToItsAddressOnly() {
        var dues = SpotCheckDues<String>(lifetimeMilliseconds: 10_000)
        let none = dues.take("a", now: 0)
        dues.mark("a", now: 1_000)
        let other = dues.take("b", now: 2_000)
        let taken = dues.take("a", now: 2_000)
        let again = dues.take("a", now: 2_001)
        #expect(!none && !other && taken)
        #expect(!again, "one check, one tunnel")
        #expect(dues.count == 0)
    }

    @Test func aCheckNoTunnelTookWithinItsLifetimeIsDropped() {
        var dues = SpotCheckDues<String>(lifetimeMilliseconds: 10_000)
        dues.mark("a", now: 0)
        let inTime = dues.take("a", now: 9_999)
        dues.mark("a", now: 20_000)
        let late = dues.take("a", now: 30_000)
        #expect(inTime && !late)
        #expect(dues.count == 0)
    }

    @Test func markingAgainRenewsAndTheTableIsBounded() {
        var dues = SpotCheckDues<Int>(lifetimeMilliseconds: 1_000, maxEntries: 2)
        let first = dues.mark(1, now: 0), second = dues.mark(2, now: 0)
        let full = dues.mark(3, now: 500)
        let renewed = dues.mark(1, now: 500)
        #expect(first && second)
        #expect(!full, "full of unexpired checks")
        #expect(renewed, "an address already due is renewed, not added")
        let roomMade = dues.mark(3, now: 1_200)
        #expect(roomMade, "2 expired and is dropped to make room")
        #expect(dues.count == 2)
        let one = dues.take(1, now: 1_300), three = dues.take(3, now: 1_300), two = dues.take(2, now: 1_300)
        #expect(one && three && !two)
    }

    /// Expired checks leave the table (within a second of the next call), so an empty table means none is waiting and
    /// a `CONNECT` need not look.
    @Test func expiredChecksAreSweptSoTheCountIsOfLiveOnes() {
        var dues = SpotCheckDues<String>(lifetimeMilliseconds: 10_000)
        dues.mark("a", now: 0)
        dues.mark("b", now: 5_000)
        let none = dues.take("c", now: 11_000)
        #expect(!none && dues.count == 1, "a expired and was swept; b lives until 15 000")
        let b = dues.take("b", now: 11_001)
        #expect(b && dues.count == 0)
    }
}
