/// The clients that relied on one probe lately, each with what its latest tunnel left (a spot check's context), so
/// that a check is drawn for one of them: uniformly among the clients seen in the last `windowMilliseconds`, whatever
/// the number of tunnels each made. Pure; the caller gives the time and the draw.
///
/// Why not the last tunnel's: a check beside a tunnel waits for a tunnel of the client it was drawn for
/// (`SpotCheckDues`), so a forger with a client of its own behind the proxy, one that follows every tunnel of its
/// victim with tunnels of its own, was the last user nearly all the time, and took nearly every check beside a
/// tunnel, at moments it chose, and spared them. Drawn among clients, its client takes 1 / n of them (n the clients
/// that used the probe in the window: one more address each for the forger).
///
/// Bounded: `capacity` clients; a new one pushes out the one that used the probe longest ago.
public struct SpotCheckClients<Client: Hashable & Sendable, Value> {
    public let capacity: Int
    public let windowMilliseconds: Int64

    @usableFromInline struct Entry {
        @usableFromInline var client: Client
        @usableFromInline var value: Value
        @usableFromInline var used: Int64
    }
    /// Least recently used first.
    @usableFromInline var entries: [Entry] = []

    public init(capacity: Int = 8, windowMilliseconds: Int64 = 30_000) {
        self.capacity = max(1, capacity)
        self.windowMilliseconds = max(0, windowMilliseconds)
    }

    /// Clients held.
    public var count: Int { entries.count }

    /// `client`'s tunnel relied on the probe at `now` and left `value` (its latest replaces its earlier one).
    public mutating func record(_ client: Client, _ value: Value, now: Int64) {
        if let index = entries.firstIndex(where: { $0.client == client }) {
            entries.remove(at: index)
        } else if entries.count >= capacity {
            entries.removeFirst(entries.count - capacity + 1)
        }
        entries.append(Entry(client: client, value: value, used: now))
    }

    /// The value of a client drawn uniformly among those that used the probe in the window before `now`
    /// (`draw(n)`: a number in 0..<n); the latest client's when none did; nil when none is held.
    public func pick(now: Int64, draw: (Int) -> Int) -> Value? {
        let recent = entries.filter { now - $0.used <= windowMilliseconds }
        guard !recent.isEmpty else { return entries.last?.value }
        return recent[min(recent.count - 1, max(0, draw(recent.count)))].value
    }

    /// The latest client's value.
    public var latest: Value? { entries.last?.value }
}

extension SpotCheckClients: Sendable where Value: Sendable {}
extension SpotCheckClients.Entry: Sendable where Value: Sendable {}
