/// Spot checks waiting for a tunnel to ride beside (`SpotCheckSchedule.Action.checkBeside`): per place (an upstream
/// address and the name its tunnels `CONNECT`ed to) and "stack" (whom the check was drawn for: for the proxy a client
/// and its `CONNECT`'s User-Agent, `SpotChecker.Party`), the check the schedule made due, taken by the next tunnel to
/// that place. Pure; the caller gives the time.
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
/// Bounded: at most `maxStacks` checks per place, and at most `maxEntries` places; at that bound places whose checks
/// all expired are dropped, and a new place finds no room until one is (its check is then lost; the schedule arms the
/// next one). A full place makes room with the oldest check of the owner (`owner`: the client, for the proxy's
/// parties) that has the most there: a client that makes up a User-Agent for every `CONNECT`, or shapes of its own,
/// crowds out its own checks before another client's one.
///
/// A check a tunnel took and gives back (`giveBack`: it could not carry it) keeps whom it was drawn for and its times:
/// it waits for that client again, not for the one whose tunnel gave it back, and the wait does not start over; after
/// `maxGiveBacks` it is dropped (a tunnel that closes before its hello, again and again, cannot hold a check forever).
public struct SpotCheckDues<Place: Hashable & Sendable, Stack: Hashable & Sendable>: Sendable {
    public let lifetimeMilliseconds: Int64
    public let ownStackMilliseconds: Int64
    public let maxEntries: Int
    public let maxStacks: Int
    public let maxGiveBacks: Int
    /// Whose check it is, for making room at a full place (the proxy's: the client of a party); by default each stack
    /// is its own owner.
    public let owner: @Sendable (Stack) -> Int

    /// One check waiting: drawn for `stack`, made due at `marked`, dropped at `expires`, given back `givenBack` times.
    public struct Due: Sendable, Equatable {
        public var stack: Stack
        public var marked: Int64
        public var expires: Int64
        public var givenBack: Int

        public init(stack: Stack, marked: Int64, expires: Int64, givenBack: Int = 0) {
            self.stack = stack; self.marked = marked; self.expires = expires; self.givenBack = givenBack
        }
    }
    /// Each place's checks, oldest first.
    @usableFromInline var due: [Place: [Due]] = [:]
    /// When expired checks are next dropped (at most once a second), so `count` is of places with live checks, near
    /// enough: the proxy looks the table up on a `CONNECT` only while it is not empty.
    @usableFromInline var nextSweep: Int64 = 0

    public init(lifetimeMilliseconds: Int64 = 300_000, ownStackMilliseconds: Int64 = 10_000, maxEntries: Int = 4_096,
                maxStacks: Int = 8, maxGiveBacks: Int = 2, owner: @escaping @Sendable (Stack) -> Int = { $0.hashValue }) {
        self.lifetimeMilliseconds = max(1, lifetimeMilliseconds)
        self.ownStackMilliseconds = max(0, ownStackMilliseconds)
        self.maxEntries = max(1, maxEntries)
        self.maxStacks = max(1, maxStacks)
        self.maxGiveBacks = max(0, maxGiveBacks)
        self.owner = owner
    }

    /// Places with a check waiting (expired ones are dropped within a second of a `mark` or `take`).
    public var count: Int { due.count }

    /// A check is due at `place`, drawn by `stack`'s tunnels (one already waiting for that stack is renewed). false: no
    /// room (the table is full of places with unexpired checks).
    @discardableResult
    public mutating func mark(_ place: Place, stack: Stack, now: Int64) -> Bool {
        insert(Due(stack: stack, marked: now, expires: now + lifetimeMilliseconds, givenBack: 0), at: place, now: now, renewing: true)
    }

    /// A tunnel of `stack` to `place` starts: whether it carries a check (which is then no longer due): one drawn by
    /// its stack, or else the oldest that has waited `ownStackMilliseconds` for its own.
    public mutating func take(_ place: Place, stack: Stack, now: Int64) -> Bool {
        takeDue(place, stack: stack, now: now) != nil
    }

    /// `take`, with the check taken, for `giveBack`.
    public mutating func takeDue(_ place: Place, stack: Stack, now: Int64) -> Due? {
        sweep(now)
        guard var checks = due[place] else { return nil }
        checks.removeAll { $0.expires <= now }
        let index = checks.firstIndex { $0.stack == stack } ?? checks.firstIndex { now - $0.marked >= ownStackMilliseconds }
        let taken = index.map { checks.remove(at: $0) }
        due[place] = checks.isEmpty ? nil : checks
        return taken
    }

    /// A tunnel that took `check` at `place` could not carry it: it waits again, for whom it was drawn for, with its
    /// times (not renewing one already waiting for them). false: dropped (given back `maxGiveBacks` times already,
    /// expired, or no room).
    @discardableResult
    public mutating func giveBack(_ check: Due, at place: Place, now: Int64) -> Bool {
        guard check.givenBack < maxGiveBacks, check.expires > now else { return false }
        var again = check
        again.givenBack += 1
        return insert(again, at: place, now: now, renewing: false)
    }

    private mutating func insert(_ fresh: Due, at place: Place, now: Int64, renewing: Bool) -> Bool {
        sweep(now)
        if var checks = due[place] {
            checks.removeAll { $0.expires <= now }
            if let index = checks.firstIndex(where: { $0.stack == fresh.stack }) {
                guard renewing else { due[place] = checks; return true }   // one waits for them already
                checks.remove(at: index)
            }
            while checks.count >= maxStacks { checks.remove(at: roomMaker(checks)) }
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

    /// Which check of a full place makes room: the oldest of the owner with the most checks there.
    private func roomMaker(_ checks: [Due]) -> Int {
        var counts: [Int: Int] = [:]
        for check in checks { counts[owner(check.stack), default: 0] += 1 }
        let most = counts.values.max() ?? 0
        return checks.firstIndex { counts[owner($0.stack)] == most } ?? 0
    }

    private mutating func sweep(_ now: Int64) {
        guard now >= nextSweep, !due.isEmpty else { return }
        nextSweep = now + 1_000
        due = due.filter { $0.value.contains { $0.expires > now } }
    }
}
