import ChainwatchCore
import Testing

/// Whom a spot check is drawn for, as an event table: tunnels of clients recorded in, draws out. Clients are strings
/// here (the proxy's: an address, an IPv6 one by its /64), stacks small numbers (a User-Agent's hash).
@Suite struct SpotCheckClientsTests {
    typealias Clients = SpotCheckClients<String, Int>

    /// Every draw the table can give from `now`: each first draw, then each second.
    static func everyDraw(_ clients: Clients, now: Int64) -> [String: Set<Int>] {
        var drawn: [String: Set<Int>] = [:]
        var firsts = 0
        var calls = 0
        _ = clients.pick(now: now) { n in calls += 1; if calls == 1 { firsts = n }; return 0 }
        for first in 0..<firsts {
            var seconds = 0
            var call = 0
            _ = clients.pick(now: now) { n in call += 1; if call == 2 { seconds = n }; return call == 1 ? first : 0 }
            for second in 0..<max(1, seconds) {
                call = 0
                if let (client, stack) = clients.pick(now: now, draw: { _ in call += 1; return call == 1 ? first : second }) {
                    drawn[client, default: []].insert(stack)
                }
            }
        }
        return drawn
    }

    /// The forger's own client follows every tunnel of its victim with several of its own, so it is always the last
    /// user; a check must still be drawn for the victim as often as for it.
    @Test func eachClientIsAsLikelyWhateverItsNumberOfTunnels() {
        var clients = Clients()
        var now: Int64 = 0
        for _ in 0..<20 {
            clients.record("victim", stack: 1, now: now) { _ in 0 }
            for own in 0..<5 { clients.record("forger", stack: 2, now: now + 10 + Int64(own)) { _ in 0 } }
            now += 1_000
        }
        #expect(clients.latest! == ("forger", 2))
        var firsts: [Int] = []
        _ = clients.pick(now: now) { firsts.append($0); return 0 }
        #expect(firsts.first == 2, "two clients to draw from")
        #expect(Self.everyDraw(clients, now: now) == ["victim": [1], "forger": [2]])
    }

    /// A forger on the victim's own address (a NAT, an IPv6 /64) with User-Agents of its own does not overwrite the
    /// victim's stack, and its many stacks share that one client's draw.
    @Test func aClientsStacksAreDrawnWithinItsShare() {
        var clients = Clients()
        clients.record("lan", stack: 1, now: 0) { _ in 0 }   // the victim's browser
        for stack in 2...4 { clients.record("lan", stack: stack, now: 10) { _ in 0 } }   // made-up User-Agents
        clients.record("other", stack: 9, now: 20) { _ in 0 }
        var counts: [Int] = []
        _ = clients.pick(now: 30) { counts.append($0); return 0 }
        #expect(counts == [2, 4], "two clients; the first has four stacks")
        #expect(Self.everyDraw(clients, now: 30) == ["lan": [1, 2, 3, 4], "other": [9]])
        // A fifth stack of that client pushes out its own least recent, the victim's only when it is that.
        clients.record("lan", stack: 5, now: 40) { _ in 0 }
        clients.record("lan", stack: 1, now: 50) { _ in 0 }
        clients.record("lan", stack: 6, now: 60) { _ in 0 }
        #expect(Self.everyDraw(clients, now: 60)["lan"] == [1, 4, 5, 6])
    }

    @Test func aClientThatHasNotUsedTheProbeWithinTheWindowIsNotDrawn() {
        var clients = Clients(windowMilliseconds: 30_000)
        clients.record("a", stack: 1, now: 0) { _ in 0 }
        clients.record("b", stack: 2, now: 20_000) { _ in 0 }
        #expect(Self.everyDraw(clients, now: 30_000) == ["a": [1], "b": [2]])
        #expect(Self.everyDraw(clients, now: 30_001) == ["b": [2]])
        // No client within the window: the latest, rather than no check.
        var draws = 0
        let stale = clients.pick(now: 100_000) { _ in draws += 1; return 0 }
        #expect(stale! == ("b", 2) && draws == 0)
    }

    /// Bounded. A full table makes room with an entry that has left the window; when all are within it, with one
    /// drawn at random, not the least recent: a forger flooding new addresses right after each victim tunnel does not
    /// push the victim out by order.
    @Test func aFullTableMakesRoomWithAStaleEntryElseARandomOne() {
        var clients = Clients(capacity: 3, windowMilliseconds: 1_000)
        clients.record("victim", stack: 1, now: 0) { _ in 0 }
        clients.record("x", stack: 1, now: 10) { _ in 0 }
        clients.record("y", stack: 1, now: 20) { _ in 0 }
        var asked: [Int] = []
        clients.record("z", stack: 1, now: 30) { asked.append($0); return 2 }   // all recent: the draw picks "y"
        #expect(asked == [3] && clients.count == 3)
        #expect(Set(Self.everyDraw(clients, now: 40).keys) == ["victim", "x", "z"])
        asked = []
        clients.record("w", stack: 1, now: 1_005) { asked.append($0); return 0 }   // "victim" (0) has left the window
        #expect(asked.isEmpty, "no draw: a stale entry makes room")
        #expect(Set(Self.everyDraw(clients, now: 1_008).keys) == ["x", "z", "w"])
    }

    @Test func nothingRecordedDrawsNothing() {
        let clients = Clients()
        #expect(clients.pick(now: 0) { _ in 0 } == nil)
        #expect(clients.latest == nil)
    }
}
