/// Which tunnels get a spare connection at their CONNECT (`InspectionMachine.wantsSpareConnection` says which rules
/// and addresses may): one loop's record of the spares it has open and of the ones that went unused. Pure; the
/// executor tells it what happened and asks before it opens one.
///
/// A client's first contact with an address is what the spare is for: its probe, for its offer. Its later tunnels
/// there find their offer's result cached (no probe), or speak no TLS 1.3 at all, and a spare would only double
/// their connections, a burst of tunnels or a service that does not speak TLS 1.3 above all. So a client's stack gets
/// one spare to an address, then none for `cooldownMilliseconds` (the probe cache's lifetime), used or not:
/// - at most one is open at a time per upstream address, client and stack on a loop (a burst of tunnels: the first
///   one's probe is the one the others wait for);
/// - one is handed out at most once per cooldown per upstream address, client and stack.
/// Everything is keyed by the client: what one client does (a hello it never finishes, no TLS, a probe another
/// client's stack made) must not take the spare, and with it the random order, from another client's first
/// contact. The stack is what the executor can tell before the hello, the `CONNECT`'s User-Agent (a hash; 0 for
/// none, as SOCKS and transparent clients send): a second browser on the same machine, whose hello has another shape,
/// gets a spare of its own. A client that makes up a new User-Agent for every `CONNECT` gets `maxStacks` spares per
/// address and cooldown, no more.
public struct SpareLedger: Sendable {
    /// An upstream address (4 or 16 bytes) and port.
    public struct Upstream: Hashable, Sendable {
        public var address: [UInt8]
        public var port: UInt16
        public init(address: [UInt8], port: UInt16) { self.address = address; self.port = port }
    }

    private struct Pair: Hashable {
        var upstream: Upstream
        var client: [UInt8]
    }

    private struct Spare: Hashable {
        var pair: Pair
        var stack: UInt64
    }

    public let cooldownMilliseconds: Int64
    public let maxEntries: Int
    /// Stacks of one client that may have a spare to one address, open or cooling, at once.
    public let maxStacks: Int
    private var open: Set<Spare> = []
    private var openByPair: [Pair: Int] = [:]
    /// Per client and address, each stack's end of cooldown.
    private var cooling: [Pair: [UInt64: Int64]] = [:]
    private var coolingCount = 0

    public init(cooldownMilliseconds: Int64 = 300_000, maxEntries: Int = 16_384, maxStacks: Int = 4) {
        self.cooldownMilliseconds = cooldownMilliseconds
        self.maxEntries = maxEntries
        self.maxStacks = max(1, maxStacks)
    }

    /// Whether `client`'s tunnel to `upstream` may have a spare now (`stack`: its `stack(userAgent:)`).
    public func mayOpen(_ upstream: Upstream, client: [UInt8], stack: UInt64 = 0, now: Int64) -> Bool {
        let pair = Pair(upstream: upstream, client: client)
        guard !open.contains(Spare(pair: pair, stack: stack)) else { return false }
        let stacks = cooling[pair] ?? [:]
        if let until = stacks[stack], now < until { return false }
        let live = stacks.values.reduce(0) { $0 + ($1 > now ? 1 : 0) } + openByPair[pair, default: 0]
        return live < maxStacks
    }

    /// A spare to `upstream` was opened for `client`'s tunnel.
    public mutating func opened(_ upstream: Upstream, client: [UInt8], stack: UInt64 = 0) {
        let pair = Pair(upstream: upstream, client: client)
        if open.insert(Spare(pair: pair, stack: stack)).inserted { openByPair[pair, default: 0] += 1 }
    }

    /// The spare to `upstream` was handed to a probe, or closed unused: either way, `client`'s stack gets no other
    /// spare there for the cooldown.
    public mutating func ended(_ upstream: Upstream, client: [UInt8], stack: UInt64 = 0, now: Int64) {
        let pair = Pair(upstream: upstream, client: client)
        if open.remove(Spare(pair: pair, stack: stack)) != nil {
            let left = openByPair[pair, default: 1] - 1
            openByPair[pair] = left > 0 ? left : nil
        }
        if cooling[pair]?[stack] == nil, coolingCount >= maxEntries {
            cooling = cooling.compactMapValues { stacks in
                let live = stacks.filter { $0.value > now }
                return live.isEmpty ? nil : live
            }
            coolingCount = cooling.values.reduce(0) { $0 + $1.count }
            if coolingCount >= maxEntries { cooling.removeAll(); coolingCount = 0 }   // forgetting costs a spare each, no more
        }
        if cooling[pair, default: [:]].updateValue(now + cooldownMilliseconds, forKey: stack) == nil { coolingCount += 1 }
    }

    /// A `CONNECT`'s User-Agent as a stack key: FNV-1a over its bytes; 0 for none.
    public static func stack(userAgent: String?) -> UInt64 {
        guard let userAgent, !userAgent.isEmpty else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in userAgent.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return hash == 0 ? 1 : hash
    }

    /// Spares open, and client stacks cooling, for tests and `/state`.
    public var counts: (open: Int, cooling: Int) { (open.count, coolingCount) }
}
