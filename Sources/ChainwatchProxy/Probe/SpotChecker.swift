import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchLock
import Glibc
import Synchronization

/// Carries out the spot checks `SpotCheckSchedule` decides: one schedule for the process (a key used on two loops is
/// checked at the rate once), each check's timer on the loop of the tunnel that armed it (`SpotCheckTimers`). Each
/// check is drawn for one of the clients that relied on the key in the last 30 s, each client as likely whatever its
/// number of tunnels (`SpotCheckClients`), and probes the key afresh with the mirrored hello of the latest tunnel
/// (`ProbeKey.offer.template`; every client of the key has its shape, all that the mirror keeps of a hello), so it
/// looks like one more connection of that client. A chain other than the cached probe's is judged under that tunnel's
/// rule, and one that fails is a finding like a tunnel's, with the evidence `spot_check`: an alert line, and under
/// `block` the upstream marked known-bad (`KnownBadRule`). The same chain again is not judged nor reported: the tunnels
/// it covers already report whatever it earns (a host whose chain always fails an `alert` rule gets no extra lines).
/// The fresh result replaces the cached one, so later tunnels are compared with it.
///
/// Two kinds of check, drawn for each (`besideFraction` of them beside): a check **alone** probes at the moment its
/// timer fires, its hello sent as long after its connection is established, and its second hello as long after a
/// HelloRetryRequest, as the key's tunnels' clients took (`HelloDelays`, `ProbeTiming`: hellos sent at once told the
/// check from a tunnel); a check **beside** waits for the next tunnel to the address and name, of the client and stack it was
/// drawn for first (`SpotCheckDues`), which opens a spare connection at its CONNECT and sends the check's hello (the
/// tunnel's own offer, mirrored) on it just before the client's (`TunnelInspection`). A forger who forges connections
/// with no twin before them meets every check beside a tunnel it would have forged, and a check alone only when no
/// connection came in its window; a forger who waits to see whether a second hello follows spares a check beside a
/// tunnel and meets one alone.
/// Thread-safe.
public final class SpotChecker: Sendable {
    /// What a check judges its chain under: the rule, policy and facts of the latest tunnel on this loop that used the
    /// key, and that tunnel's key itself (keys of one shape are equal, but each carries its own client's hello: the
    /// check mirrors the latest, whose shape every client of the key has); and the client the check was drawn for
    /// (`SocketAddress.clientKey`), whose share of the probe line (`Prober.maxPerClient`) the check uses (a client's
    /// tunnels cannot make checks that fill the line for others), with `stack`, its latest tunnel's stack as its
    /// CONNECT's User-Agent names it (`SpareLedger.stack(userAgent:)`): a check beside a tunnel waits for a tunnel of
    /// that client and stack (`party`).
    struct Context: Sendable {
        var key: ProbeKey
        var client: [UInt8]
        var stack: UInt64
        var rule: Rule
        var snapshot: PolicySnapshot
        var facts: ConnectionFacts
        /// In a drawn context, how long a check made alone waits before its hello once connected, and before its
        /// second hello once a HelloRetryRequest came: one tunnel's delays (`HelloDelays`; 0 when none is known yet).
        var helloDelayMicroseconds: Int64 = 0
        var retryDelayMicroseconds: Int64 = 0

        var party: Party { Party(client: client, stack: stack) }
    }

    /// Whom a check beside a tunnel waits for: a client (`SocketAddress.clientKey`: an IPv6 client by its /64) and
    /// its stack (its CONNECT's User-Agent, hashed). A User-Agent is the client's to choose; its address is not, so a
    /// client of a forger's cannot take the checks drawn for another by sending that one's User-Agent.
    struct Party: Hashable, Sendable {
        var client: [UInt8]
        var stack: UInt64
    }

    public let ratePerSecond: Double
    private let schedule: Lock<SpotCheckSchedule<ProbeKey>>
    /// Counters for /metrics: checks started, and how they ended.
    private let counters = Lock(Counters())
    struct Counters: Sendable {
        var started = 0
        var clean = 0
        var findings = 0
        var failed = 0
        /// Of `started`, those beside a tunnel; checks made due beside one (some lapse with no tunnel).
        var beside = 0
        var besideDue = 0
        /// Checks a tunnel took and gave back, for the next one (see `giveBack`).
        var givenBack = 0
    }

    /// `--spot-check-rate`'s default: a forger who forges every connection for 20 s of use goes unseen with
    /// probability e^(−0.4·20) < 0.04 %; one who forges connections with no twin in the 0.5 s before them, at a
    /// tunnel a second, e^(−0.4·(0.3 + 0.7·0.5)·20) = 0.55 %, and one who spares every pair of connections that come
    /// together e^(−0.4·0.7·20) = 0.37 % (README, Spot checks).
    public static let defaultRate = 0.4
    /// How long a tunnel that carries a spot check holds its client's hello after the check's left: long enough that
    /// the check's hello comes first to whoever reads both (a few microseconds apart, two connections handled by an
    /// interceptor's threads arrive in either order), short enough to cost the tunnel nothing that matters.
    static let leadMilliseconds = 5
    /// `--spot-check-beside`'s default: the fraction of checks made beside the next tunnel. The forgers that each kind
    /// misses (a check beside a tunnel comes as a pair of connections, which a forger can spare; a check alone falls
    /// within the window of a forger of lone connections about half the time at a tunnel a second) then meet checks
    /// at about the same rate: 0.7 λ and 0.65 λ.
    public static let defaultBesideFraction = 0.3

    /// The fraction of checks made beside a tunnel (0 with `--no-spare-connections`: a check beside needs a spare).
    public let besideFraction: Double
    private let dues = Lock(SpotCheckDues<Place, Party>(owner: { $0.client.hashValue }))
    /// How many places have a check due: a CONNECT looks the table up (a lock) only when some have.
    private let dueCount = Atomic<Int>(0)

    public init(ratePerSecond: Double = defaultRate, besideFraction: Double = defaultBesideFraction, inUseMilliseconds: Int64 = 30_000) {
        self.ratePerSecond = max(0, ratePerSecond)
        self.besideFraction = min(1, max(0, besideFraction))
        schedule = Lock(SpotCheckSchedule(settings: .init(ratePerSecond: ratePerSecond, inUseMilliseconds: inUseMilliseconds)))
    }

    /// Where a check beside a tunnel waits: the upstream address and the name the tunnels that used it `CONNECT`ed to
    /// (another name at a shared address, a CDN's, must not take it). Within a place, a check waits first for a tunnel
    /// of the client and stack it was drawn for (`Party`, `SpotCheckDues`): checks are drawn per hello shape, and one
    /// taken by another stack's tunnel is made with that tunnel's hello, so a forger who forges one browser's
    /// connections beside another client's busy traffic would meet only a share of its checks; and a forger's own
    /// client cannot take another client's checks, at moments it chooses. Clients that send no User-Agent (SOCKS,
    /// transparent) are one stack each.
    struct Place: Hashable, Sendable {
        var address: SocketAddress
        var host: String
    }

    /// A check waiting beside a tunnel, as a tunnel that took it holds it (for `giveBack`).
    typealias Due = SpotCheckDues<Place, Party>.Due

    /// A tunnel to `host` at `address`, of `party`, is about to connect: the check it carries beside it, if any (taken:
    /// the next one does not, unless this one gives it back with `giveBack`).
    func takeDue(_ address: SocketAddress, host: String, party: Party, now: Int64) -> Due? {
        guard dueCount.load(ordering: .relaxed) > 0 else { return nil }
        return dues.withLock { dues in
            let taken = dues.takeDue(Place(address: address, host: host), stack: party, now: now)
            dueCount.store(dues.count, ordering: .relaxed)
            return taken
        }
    }

    /// A tunnel that took `check` could not carry it (no TLS 1.3 hello, an offer with no cached probe to compare, a
    /// connect that failed, a spare that ended first): the check waits for the next tunnel again, of whom it was drawn
    /// for, with its times; given back twice already, it is dropped.
    func giveBack(_ check: Due, address: SocketAddress, host: String, now: Int64) {
        counters.withLock { $0.givenBack += 1 }
        dues.withLock { dues in
            dues.giveBack(check, at: Place(address: address, host: host), now: now)
            dueCount.store(dues.count, ordering: .relaxed)
        }
    }

    private func mark(_ place: Place, party: Party, now: Int64) {
        dues.withLock { dues in
            dues.mark(place, stack: party, now: now)
            dueCount.store(dues.count, ordering: .relaxed)
        }
    }

    /// A check beside a tunnel started (its probe made afresh).
    func besideStarted() {
        counters.withLock { $0.started += 1; $0.beside += 1 }
    }

    /// The counters, for /metrics.
    var totals: Counters { counters.withLock { $0 } }

    /// An exponential draw with mean 1 / rate, in milliseconds.
    private func delay() -> Int64 {
        guard ratePerSecond > 0 else { return .max }
        let uniform = Double.random(in: Double.ulpOfOne..<1)
        return Int64(min(3_600_000, -log(uniform) / ratePerSecond * 1000))
    }

    /// A tunnel relied on `key`'s probe (on `timers`' loop).
    func used(_ key: ProbeKey, context: Context, inspector: Inspector, timers: SpotCheckTimers) {
        guard ratePerSecond > 0, key.offer.template != nil else { return }
        let now = timers.loop.cachedMilliseconds
        let actions = schedule.withLock { $0.used(key, now: now, delay: delay()) }
        // Only the loop whose timer checks the key keeps its context (another loop's would never be read nor freed).
        if !actions.isEmpty || timers.isArmed(key) { timers.remember(key, context, now: now) }
        run(actions, inspector: inspector, timers: timers)
    }

    private func run(_ actions: [SpotCheckSchedule<ProbeKey>.Action], inspector: Inspector, timers: SpotCheckTimers) {
        for action in actions {
            switch action {
            case .arm(let key, let milliseconds):
                timers.arm(key, afterMilliseconds: milliseconds) { [self] in
                    let beside = besideFraction > 0 && Double.random(in: 0..<1) < besideFraction
                    let next = schedule.withLock { $0.fired(key, now: timers.loop.cachedMilliseconds, delay: delay(), beside: beside) }
                    if next.isEmpty { timers.forget(key) }
                    run(next, inspector: inspector, timers: timers)
                }
            case .check(let key):
                guard let context = timers.draw(key) else { continue }
                check(context.key, context: context, inspector: inspector, loop: timers.loop)
            case .checkBeside(let key):
                guard let context = timers.draw(key) else { continue }
                counters.withLock { $0.besideDue += 1 }
                mark(Place(address: key.address, host: context.facts.connectHost), party: context.party, now: timers.loop.cachedMilliseconds)
            }
        }
    }

    private func check(_ key: ProbeKey, context: Context, inspector: Inspector, loop: EventLoop) {
        counters.withLock { $0.started += 1 }
        let cached = inspector.prober.cachedSuccess(for: key)?.chain?.chainDigest
        // Its hellos wait as long as a tunnel's client took (`HelloDelays`), within a quarter of the probe's timeout each.
        let bound = Int64(inspector.prober.timeoutMilliseconds) * 250
        let timing = ProbeTiming(helloMicroseconds: min(context.helloDelayMicroseconds, bound),
                                 retryMicroseconds: min(context.retryDelayMicroseconds, bound))
        // Fresh: the cached result stays for the tunnels meanwhile, and only a chain replaces it.
        inspector.prober.probe(key, client: context.client, on: loop, fresh: true, timing: timing) { [self] result, _ in
            ended(result, cachedDigest: cached, context: context, inspector: inspector, loop: loop)
        }
    }

    /// A check's probe (alone, or beside a tunnel: `TunnelInspection`) answered. No chain: counted, nothing more (the
    /// cached result stays). The cached chain again: clean. Another chain: judged under the context's rule, and one
    /// that fails is a finding (a line with the evidence `spot_check`; under `block` the upstream marked known-bad).
    func ended(_ result: ProbeResult, cachedDigest: [UInt8]?, context: Context, inspector: Inspector, loop: EventLoop) {
        guard case .success(let probe) = result else {
            counters.withLock { $0.failed += 1 }
            // Not a finding (servers reset and time out), but an interceptor that recognises checks and resets them
            // would show here first: one log line per failed check, at most λ a second per upstream.
            inspector.logger.notice("spot check of \(context.facts.connectHost) at \(context.key.address) got no chain: \(result.failureReason ?? "")")
            return
        }
        if let cachedDigest, cachedDigest == probe.chainDigest {
            counters.withLock { $0.clean += 1 }   // the chain the tunnels were judged with
            return
        }
        let key = context.key
        var facts = context.facts
        facts.probeJA4 = probe.ja4
        inspector.judge(chain: probe.chainDER, stapled: probe.ocspResponse, digest: probe.chainDigest, rule: context.rule,
                        snapshot: context.snapshot, tunnel: facts, source: .spotCheck,
                        nowMilliseconds: loop.cachedMilliseconds, on: loop) { [self] verdict, evidence in
            var evidence = evidence
            evidence.source = .spotCheck   // a cached verdict comes back as `cache`: it was this check's chain
            guard verdict.deciding != nil else {
                counters.withLock { $0.clean += 1 }
                return
            }
            counters.withLock { $0.findings += 1 }
            let leafKeyType = evidence.validation.presented.first?.keyType
            let hello = try? ClientHello.parse(handshakeMessage: key.offer.template?.message ?? [])
            let marking = KnownBadRule.marking(verdict, facts: facts, leafKeyType: leafKeyType, clientHello: hello, largeChain: false)
            inspector.report(verdict, evidence: evidence, rule: context.rule, tunnel: facts, nowMilliseconds: loop.cachedMilliseconds,
                             marksKnownBad: marking != nil)
            if let finding = marking {
                inspector.cache.markBad(Authority(host: facts.connectHost, port: facts.port), VerdictCache.KnownBad(
                    finding: finding, ruleName: context.rule.name, rule: context.rule.identity, evidence: evidence.withNames(),
                    expires: loop.cachedMilliseconds + inspector.cache.knownBadMilliseconds,
                    anchors: context.snapshot.anchorsGeneration))
            }
        }
    }
}

/// One loop's spot-check timers and, per key, the context of the latest tunnel that relied on it and the clients that
/// did lately (a check is drawn for one of them). Loop-confined (its worker's loop).
final class SpotCheckTimers {
    let loop: EventLoop
    private var timers: [ProbeKey: Timer] = [:]
    /// The latest tunnel's context is the one kept whole (its rule, policy and facts; its key, whose hello any
    /// client's of the key would mirror alike: the key holds the shape), the clients as parties only: a key keeps one
    /// hello and one set of facts however many clients use it, as before clients were drawn.
    private var contexts: [ProbeKey: (latest: SpotChecker.Context, clients: SpotCheckClients<[UInt8], UInt64>, delays: HelloDelays)] = [:]

    init(loop: EventLoop) { self.loop = loop }

    /// Whether this loop holds the timer of `key`'s check.
    func isArmed(_ key: ProbeKey) -> Bool { timers[key] != nil }

    /// A tunnel of `context.client` relied on `key` at `now`. Called for keys this loop arms (at most the schedule's
    /// 4 096), and forgotten with their timers.
    func remember(_ key: ProbeKey, _ context: SpotChecker.Context, now: Int64) {
        if contexts[key] == nil { contexts[key] = (context, SpotCheckClients(), HelloDelays()) }
        contexts[key]!.latest = context   // in place: a copy of the table per tunnel otherwise
        contexts[key]!.clients.record(context.client, stack: context.stack, now: now) { Int.random(in: 0..<$0) }
    }

    /// The context a check of `key` is made under: the latest tunnel's, for a client drawn uniformly among those that
    /// relied on the key in the last 30 s and one of its stacks (its share of the probe line, and whom a check beside
    /// a tunnel waits for), with hello delays drawn from one of the key's latest tunnels (`HelloDelays`: the shape's
    /// tunnels, whichever client, as an interceptor sees them).
    func draw(_ key: ProbeKey) -> SpotChecker.Context? {
        guard let (latest, clients, delays) = contexts[key] else { return nil }
        var context = latest
        let drawn = delays.draw { Int.random(in: 0..<$0) }
        context.helloDelayMicroseconds = drawn?.hello ?? 0
        context.retryDelayMicroseconds = drawn?.retry ?? 0
        if let drawn = clients.pick(now: loop.cachedMilliseconds, draw: { Int.random(in: 0..<$0) }) {
            context.client = drawn.client
            context.stack = drawn.stack
        }
        return context
    }

    /// How long a tunnel that relied on `key` took to send its hellos: kept for the checks of a key this loop checks
    /// (`HelloDelays`), once its handshake has shown whether a HelloRetryRequest came and how it was answered.
    func recordDelays(_ key: ProbeKey, _ sample: HelloDelays.Sample) {
        contexts[key]?.delays.record(sample)
    }

    /// Calls `action` after `milliseconds`. A key's timer is made once and scheduled again (never freed from its own
    /// callback), so `action` must be the same for every call with one key.
    func arm(_ key: ProbeKey, afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) {
        if let timer = timers[key] {
            timer.schedule(milliseconds: Int(min(milliseconds, Int64(Int32.max))))
            return
        }
        let timer = Timer(loop: loop, action: action)
        timers[key] = timer
        timer.schedule(milliseconds: Int(min(milliseconds, Int64(Int32.max))))
    }

    func forget(_ key: ProbeKey) {
        timers[key]?.cancel()
        timers[key] = nil
        contexts[key] = nil
    }

    /// At shutdown: no check starts any more.
    func cancelAll() {
        for timer in timers.values { timer.cancel() }
        timers = [:]
        contexts = [:]
    }
}
