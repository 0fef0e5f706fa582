/// Which tunnels get a spare connection at their CONNECT (`InspectionMachine.wantsSpareConnection` says which rules
/// and addresses may): one loop's record of the spares it has open and of the ones that went unused. Pure; the
/// executor tells it what happened and asks before it opens one.
///
/// A client's first contact with an address is what the spare is for: its probe, for its offer. Its later tunnels
/// there find their offer's result cached (no probe), or speak no TLS 1.3 at all, and a spare would only double
/// their connections, a burst of tunnels or a service that does not speak TLS 1.3 above all. So a client gets one
/// spare to an address, then none for `cooldownMilliseconds` (the probe cache's lifetime), used or not:
/// - at most one is open at a time per upstream address and client on a loop (a burst of tunnels: the first one's
///   probe is the one the others wait for);
/// - one is handed out at most once per cooldown per upstream address and client.
/// Everything is keyed by the client: what one client does (a hello it never finishes, no TLS, a probe another
/// client's stack made) must not take the spare, and with it the random order, from another client's first
/// contact. A client whose stack changes within the cooldown (another browser at the same address) gets none.
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

    /// The spare to `upstream` was handed to a probe, or closed unused: either way, `client` gets no other spare there
    /// for the cooldown.
    public mutating func ended(_ upstream: Upstream, client: [UInt8], now: Int64) {
        let key = Cooling(upstream: upstream, client: client)
        open.remove(key)
        if cooling[key] == nil, cooling.count >= maxEntries {
            cooling = cooling.filter { $0.value > now }
            if cooling.count >= maxEntries { cooling.removeAll() }   // forgetting costs a spare each, no more
        }
        cooling[key] = now + cooldownMilliseconds
    }

    /// Spares open, and clients cooling, for tests and `/state`.
    public var counts: (open: Int, cooling: Int) { (open.count, cooling.count) }
}
