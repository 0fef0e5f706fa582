import Testing
@testable import ChainwatchCore

@Test func firstOfARunPassesAndTheRestAreCountedIntoTheNext() {
    var t = RepeatThrottle(windowMilliseconds: 1000)
    #expect(t.admit("a", now: 0) == (true, 0))
    #expect(t.admit("a", now: 10) == (false, 0))
    #expect(t.admit("a", now: 999) == (false, 0))
    #expect(t.admit("b", now: 500) == (true, 0))   // keys are apart
    #expect(t.admit("a", now: 1000) == (true, 2))  // the window passed: two were held back
    #expect(t.admit("a", now: 1001) == (false, 0))
}

@Test func keysAreBounded() {
    var t = RepeatThrottle(windowMilliseconds: 1000, maxKeys: 3)
    for i in 0..<3 { #expect(t.admit("k\(i)", now: 0).admitted) }
    #expect(t.admit("k3", now: 1).admitted)        // full: stale entries go, then all if none is stale
    #expect(t.admit("k0", now: 2).admitted)        // forgotten, so let through again
}
