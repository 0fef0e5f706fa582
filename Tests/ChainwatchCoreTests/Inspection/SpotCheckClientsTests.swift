import ChainwatchCore
import Testing

/// Whom a spot check is drawn for, as an event table: tunnels of clients recorded in, draws out. Clients are strings
/// here (the proxy's: an address, an IPv6 one by its /64), values the tunnel each left.
@Suite struct SpotCheckClientsTests {
    /// The forger's own client follows every tunnel of its victim with several of its own, so it is always the last
    /// user; a check must still be drawn for the victim as often as for it.
    @Test func eachClientIsAsLikelyWhateverItsNumberOfTunnels() {
        var clients = SpotCheckClients<String, String>(windowMilliseconds: 30_000)
        var now: Int64 = 0
        for round in 0..<20 {
            clients.record("victim", "victim tunnel \(round)", now: now)
            for own in 0..<5 { clients.record("forger", "forger tunnel \(round).\(own)", now: now + 10 + Int64(own)) }
            now += 1_000
        }
        #expect(clients.latest == "forger tunnel 19.4")
        // Every draw the two can give, once each: one for each client.
        var counts: [Int] = []
        let drawn = (0..<2).map { index in clients.pick(now: now) { counts.append($0); return index } }
        #expect(counts == [2, 2])
        #expect(Set(drawn) == ["victim tunnel 19", "forger tunnel 19.4"], "each client's latest tunnel, one draw each")
    }

    @Test func aClientThatHasNotUsedTheProbeWithinTheWindowIsNotDrawn() {
        var clients = SpotCheckClients<String, Int>(windowMilliseconds: 30_000)
        clients.record("a", 1, now: 0)
        clients.record("b", 2, now: 20_000)
        var counts: [Int] = []
        let inWindow = clients.pick(now: 30_000) { counts.append($0); return 0 }
        let later = clients.pick(now: 30_001) { counts.append($0); return 0 }
        #expect(inWindow == 1 && later == 2)
        #expect(counts == [2, 1], "a, 30 s old, is still in the window at 30 000 and out of it after")
        // No client within the window: the latest, rather than no check.
        counts = []
        let stale = clients.pick(now: 100_000) { counts.append($0); return 0 }
        #expect(stale == 2 && counts.isEmpty, "no draw among none")
    }

    @Test func aClientsLatestTunnelReplacesItsEarlierOne() {
        var clients = SpotCheckClients<String, Int>()
        clients.record("a", 1, now: 0)
        clients.record("a", 2, now: 10)
        #expect(clients.count == 1)
        var counts: [Int] = []
        let drawn = clients.pick(now: 20) { counts.append($0); return 0 }
        #expect(drawn == 2 && counts == [1])
    }

    /// Bounded: a new client pushes out the one that used the probe longest ago, not the latest.
    @Test func atCapacityTheLeastRecentClientGoes() {
        var clients = SpotCheckClients<String, String>(capacity: 3)
        clients.record("a", "a", now: 0)
        clients.record("b", "b", now: 1)
        clients.record("c", "c", now: 2)
        clients.record("a", "a again", now: 3)
        clients.record("d", "d", now: 4)
        #expect(clients.count == 3)
        let all = Set((0..<3).compactMap { index in clients.pick(now: 5) { _ in index } })
        #expect(all == ["a again", "c", "d"])
    }

    @Test func nothingRecordedDrawsNothing() {
        let clients = SpotCheckClients<String, Int>()
        #expect(clients.pick(now: 0) { _ in 0 } == nil)
        #expect(clients.latest == nil)
    }
}
