import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Glibc
import ChainwatchLock
import Synchronization

/// Gets a server's certificate chain with chainwatch's own handshake, for tunnels whose chain is not visible
/// (TLS 1.3, resumed sessions). One per process, shared by every loop.
///
/// Process-wide, at most `maxInFlight` handshakes run at once (each holds a socket and a TLS client): 2 000 tunnels
/// with distinct offers opened 2 000 probes, and at a low descriptor limit the EMFILE failures became blocks. Past
/// the cap a new key waits in line; when a slot frees, keys that have waited longer than `timeoutMilliseconds` fail
/// (`probe capacity`) and the next one starts. Slots free within a timeout, so no key waits more than about two
/// timeouts: a flood delays nobody for ever: under block it fails closed, and cached keys are answered as always.
///
/// Per `ProbeKey`: at most one handshake in flight process-wide (later callers, on any loop, wait for it and get
/// the same result), then the result is cached (successes for `successTTL`, failures for a short `failureTTL`, so
/// a flapping upstream is not hammered but recovers). What the proxy's own state caused is not cached: a key that
/// found no slot in time, or no room for a large chain, says nothing about its upstream. The cache is bounded: past `maxEntries` results or `maxBytes`
/// (a result holds its chain, up to 512 KiB: 10 000 of them were 5 GiB) the expired and then the oldest go.
///
/// Thread safety: `probe`, `invalidate`, `removeAll` and the counters may be used from any thread. The table of
/// results and waiters is behind one `Lock`, held only for lookups and updates (never across a handshake or a
/// completion); counters are atomics. A handshake lives on the
/// loop of the caller that started it; each completion runs on its own caller's loop.
public final class Prober: Sendable {
    /// How long a connect plus handshake may take before it fails (`timed out after N ms`).
    public let timeoutMilliseconds: Int
    /// How long a chain is reused.
    public let successTTLMilliseconds: Int64
    /// How long a failure is reused.
    public let failureTTLMilliseconds: Int64
    /// The most results kept.
    public let maxEntries: Int
    /// The most bytes the kept results may hold (each weighed by `ProbeResult.retainedBytes`).
    public let maxBytes: Int
    public static let defaultMaxBytes = 128 << 20
    /// The most handshakes in flight at once.
    public let maxInFlight: Int
    /// The most handshakes one client may have in flight or waiting at once: a quarter of `maxInFlight`. A line of
    /// fewer than 16 is a deliberate single-user setting (`--max-connections 3`): there one client may use all of it.
    public var maxPerClient: Int { maxInFlight >= 16 ? maxInFlight / 4 : maxInFlight }
    /// Probes refused because their client was past its share.
    public var refusedOverShareTotal: Int { refusedOverShare.load(ordering: .relaxed) }
    private let refusedOverShare = Atomic<Int>(0)
    /// Where a Certificate message over 512 KiB gets room to be read (nil: such a message is `.oversized`).
    public let largeHandshakes: LargeHandshakeRoom?

    private let table = Lock(Table())
    private let now: @Sendable () -> Int64
    private let started = Atomic<Int>(0)
    private let hits = Atomic<Int>(0)
    private let attached = Atomic<Int>(0)
    private let succeeded = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let queued = Atomic<Int>(0)
    private let latencies = Lock(Histogram(bounds: Histogram.latencySeconds))

    /// - Parameter clock: milliseconds on a monotonic clock (tests pass their own).
    public init(timeoutMilliseconds: Int = 5000, successTTLMilliseconds: Int64 = 300_000, failureTTLMilliseconds: Int64 = 5000,
                maxEntries: Int = 10_000, maxBytes: Int = defaultMaxBytes, maxInFlight: Int = 256,
                largeHandshakes: LargeHandshakeRoom? = nil,
                clock: @escaping @Sendable () -> Int64 = MonotonicClock.milliseconds) {
        self.maxBytes = max(0, maxBytes)
        self.largeHandshakes = largeHandshakes
        self.maxInFlight = max(1, maxInFlight)
        self.timeoutMilliseconds = max(1, timeoutMilliseconds)
        self.successTTLMilliseconds = successTTLMilliseconds
        self.failureTTLMilliseconds = failureTTLMilliseconds
        self.maxEntries = max(1, maxEntries)
        self.now = clock
    }

    /// Calls `completion` once, on `loop`'s thread, with the chain for `key`: from the cache, from the handshake
    /// already in flight for `key`, or from a new handshake run on `loop`. Never calls it before returning.
    /// Callable from any thread. The prober keeps what it needs until the handshake ends, so a caller that goes
    /// away early does not stop it (the completion still runs; it may hold the caller weakly).
    ///
    /// - Parameter client: the address of the client whose tunnel asks: a handshake it starts (or queues) counts
    ///   against its share, `maxPerClient`. A client past its share is answered at once with a failure (under block,
    ///   its own tunnel fails closed), so one client opening tunnels to new names cannot fill the line for the others.
    ///   Answers from the cache and waits for a handshake already in flight cost no share. nil: not counted.
    public func probe(_ key: ProbeKey, client: [UInt8]? = nil, on loop: EventLoop, completion: @escaping (ProbeResult) -> Void) {
        probe(key, client: client, on: loop) { result, _ in completion(result) }
    }

    /// `probe`, whose completion also says whether the result was cached when asked (what `hasResult` just before
    /// would say, without a second lookup of the key: a warm tunnel asks once).
    /// - Parameter spare: a connection to the key's address opened beside a tunnel's (`SpareConnection`): used when
    ///   this call starts the handshake, closed unused otherwise (an answer from the cache, a handshake in flight).
    /// - Parameter fresh: handshake whatever the cache holds (a spot check), joining one in flight; the cached result
    ///   stays for everyone else meanwhile and is replaced by a success (a failure never replaces a success that has
    ///   not expired: a check that gets no chain must not answer other tunnels `probe_failed`).
    /// - Parameter timing: how long a handshake this call starts waits before its hellos (a spot check made alone,
    ///   `ProbeTiming`).
    public func probe(_ key: ProbeKey, client: [UInt8]? = nil, on loop: EventLoop, spare: SpareConnection? = nil, fresh: Bool = false,
                      timing: ProbeTiming = .init(), answered completion: @escaping (ProbeResult, _ fromCache: Bool) -> Void) {
        probe(key, client: client, on: loop, spare: spare, fresh: fresh, retryGate: nil, timing: timing,
              answered: completion)
    }

    /// `probe`, for a first contact's pair (`PairProbeGate`): the gate is attached, and given to the handshake, only
    /// when this call starts it (at once, not from the line).
    func probe(_ key: ProbeKey, client: [UInt8]? = nil, on loop: EventLoop, spare: SpareConnection? = nil, fresh: Bool = false,
               retryGate: PairProbeGate?, timing: ProbeTiming = .init(),
               answered completion: @escaping (ProbeResult, _ fromCache: Bool) -> Void) {
        let waiter = Waiter(loop: loop, completion: completion)
        let time = now()
        let step = table.withLock { [maxPerClient] table -> Step in
            if let cached = table.results[key] {
                if time < cached.expires {
                    if !fresh { return .answer(cached.result) }
                } else {
                    table.results.remove(key)
                }
            }
            if table.waiters[key] != nil {
                table.waiters[key]!.append(waiter)
                return .wait
            }
            if let client {
                guard table.byClient[client, default: 0] < maxPerClient else { return .overShare }
                table.byClient[client, default: 0] += 1
                table.clientOf[key] = client
            }
            table.waiters[key] = [waiter]
            guard table.inFlight < maxInFlight else {
                table.pending.append(Pending(key: key, loop: loop, since: time, timing: timing))
                return .queued
            }
            table.inFlight += 1
            return .start
        }
        switch step {
        case .overShare:
            refusedOverShare.add(1, ordering: .relaxed)
            loop.execute { [maxPerClient] in
                waiter.completion(.failure("probe capacity: this client has \(maxPerClient) probes in flight or waiting, its share of \(self.maxInFlight)"), false)
            }
        case .answer(let result):
            hits.add(1, ordering: .relaxed)
            loop.execute { waiter.completion(result, true) }
        case .wait:
            attached.add(1, ordering: .relaxed)
        case .queued:
            queued.add(1, ordering: .relaxed)
        case .start:
            started.add(1, ordering: .relaxed)
            retryGate?.attach()
            loop.execute { [self] in
                startHandshake(key, on: loop, spare: spare, retryGate: retryGate, timing: timing)
            }
            return
        }
        spare?.close()
    }

    /// Handshakes running now. Each holds a socket, so the proxy counts them against `--max-connections`.
    public var inFlight: Int { table.withLock { $0.inFlight } }

    /// Whether a result for `key` is cached and not expired (a probe for it would be answered at once).
    public func hasResult(for key: ProbeKey) -> Bool {
        let time = now()
        return table.withLock { table in table.results[key].map { time < $0.expires } ?? false }
    }

    /// Forgets the cached result for `key`: the next probe handshakes again. A handshake in flight is not
    /// affected (its waiters get its result, which is then cached).
    public func invalidate(_ key: ProbeKey) {
        table.withLock { $0.results.remove(key) }
    }

    /// The successful result cached for `key` and not expired, if any (what a spot check compares its fresh chain with).
    public func cachedSuccess(for key: ProbeKey) -> ProbeResult? {
        let time = now()
        return table.withLock { table in
            guard let cached = table.results[key], time < cached.expires, case .success = cached.result else { return nil }
            return cached.result
        }
    }

    /// Earlier successes for `key` whose flights differed from the newest one's (`sameFlight`), newest first, at most
    /// `maxOtherFlights`: what a pool of servers behind one address answers the same offer with (members mid-rollout,
    /// one with a leaf of one more name; members on other TLS stacks). Each is kept for `successTTL` after the probe
    /// that met it, whatever is stored later (a flight no probe meets any more, a certificate replaced, goes). Empty
    /// when the cached result has expired or failed. A tunnel that differs from the newest result and from a fresh one may be one of these members'
    /// (`InspectionResources.otherProbes`); each is still judged by its own chain.
    public func otherFlights(for key: ProbeKey) -> [ProbeChain] {
        let time = now()
        return table.withLock { table in
            guard let cached = table.results[key], time < cached.expires, case .success = cached.result else { return [] }
            return cached.others.filter { time < $0.expires }.map(\.chain)
        }
    }

    /// Whether two probe results came from servers that answer alike: the same certificates, and records of the same
    /// sizes but for 4 bytes each (an ECDSA CertificateVerify's length varies from one handshake to the next).
    public static func sameFlight(_ a: ProbeChain, _ b: ProbeChain) -> Bool {
        a.chainDER == b.chainDER && a.serverRecordLengths.count == b.serverRecordLengths.count
            && zip(a.serverRecordLengths, b.serverRecordLengths).allSatisfy { abs($0 - $1) <= 4 }
    }

    /// The most earlier flights kept beside a key's newest result (`otherFlights`).
    public static let maxOtherFlights = 3

    /// Forgets every cached result (handshakes in flight go on, as with `invalidate`). Returns how many.
    @discardableResult
    public func removeAll() -> Int {
        table.withLock { table in
            defer { table.results.keep { _, _ in false } }
            return table.results.count
        }
    }

    /// What the prober holds, for the admin `/state`: cached results not expired (at most `limit`, soonest to
    /// expire first) and the keys whose handshake runs or waits for a slot.
    public func state(limit: Int = 1000) -> (cached: [(key: ProbeKey, succeeded: Bool, expiresInMilliseconds: Int64)], running: [ProbeKey]) {
        let time = now()
        return table.withLock { table in
            let cached = table.results.all.filter { $0.value.expires > time }
                .sorted { $0.value.expires < $1.value.expires }.prefix(limit)
                .map { entry -> (key: ProbeKey, succeeded: Bool, expiresInMilliseconds: Int64) in
                    if case .success = entry.value.result { return (entry.key, true, entry.value.expires - time) }
                    return (entry.key, false, entry.value.expires - time)
                }
            return (Array(cached), Array(table.waiters.keys.prefix(limit)))
        }
    }

    /// Counters since `init`, each read atomically (not all at one instant).
    public struct Counters: Equatable, Sendable, CustomStringConvertible {
        /// Handshakes started.
        public var started: Int
        /// Probes answered from the cache.
        public var cacheHits: Int
        /// Probes that waited for a handshake another caller started.
        public var waitersAttached: Int
        /// Handshakes that got a chain.
        public var succeeded: Int
        /// Handshakes that failed (timeouts included).
        public var failed: Int

        public init(started: Int, cacheHits: Int, waitersAttached: Int, succeeded: Int, failed: Int) {
            self.started = started; self.cacheHits = cacheHits; self.waitersAttached = waitersAttached
            self.succeeded = succeeded; self.failed = failed
        }

        public var description: String {
            "started=\(started) cache_hits=\(cacheHits) waiters=\(waitersAttached) succeeded=\(succeeded) failed=\(failed)"
        }
    }

    public var counters: Counters {
        Counters(started: started.load(ordering: .relaxed), cacheHits: hits.load(ordering: .relaxed),
                 waitersAttached: attached.load(ordering: .relaxed), succeeded: succeeded.load(ordering: .relaxed),
                 failed: failed.load(ordering: .relaxed))
    }

    /// Results held (expired ones included until evicted or looked up), handshakes running, and keys waiting for
    /// a slot.
    public var sizes: (cached: Int, inFlight: Int, queued: Int) {
        table.withLock { ($0.results.count, $0.inFlight, $0.pending.count - $0.pendingHead) }
    }

    /// What the kept results are weighed at now, in bytes (see `maxBytes`).
    public var cachedBytes: Int { table.withLock { $0.results.bytes } }

    /// Probes that waited for a slot (the cap was reached).
    public var queuedTotal: Int { queued.load(ordering: .relaxed) }

    /// How long handshakes took, connect to result (failures and timeouts included).
    public var latency: Histogram { latencies.withLock { $0.detached() } }

    // MARK: - On the starting loop

    private func startHandshake(_ key: ProbeKey, on loop: EventLoop, spare: SpareConnection? = nil, retryGate: PairProbeGate? = nil,
                                timing: ProbeTiming = .init()) {
        let begun = now()
        // A client that cannot be made (allocation failure) fails this probe with the reason, not the process.
        let handshake = ProbeHandshake(key: key, timeoutMilliseconds: timeoutMilliseconds, largeHandshakes: largeHandshakes) {
            [self] result in
            let seconds = Double(now() - begun) / 1000
            latencies.withLock { $0.observe(seconds) }
            finish(key, result, on: loop)
        }
        handshake.start(on: loop, spare: spare, retryGate: retryGate, timing: timing)   // kept alive by its connection until it reports
    }

    /// Caches the result, answers every waiter (directly on this loop, through `execute` on the others), and gives
    /// the freed slot to the next key in line; keys that waited longer than the timeout fail instead.
    private func finish(_ key: ProbeKey, _ result: ProbeResult, on loop: EventLoop) {
        let time = now()
        let (next, expired) = table.withLock { [timeoutMilliseconds] table -> (Pending?, [Pending]) in
            table.inFlight -= 1
            var expired: [Pending] = []
            while let first = table.popPending() {
                if time - first.since > Int64(timeoutMilliseconds) { expired.append(first); continue }
                table.inFlight += 1
                return (first, expired)
            }
            return (nil, expired)
        }
        answer(key, result, on: loop, at: time)
        for item in expired {
            // Not cached: the line was full of other clients' handshakes, which says nothing about this upstream (a
            // cached failure would answer every client of this key probe_failed for `failureTTL`).
            answer(item.key, .failure("probe capacity: \(maxInFlight) handshakes in flight, none free within \(timeoutMilliseconds) ms"),
                   on: item.loop, at: time, cache: false)
        }
        if let next {
            next.loop.execute { [self] in startHandshake(next.key, on: next.loop, timing: next.timing) }
        }
    }

    /// Caches `result` for `key` (unless `cache` is false, or `caches` says not) and answers its waiters.
    private func answer(_ key: ProbeKey, _ result: ProbeResult, on loop: EventLoop, at time: Int64, cache: Bool = true) {
        if case .success = result { succeeded.add(1, ordering: .relaxed) } else { failed.add(1, ordering: .relaxed) }
        let ttl: Int64
        if case .success = result { ttl = successTTLMilliseconds } else { ttl = failureTTLMilliseconds }
        let keep = cache && Self.caches(result)
        let waiters = table.withLock { [maxEntries] table in
            let waiters = table.waiters.removeValue(forKey: key) ?? []
            table.release(key)
            let replacesSuccess: Bool = if case .success = result { false }
                else if let cached = table.results[key], time < cached.expires, case .success = cached.result { true } else { false }
            if keep, !replacesSuccess {
                // A success whose flight differs from the success it replaces keeps that one beside it (a pool's
                // other member), with the others kept before, while they are not this flight's and not too many.
                var others: [Kept] = []
                if case .success(let new) = result, let cached = table.results[key], time < cached.expires,
                   case .success(let old) = cached.result {
                    others = ([Kept(chain: old, expires: cached.expires)] + cached.others)
                        .filter { time < $0.expires && !Self.sameFlight($0.chain, new) }
                    others = Array(others.prefix(Self.maxOtherFlights))
                }
                table.store(result, others: others, for: key, now: time, expires: time + ttl, maxEntries: maxEntries, maxBytes: maxBytes)
            }
            return waiters
        }
        for waiter in waiters {
            if waiter.loop === loop {
                waiter.completion(result, false)
            } else {
                waiter.loop.execute { waiter.completion(result, false) }
            }
        }
    }
}

extension Prober {
    /// Whether a result is cached. A chain over what a probe reads by default was read with room
    /// (`LargeHandshakeRoom`) that is given back at once: it is not kept for 5 minutes beside 10 000 others, and the
    /// next tunnel probes again (a tunnel that asked for it first keeps it for itself, within room). Nor is a refusal
    /// for want of room: other tunnels held it, and may have given it back by the next one.
    public static func caches(_ result: ProbeResult) -> Bool {
        switch result {
        case .success(let chain): chain.chainDER.reduce(0) { $0 + $1.count } <= TLSClient.defaultMaxCertificateList
        case .failure: true
        case .oversized: false
        }
    }

    private enum Step { case answer(ProbeResult), wait, start, queued, overShare }

    /// A key waiting for a handshake slot, with the loop of the caller that asked first.
    private struct Pending: @unchecked Sendable {   // `loop` is only used through its thread-safe `execute`
        let key: ProbeKey
        let loop: EventLoop
        let since: Int64
        var timing = ProbeTiming()
    }

    /// A caller waiting for a result. Its completion is not Sendable: it is only ever called on `loop`'s thread
    /// (through `loop.execute` from other threads), the thread that asked, hence the unchecked Sendable.
    private struct Waiter: @unchecked Sendable {
        let loop: EventLoop
        let completion: (ProbeResult, _ fromCache: Bool) -> Void
    }

    private struct Cached {
        var result: ProbeResult
        /// Earlier successes whose flights differed from `result`'s (`otherFlights`), each with its own expiry.
        var others: [Kept] = []
        var expires: Int64
        /// Insertion order, for evicting the oldest.
        var sequence: UInt64
    }

    /// A kept earlier success and when it expires (`successTTL` after the probe that got it).
    private struct Kept {
        var chain: ProbeChain
        var expires: Int64
    }

    private struct Table {
        var results = WeighedTable<ProbeKey, Cached>()
        /// Handshakes in flight or waiting for a slot, by key, with everyone waiting for them (the starter first).
        /// Never evicted.
        var waiters: [ProbeKey: [Waiter]] = [:]
        /// Handshakes running.
        var inFlight = 0
        /// Handshakes started or queued by each client (`probe(client:)`), and the client of each such key.
        var byClient: [[UInt8]: Int] = [:]
        var clientOf: [ProbeKey: [UInt8]] = [:]

        /// The key's handshake is over (answered, or failed waiting): its client's share is free again.
        mutating func release(_ key: ProbeKey) {
            guard let client = clientOf.removeValue(forKey: key) else { return }
            let left = byClient[client, default: 1] - 1
            byClient[client] = left > 0 ? left : nil
        }
        /// Keys waiting for a slot, oldest first (`pendingHead` is the first not yet taken).
        var pending: [Pending] = []
        var pendingHead = 0

        mutating func popPending() -> Pending? {
            guard pendingHead < pending.count else { return nil }
            let first = pending[pendingHead]
            pendingHead += 1
            if pendingHead > 64, pendingHead * 2 > pending.count {   // compact now and then: amortized O(1)
                pending.removeFirst(pendingHead)
                pendingHead = 0
            }
            return first
        }
        private var nextSequence: UInt64 = 0

        mutating func store(_ result: ProbeResult, others: [Kept] = [], for key: ProbeKey, now: Int64, expires: Int64,
                            maxEntries: Int, maxBytes: Int) {
            nextSequence += 1
            var others = others
            var weight = others.reduce(result.retainedBytes) { $0 + ProbeResult.success($1.chain).retainedBytes }
            if weight > maxBytes {   // the kept flights go first: the newest result alone may still fit
                others = []
                weight = result.retainedBytes
            }
            results.insert(Cached(result: result, others: others, expires: expires, sequence: nextSequence), for: key,
                           weight: weight, maxEntries: maxEntries, maxBytes: maxBytes,
                           live: { $0.expires > now }, order: { $0.sequence < $1.sequence })
        }
    }
}

/// How long a spot check made alone waits before its hello once its connection is established, and before its second
/// hello once a HelloRetryRequest came: as long as a tunnel's client took (`HelloDelays`), so an interceptor cannot
/// tell the check by a hello that comes at once. Zero: at once (every other probe).
public struct ProbeTiming: Sendable, Equatable {
    public var helloMicroseconds: Int64 = 0
    public var retryMicroseconds: Int64 = 0

    public init(helloMicroseconds: Int64 = 0, retryMicroseconds: Int64 = 0) {
        self.helloMicroseconds = helloMicroseconds
        self.retryMicroseconds = retryMicroseconds
    }
}
