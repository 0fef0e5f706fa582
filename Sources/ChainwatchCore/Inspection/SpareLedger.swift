/// Which tunnels get a spare connection at their CONNECT (`InspectionMachine.wantsSpareConnection` says which rules
/// and addresses may): one loop's record of the spares it has open and of the ones that went unused. Pure; the
/// executor tells it what happened and asks before it opens one.
///
/// Without it, a spare would double the connections to an upstream exactly when it is busiest with new work: a burst
/// of tunnels to a cold address (each its own spare, before the first probe has made it warm), or every tunnel to a
/// service that does not speak TLS 1.3 (no probe ever takes its spare, and it never becomes warm). So:
/// - at most one spare per upstream address and client is open at a time on a loop (the first tunnel's probe is the
///   one the others wait for; theirs would be closed unused). Per client: one client that keeps a spare open (a
///   hello it never finishes) must not take the random order from other clients' first contacts there;
/// - a spare closed unused (a TLS 1.2 hello, no TLS, an offer with a cached result) keeps that client from another
///   spare to that address for `cooldownMilliseconds`. Keyed by the client too: one client that sends no TLS to an
///   address must not take the spare, and with it the random order, from every other client's first contact there.
public struct SpareLedger: Sendable {
    /// An upstream address (4 or 16 bytes) and port.
    public struct Upstream: Hashable, Sendable {
        public var address: [UInt8]
        public var port: UInt16
        public init(address: [UInt8], port: UInt16) { self.address = address; self.port = port }
    }

    private struct Cooling: Hashable {
        var upstream: Upstream
        var client: [UInt8]
    }

    public let cooldownMilliseconds: Int64
    public let maxEntries: Int
    private var open: Set<Cooling> = []
    private var cooling: [Cooling: Int64] = [:]

    public init(cooldownMilliseconds: Int64 = 300_000, maxEntries: Int = 16_384) {
        self.cooldownMilliseconds = cooldownMilliseconds
        self.maxEntries = maxEntries
    }

    /// Whether `client`'s tunnel to `upstream` may have a spare now.
    public func mayOpen(_ upstream: Upstream, client: [UInt8], now: Int64) -> Bool {
        guard !open.contains(Cooling(upstream: upstream, client: client)) else { return false }
        if let until = cooling[Cooling(upstream: upstream, client: client)], now < until { return false }
        return true
    }

    /// A spare to `upstream` was opened for `client`'s tunnel.
    public mutating func opened(_ upstream: Upstream, client: [UInt8]) {
        open.insert(Cooling(upstream: upstream, client: client))
    }

    /// The spare to `upstream` was handed to a probe (`used`), or closed unused.
    public mutating func ended(_ upstream: Upstream, used: Bool, client: [UInt8], now: Int64) {
        let key = Cooling(upstream: upstream, client: client)
        open.remove(key)
        guard !used else { return }
        if cooling[key] == nil, cooling.count >= maxEntries {
            cooling = cooling.filter { $0.value > now }
            if cooling.count >= maxEntries { cooling.removeAll() }   // forgetting costs a spare each, no more
        }
        cooling[key] = now + cooldownMilliseconds
    }

    /// Spares open, and clients cooling, for tests and `/state`.
    public var counts: (open: Int, cooling: Int) { (open.count, cooling.count) }
}
