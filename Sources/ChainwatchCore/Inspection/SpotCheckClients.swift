/// The clients that relied on one probe lately, each with the stacks its tunnels came from, so that a spot check is
/// drawn for one of them: first a client, uniformly among those seen in the last `windowMilliseconds` whatever the
/// number of tunnels each made, then one of that client's stacks seen in the window, uniformly. Pure; the caller gives
/// the time and the draws.
///
/// Why not the last tunnel's: a check beside a tunnel waits for a tunnel of the client and stack it was drawn for
/// (`SpotCheckDues`), so a forger with a client of its own behind the proxy, one that follows every tunnel of its
/// victim with tunnels of its own, was the last user nearly all the time, and took nearly every check beside a
/// tunnel, at moments it chose, and spared them. Drawn among clients, its client takes 1 / n of them (n the clients
/// that used the probe in the window: one more address each for the forger); drawn among a client's stacks second, a
/// forger on the victim's own address (a NAT, an IPv6 /64) does not overwrite the victim's stack with its own, and
/// makes up User-Agents in vain: they share that one client's draw.
///
/// Bounded: at most `capacity` entries, `stacksPerClient` of one client (a client's least recent stack makes room for
/// its new one). A full table makes room with an entry that has left the window, the least recent; when every entry
/// is within it, with one drawn at random: a forger who floods the table with new addresses pushes a victim's entry
/// out only by chance, not by order, and the victim's next tunnel puts it back.
public struct SpotCheckClients<Client: Hashable & Sendable, Stack: Hashable & Sendable>: Sendable {
    public let capacity: Int
    public let stacksPerClient: Int
    public let windowMilliseconds: Int64

    @usableFromInline struct Entry: Sendable {
        @usableFromInline var client: Client
        @usableFromInline var stack: Stack
        @usableFromInline var used: Int64
    }
    /// Least recently used first.
    @usableFromInline var entries: [Entry] = []

    public init(capacity: Int = 32, stacksPerClient: Int = 4, windowMilliseconds: Int64 = 30_000) {
        self.capacity = max(1, capacity)
        self.stacksPerClient = max(1, stacksPerClient)
        self.windowMilliseconds = max(0, windowMilliseconds)
    }

    /// Entries held (client and stack pairs).
    public var count: Int { entries.count }

    /// A tunnel of `client`, of `stack`, relied on the probe at `now`. `draw(n)`: a number in 0..<n (which entry
    /// makes room in a table full of recent ones).
    public mutating func record(_ client: Client, stack: Stack, now: Int64, draw: (Int) -> Int) {
        if let index = entries.firstIndex(where: { $0.client == client && $0.stack == stack }) {
            entries.remove(at: index)
        } else if entries.count(where: { $0.client == client }) >= stacksPerClient,
                  let index = entries.firstIndex(where: { $0.client == client }) {
            entries.remove(at: index)   // this client's least recent stack
        } else if entries.count >= capacity {
            if let stale = entries.firstIndex(where: { now - $0.used > windowMilliseconds }) {
                entries.remove(at: stale)
            } else {
                entries.remove(at: min(entries.count - 1, max(0, draw(entries.count))))
            }
        }
        entries.append(Entry(client: client, stack: stack, used: now))
    }

    /// A client drawn uniformly among those that used the probe in the window before `now`, then one of its stacks in
    /// the window, uniformly (`draw(n)`: a number in 0..<n, called twice); the latest entry's when none is in the
    /// window; nil when the table is empty.
    public func pick(now: Int64, draw: (Int) -> Int) -> (client: Client, stack: Stack)? {
        let recent = entries.filter { now - $0.used <= windowMilliseconds }
        guard !recent.isEmpty else { return entries.last.map { ($0.client, $0.stack) } }
        var clients: [Client] = []
        for entry in recent where !clients.contains(entry.client) { clients.append(entry.client) }
        let client = clients[min(clients.count - 1, max(0, draw(clients.count)))]
        let stacks = recent.filter { $0.client == client }
        let entry = stacks[min(stacks.count - 1, max(0, draw(stacks.count)))]
        return (entry.client, entry.stack)
    }

    /// The latest entry's client and stack.
    public var latest: (client: Client, stack: Stack)? { entries.last.map { ($0.client, $0.stack) } }
}
