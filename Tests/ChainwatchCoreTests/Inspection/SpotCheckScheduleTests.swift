@testable import ChainwatchCore
import Testing

/// The spot-check schedule as an event table: uses and timer firings in, arm/check actions out.
@Suite struct SpotCheckScheduleTests {
    typealias Schedule = SpotCheckSchedule<String>

    func schedule(rate: Double = 0.25, inUse: Int64 = 30_000, maxKeys: Int = 4) -> Schedule {
        Schedule(settings: .init(ratePerSecond: rate, inUseMilliseconds: inUse, maxKeys: maxKeys))
    }

    @Test func theFirstUseArmsOneCheckAndLaterUsesDoNotArmAnother() {
        var s = schedule()
        #expect(s.used("a", now: 0, delay: 4_000) == [.arm("a", afterMilliseconds: 4_000)])
        #expect(s.used("a", now: 1_000, delay: 9) == [])
        #expect(s.used("a", now: 2_000, delay: 9) == [])
    }

    @Test func aFiringAfterAUseChecksAndArmsTheNext() {
        var s = schedule()
        _ = s.used("a", now: 0, delay: 4_000)
        _ = s.used("a", now: 3_000, delay: 1)
        #expect(s.fired("a", now: 4_000, delay: 7_000) == [.check("a"), .arm("a", afterMilliseconds: 7_000)])
        _ = s.used("a", now: 9_000, delay: 1)
        #expect(s.fired("a", now: 11_000, delay: 2_000) == [.check("a"), .arm("a", afterMilliseconds: 2_000)])
    }

    @Test func aCheckDrawnBesideWaitsForATunnelAndStillArmsTheNext() {
        var s = schedule()
        _ = s.used("a", now: 0, delay: 4_000)
        #expect(s.fired("a", now: 4_000, delay: 7_000, beside: true) == [.checkBeside("a"), .arm("a", afterMilliseconds: 7_000)])
        #expect(s.fired("a", now: 11_000, delay: 1, beside: true) == [], "no use since: no check of either kind")
    }

    @Test func atMostOneCheckPerUse() {
        var s = schedule()
        _ = s.used("a", now: 0, delay: 1_000)
        #expect(s.fired("a", now: 1_000, delay: 1_000) == [.check("a"), .arm("a", afterMilliseconds: 1_000)])
        #expect(s.fired("a", now: 2_000, delay: 1_000) == [])   // no tunnel since: disarmed, no check
        #expect(s.used("a", now: 5_000, delay: 800) == [.arm("a", afterMilliseconds: 800)])   // the next use arms again
        #expect(s.fired("a", now: 5_800, delay: 9) == [.check("a"), .arm("a", afterMilliseconds: 9)])
    }

    @Test func aKeyOutOfUseIsForgottenAndItsNextUseArmsAgain() {
        var s = schedule(inUse: 30_000)
        _ = s.used("a", now: 0, delay: 40_000)
        #expect(s.fired("a", now: 40_000, delay: 5) == [])   // no tunnel in the last 30 s: no check
        #expect(s.count == 0)
        #expect(s.used("a", now: 41_000, delay: 3_000) == [.arm("a", afterMilliseconds: 3_000)])
    }

    @Test func aFiringForAKeyNotTrackedDoesNothing() {
        var s = schedule()
        #expect(s.fired("ghost", now: 1, delay: 1) == [])
    }

    @Test func rateZeroTurnsThemOff() {
        var s = schedule(rate: 0)
        #expect(s.used("a", now: 0, delay: 1) == [])
        #expect(s.count == 0)
    }

    @Test func atTheBoundKeysOutOfUseMakeRoomAndOthersWait() {
        var s = schedule(inUse: 10_000, maxKeys: 2)
        _ = s.used("a", now: 0, delay: 1)
        _ = s.used("b", now: 5_000, delay: 1)
        #expect(s.used("c", now: 6_000, delay: 3) == [])   // a and b are in use: no room
        #expect(s.used("c", now: 12_000, delay: 3) == [.arm("c", afterMilliseconds: 3)])   // a fell out of use
        #expect(s.count == 2)
        #expect(s.fired("a", now: 12_001, delay: 1) == [])   // its timer finds it gone
    }

    @Test func aZeroDelayStillWaitsAMillisecond() {
        var s = schedule()
        #expect(s.used("a", now: 0, delay: 0) == [.arm("a", afterMilliseconds: 1)])
    }
}
