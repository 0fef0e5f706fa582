import Foundation
import Testing
@testable import ChainwatchCore

@Test func rfc3339FormatsKnownInstants() {
    #expect(UnixTime(seconds: 0).rfc3339 == "1970-01-01T00:00:00Z")
    #expect(UnixTime(seconds: 951_782_400).rfc3339 == "2000-02-29T00:00:00Z")
    #expect(UnixTime(seconds: 1_795_323_599).rfc3339 == "2026-11-22T04:59:59Z")
}

/// The digit-writing path (years 0 to 9999) against Foundation's formatter, over instants from 1600 to 9999 (ICU's
/// calendar is Julian before 1582), and the interpolating path for years past 9999.
@Test func rfc3339AgreesWithFoundation() {
    let formatter = ISO8601DateFormatter()
    formatter.timeZone = TimeZone(identifier: "UTC")
    var generator = TLSObserverFuzzTests.SplitMix64(state: 0x5EED)
    let low: Int64 = -11_676_096_000, high: Int64 = 253_402_300_799   // 1600-01-01 and 9999-12-31T23:59:59
    for seconds in [low, high, -1, 0, 86_399, 86_400] + (0..<5_000).map({ _ in low + Int64(generator.next() % UInt64(high - low)) }) {
        #expect(UnixTime(seconds: seconds).rfc3339 == formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds))), "\(seconds)")
    }
    #expect(UnixTime(seconds: 253_402_300_800).rfc3339 == "10000-01-01T00:00:00Z")
}

@Test func alertTimestampsKeepMillisecondsBeforeAndAfterTheEpoch() {
    #expect(AlertRecord.timestamp(0) == "1970-01-01T00:00:00.000Z")
    #expect(AlertRecord.timestamp(1_795_323_599_007) == "2026-11-22T04:59:59.007Z")
    #expect(AlertRecord.timestamp(-1) == "1969-12-31T23:59:59.999Z")
    #expect(AlertRecord.timestamp(1_795_323_599_950) == "2026-11-22T04:59:59.950Z")
}
