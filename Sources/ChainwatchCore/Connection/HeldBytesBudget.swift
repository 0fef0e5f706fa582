import ChainwatchLock
import Synchronization

/// The bytes all tunnels together may hold while their verdicts are pending (`--held-memory`): one budget for the
/// process, shared by every event loop through atomics (no lock). A tunnel takes room as what it holds grows (its
/// machine's `.takeHeldRoom`) and gives it all back at its verdict or its close; a tunnel that finds no room is closed
/// before its held bytes pass (`.noHeldRoom`). Without it a hostile server made each tunnel it answered hold about
/// 0.7 MiB until the verdict deadline, and enough such tunnels took the process past its memory limit (issue 26).
///
/// One client address may hold at most a quarter of it (`perClient`): a client that sends its tunnels to a server of
/// its own that never finishes its handshake would otherwise fill the budget, and every other client's held tunnels
/// would fail closed until its tunnels' verdict deadlines passed.
public final class HeldBytesBudget: Sendable {
    /// Bytes all tunnels may hold at once.
    public let capacity: Int
    /// Bytes the tunnels of one client address may hold at once: a quarter of `capacity`.
    public var perClient: Int { capacity / 4 }
    private let used = Atomic<Int>(0)
    private let refusals = Atomic<Int>(0)
    private let byClient = Lock<[[UInt8]: Int]>([:])

    /// The default: 256 MiB of held bytes, about 1 000 tunnels holding the most one may (`ConnectionLimits.holdLimit`),
    /// or some 700 MiB of resident memory with the copies their inspections read (deploy/README.md).
    public static let defaultCapacity = 256 << 20

    public init(capacity: Int) { self.capacity = max(0, capacity) }

    /// Takes `bytes` of room for a tunnel of `client` (its address bytes) when that many are free in the budget and
    /// in the client's share; nil: counted against the budget only.
    public func take(_ bytes: Int, client: [UInt8]?) -> Bool {
        guard let client else { return take(bytes) }
        let share = perClient
        let granted = byClient.withLock { table -> Bool in
            guard bytes <= share - table[client, default: 0] else { return false }
            table[client, default: 0] += bytes
            return true
        }
        guard granted else { return false }
        guard take(bytes) else {
            giveBackShare(bytes, client: client)
            return false
        }
        return true
    }

    /// Gives back room taken with `take(_:client:)`.
    public func giveBack(_ bytes: Int, client: [UInt8]?) {
        giveBack(bytes)
        if let client { giveBackShare(bytes, client: client) }
    }

    private func giveBackShare(_ bytes: Int, client: [UInt8]) {
        byClient.withLock { table in
            let left = table[client, default: 0] - bytes
            table[client] = left > 0 ? left : nil
        }
    }

    /// Takes `bytes` of room when that many are free.
    public func take(_ bytes: Int) -> Bool {
        precondition(bytes >= 0, "negative room")
        var current = used.load(ordering: .relaxed)
        while true {
            guard bytes <= capacity - current else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// A tunnel was closed for want of room (counted here, not at each refused `take`: a tunnel may be refused twice
    /// before its close, or decided meanwhile and not closed for it).
    public func countTunnelClosed() { refusals.add(1, ordering: .relaxed) }

    /// Gives back room taken with `take`.
    public func giveBack(_ bytes: Int) {
        precondition(bytes >= 0, "negative room")
        used.subtract(bytes, ordering: .relaxed)
    }

    /// Bytes taken now, and the tunnels closed for want of room since start (for `/metrics`).
    public var usage: (used: Int, refused: Int) { (used.load(ordering: .relaxed), refusals.load(ordering: .relaxed)) }
}
