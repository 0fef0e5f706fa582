import Testing
@testable import ChainwatchCore

@Test func rfc3339FormatsKnownInstants() {
    #expect(UnixTime(seconds: 0).rfc3339 == "1970-01-01T00:00:00Z")
    #expect(UnixTime(seconds: 951_782_400).rfc3339 == "2000-02-29T00:00:00Z")
    #expect(UnixTime(seconds: 1_795_323_599).rfc3339 == "2026-11-22T04:59:59Z")
}
