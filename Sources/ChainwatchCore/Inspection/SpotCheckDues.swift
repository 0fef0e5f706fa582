/// Spot checks waiting for a tunnel to ride beside (`SpotCheckSchedule.Action.checkBeside`): per upstream address,
/// the check the schedule made due, taken by the next tunnel to that address at its CONNECT. Pure; the caller gives
/// the time.
///
/// A check beside a tunnel leaves when a client's connection does, its hello a moment before the client's: a forger
/// who decides by the time since the last hello for a name (forge a connection with no twin before it) sees the check
/// exactly as it would have seen that tunnel. A check waits as long as no tunnel comes (no client is then being
/// forged) up to `lifetimeMilliseconds`; the first tunnel after a quiet spell is the moment a patient forger picks.
///
/// Bounded: at most `maxEntries` addresses; at the bound, expired entries are dropped and a new one finds no room
/// until one is (its check is then lost; the schedule arms the next one).
public struct SpotCheckDues<Address: Hashable & Sendable>: Sendable {
    public let lifetimeMilliseconds: Int64
    public let maxEntries: Int
    @usableFromInline var due: [Address: Int64] = [:]
    /// When expired entries are next dropped (at most once a second), so `count` is of live checks, near enough: the
    /// proxy looks the table up on a `CONNECT` only while it is not empty.
    @usableFromInline var nextSweep: Int64 = 0

    public init(lifetimeMilliseconds: Int64 = 300_000, maxEntries: Int = 4_096) {
        self.lifetimeMilliseconds = max(1, lifetimeMilliseconds)
        self.maxEntries = max(1, maxEntries)
    }

    /// Addresses with a check waiting (expired ones are dropped within a second of a `mark` or `take`).
    public var count: Int { due.count }

    /// A check is due at `address`. false: no room (the table is full of unexpired checks).
    @discardableResult
    public mutating func mark(_ address: Address, now: Int64) -> Bool {
        sweep(now)
        if due[address] == nil, due.count >= maxEntries {
            due = due.filter { $0.value > now }
            guard due.count < maxEntries else { return false }
        }
        due[address] = now + lifetimeMilliseconds
        return true
    }

    /// A tunnel to `address` starts: whether it carries a check (which is then no longer due).
    public mutating func take(_ address: Address, now: Int64) -> Bool {
        sweep(now)
        guard let expires = due.removeValue(forKey: address) else { return false }
        return expires > now
    }

    private mutating func sweep(_ now: Int64) {
        guard now >= nextSweep, !due.isEmpty else { return }
        nextSweep = now + 1_000
        due = due.filter { $0.value > now }
    }
}
