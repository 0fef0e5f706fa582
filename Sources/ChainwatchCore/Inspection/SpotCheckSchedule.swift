/// When chainwatch probes an upstream again unasked: spot checks at times an interceptor cannot foresee, so one that
/// behaves while a probe is cached and then forges every connection (or every connection with no twin) meets a probe
/// it took for a client. Pure: time and random draws are parameters.
///
/// While a probe key (an upstream address and a hello shape) is in use, that is while a tunnel relied on its cached
/// probe (one made before the tunnel asked: a probe made for a tunnel is fresh evidence) within
/// `inUseMilliseconds`, the checks come as a Poisson process of `ratePerSecond`: after each check (or the first use)
/// the next one is armed after an exponentially distributed delay, which the caller draws (`delay`), with mean
/// 1 / rate. A process without memory has no quiet moment to forge in: whatever the forger saw, the chance of a check
/// in the next t seconds of use is 1 − e^(−rate·t). So a forger who forges every connection for t seconds of use goes
/// unseen with probability e^(−rate·t). A check is made only when a tunnel used the key since the last one (a timer
/// that finds none disarms until the next use), so the checks cost at most `rate` handshakes a second per upstream,
/// and at most one per tunnel: a fraction min(1, rate / r) of an upstream with r tunnels a second. When the key falls
/// out of use the schedule forgets it; the next use arms it again.
///
/// Bounded: at most `maxKeys` keys are tracked; at the bound, keys out of use are dropped, and a new key finds no
/// room until one is (it is then not spot-checked; its tunnels are still compared with its probe).
public struct SpotCheckSchedule<Key: Hashable & Sendable>: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Mean checks a second per key in use; 0 turns spot checks off.
        public var ratePerSecond: Double
        /// How long after a tunnel relied on a key it counts as in use.
        public var inUseMilliseconds: Int64
        public var maxKeys: Int

        public init(ratePerSecond: Double, inUseMilliseconds: Int64 = 30_000, maxKeys: Int = 4_096) {
            self.ratePerSecond = max(0, ratePerSecond)
            self.inUseMilliseconds = max(1, inUseMilliseconds)
            self.maxKeys = max(1, maxKeys)
        }
    }

    public enum Action: Equatable, Sendable {
        /// Call `fired(key, ...)` after this many milliseconds.
        case arm(Key, afterMilliseconds: Int64)
        /// Probe `key` afresh now, as a connection of its own, and judge what it gets.
        case check(Key)
        /// Probe `key`'s address afresh beside the next tunnel to it, the check's hello first (`SpotChecker`): the
        /// check then leaves exactly when a client's connection would, so a forger who forges connections with no
        /// twin before them forges the check whenever it would have forged that tunnel.
        case checkBeside(Key)
    }

    @usableFromInline struct Entry: Sendable {
        @usableFromInline var lastUse: Int64
        @usableFromInline var armed: Bool
        @usableFromInline var usedSinceCheck: Bool

        @usableFromInline init(lastUse: Int64, armed: Bool, usedSinceCheck: Bool) {
            self.lastUse = lastUse; self.armed = armed; self.usedSinceCheck = usedSinceCheck
        }
    }

    public let settings: Settings
    // Inlinable, so the proxy's use (`Key` = its `ProbeKey`, once per TLS 1.3 tunnel on a cached probe) is specialized:
    // unspecialized, the generic dictionary cost about 12 000 instructions a call.
    @usableFromInline var entries: [Key: Entry] = [:]

    public init(settings: Settings) { self.settings = settings }

    /// Keys tracked now.
    public var count: Int { entries.count }

    /// A tunnel relied on `key` at `now`. `delay`: an exponential draw with mean 1000 / rate milliseconds, used when
    /// the key had no check armed.
    @inlinable
    public mutating func used(_ key: Key, now: Int64, delay: Int64) -> [Action] {
        guard settings.ratePerSecond > 0 else { return [] }
        if var entry = entries[key] {
            entry.lastUse = now
            entry.usedSinceCheck = true
            let arm = !entry.armed
            entry.armed = true
            entries[key] = entry
            return arm ? [.arm(key, afterMilliseconds: max(1, delay))] : []
        }
        if entries.count >= settings.maxKeys {
            entries = entries.filter { now - $0.value.lastUse < settings.inUseMilliseconds }
            guard entries.count < settings.maxKeys else { return [] }
        }
        entries[key] = Entry(lastUse: now, armed: true, usedSinceCheck: true)
        return [.arm(key, afterMilliseconds: max(1, delay))]
    }

    /// The check armed for `key` is due. Used since the last check: check now (`beside`: beside the next tunnel, a
    /// draw the caller makes) and arm the next one after `delay`; in use but not used since: disarm until the next
    /// use; out of use: forget the key.
    @inlinable
    public mutating func fired(_ key: Key, now: Int64, delay: Int64, beside: Bool = false) -> [Action] {
        guard var entry = entries[key], entry.armed else { return [] }
        guard now - entry.lastUse < settings.inUseMilliseconds else {
            entries[key] = nil
            return []
        }
        guard entry.usedSinceCheck else {
            entry.armed = false
            entries[key] = entry
            return []
        }
        entry.usedSinceCheck = false
        entries[key] = entry
        return [beside ? .checkBeside(key) : .check(key), .arm(key, afterMilliseconds: max(1, delay))]
    }
}
