/// Spot checks waiting for a tunnel to ride beside (`SpotCheckSchedule.Action.checkBeside`): per place (an upstream
/// address and the name its tunnels `CONNECT`ed to) and client stack (the proxy's hash of a `CONNECT`'s User-Agent),
/// the check the schedule made due, taken by the next tunnel to that place. Pure; the caller gives the time.
///
/// A check beside a tunnel leaves when a client's connection does, its hello a moment before the client's: a forger
/// who decides by the time since the last hello for a name (forge a connection with no twin before it) sees the check
/// exactly as it would have seen that tunnel. A check waits as long as no tunnel comes (no client is then being
/// forged) up to `lifetimeMilliseconds`; the first tunnel after a quiet spell is the moment a patient forger picks.
///
/// Checks are drawn per hello shape, and a tunnel carries a check with its own hello: so a check first waits
/// `ownStackMilliseconds` for a tunnel of the stack that drew it (a forger of one browser's connections beside another
/// client's busy traffic meets that browser's checks), then any tunnel to the place takes it (a stack that does not
/// come back, or one of several apps with one TLS stack and their own User-Agents, leaves no check waiting in vain).
///
/// Bounded: at most `maxStacks` checks per place (a new one pushes out the oldest: a client that makes up a User-Agent
/// for every `CONNECT` crowds out only the checks of its own places), and at most `maxEntries` places; at that bound
/// places whose checks all expired are dropped, and a new place finds no room until one is (its check is then lost;
/// the schedule arms the next one).
public struct SpotCheckDues<Place: Hashable & Sendable, Stack: Hashable & Sendable>: Sendable {
    public let lifetimeMilliseconds: Int64
    public let ownStackMilliseconds: Int64
    public let maxEntries: Int
    public let maxStacks: Int

    @usableFromInline struct Due: Sendable {
        @usableFromInline var stack: Stack
        @usableFromInline var marked: Int64
        @usableFromInline var expires: Int64
    }
    /// Each place's checks, oldest first.
    @usableFromInline var due: [Place: [Due]] = [:]
    /// When expired checks are next dropped (at most once a second), so `count` is of places with live checks, near
    /// enough: the proxy looks the table up on a `CONNECT` only while it is not empty.
    @usableFromInline var nextSweep: Int64 = 0

    public init(lifetimeMilliseconds: Int64 = 300_000, ownStackMilliseconds: Int64 = 10_000, maxEntries: Int = 4_096,
                maxStacks: Int = 4) {
        self.lifetimeMilliseconds = max(1, lifetimeMilliseconds)
        self.ownStackMilliseconds = max(0, ownStackMilliseconds)
        self.maxEntries = max(1, maxEntries)
        self.maxStacks = max(1, maxStacks)
    }

    /// Places with a check waiting (expired ones are dropped within a second of a `mark` or `take`).
    public var count: Int { due.count }

    /// A check is due at `place`, drawn by `stack`'s tunnels (one already waiting for that stack is renewed). false: no
    /// room (the table is full of places with unexpired checks).
    @discardableResult
    public mutating func mark(_ place: Place, stack: Stack, now: Int64) -> Bool {
        sweep(now)
        let fresh = Due(stack: stack, marked: now, expires: now + lifetimeMilliseconds)
        if var checks = due[place] {
            checks.removeAll { $0.stack == stack || $0.expires <= now }
            if checks.count >= maxStacks { checks.removeFirst(checks.count - maxStacks + 1) }
            checks.append(fresh)
            due[place] = checks
            return true
        }
        if due.count >= maxEntries {
            due = due.filter { $0.value.contains { $0.expires > now } }
            guard due.count < maxEntries else { return false }
        }
        due[place] = [fresh]
        return true
    }

    /// A tunnel of `stack` to `place` starts: whether it carries a check (which is then no longer due): one drawn by
    /// its stack, or else the oldest that has waited `ownStackMilliseconds` for its own.
    public mutating func take(_ place: Place, stack: Stack, now: Int64) -> Bool {
        sweep(now)
        guard var checks = due[place] else { return false }
        checks.removeAll { $0.expires <= now }
        let index = checks.firstIndex { $0.stack == stack } ?? checks.firstIndex { now - $0.marked >= ownStackMilliseconds }
        if let index { checks.remove(at: index) }
        due[place] = checks.isEmpty ? nil : checks
        return index != nil
    }

    private mutating func sweep(_ now: Int64) {
        guard now >= nextSweep, !due.isEmpty else { return }
        nextSweep = now + 1_000
        due = due.filter { $0.value.contains { $0.expires > now } }
    }
}
