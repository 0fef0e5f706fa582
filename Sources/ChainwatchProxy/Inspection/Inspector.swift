import Synchronization
import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Foundation
import Logging
import ChainwatchLock

/// The shared part of handshake inspection: policy, verdict cache, prober and alert writer. One per process;
/// every loop's tunnels use it. Thread-safe: each member is.
public final class Inspector: Sendable {
    public let policies: PolicyStore
    public let cache: VerdictCache
    public let prober: Prober
    /// Probes of upstreams in use at times no tunnel asks for (`--spot-check-rate`).
    public let spotChecker: SpotChecker
    public let alerts: AlertWriter
    /// The access log (`--access-log`): a line per tunnel and plain-HTTP request as it ends.
    public let accessLog: AlertWriter?
    let logger: Logger
    let evaluator = Evaluator()
    /// `observer.*` of every line.
    public let observer: Observer
    /// One operator log line per run of like findings (every finding is in the alert log).
    private let noticeThrottle = Lock(RepeatThrottle())
    /// JA4 fingerprints by what they are made of: one client (or one kind) sends many connections, and each alert
    /// line would otherwise hash its hello twice. Cleared when full.
    private let fingerprints = Lock<[JA4Input: String]>([:])
    private static let maxFingerprints = 4_096
    /// `--large-handshake-memory`'s default, 64 MiB: one 16 MiB Certificate message under `block` (three copies: read,
    /// validated, held), or twenty of 1 MiB.
    public static let defaultLargeHandshakeMemory = 64 << 20
    /// The most rendered alert-line bytes a cached verdict keeps (`Evidence.rendered`).
    static let maxRenderedBytes = 4_096

    /// Intermediates seen in valid chains (and loaded at start), offered when a chain misses its own.
    public let intermediates: IntermediatePool
    /// Where chains the verdict cache does not know are validated, off the event loops.
    public let validations: ValidationQueue
    /// The memory for server handshake messages over 224 KiB (Certificate messages up to the protocol's 16 MiB).
    public let largeHandshakes: LargeHandshakeRoom
    /// Verdicts reported, by action (`pass` without a finding), deciding reason (`none`) and evidence source (`none`
    /// when no chain was judged: a failed probe, a plain-HTTP request).
    private let verdictCounts = Lock<[VerdictKey: Int]>([:])

    /// A verdict's labels as values (hashed cheaply per verdict); their text is made when `/metrics` is read.
    public struct VerdictKey: Hashable, Sendable {
        public var action: Action?, reason: Reason?, evidence: EvidenceSource?
        public var labels: (action: String, reason: String, evidence: String) {
            (action?.rawValue ?? "pass", reason?.rawValue ?? "none", evidence?.rawValue ?? "none")
        }
    }
    /// A copy made under the lock into storage of its own: a copy that shared the table's storage would be read on the
    /// admin thread while a loop, once the copy is gone, resized that storage in place (what ThreadSanitizer, which
    /// does not see the Swift runtime's reference counts, reported as a race).
    public var verdicts: [VerdictKey: Int] { verdictCounts.withLock { Dictionary(uniqueKeysWithValues: $0.map { ($0.key, $0.value) }) } }
    /// `403`s answered for known-bad upstreams, by the mark's reason: refusals, not findings (the finding that set the
    /// mark was written once), so not in `verdicts`.
    private let refusalCounts = Lock<[Reason: Int]>([:])
    public var knownBadRefusals: [Reason: Int] { refusalCounts.withLock { Dictionary(uniqueKeysWithValues: $0.map { ($0.key, $0.value) }) } }

    /// First contacts under a holding rule (`InspectionMachine`'s `pairing`): pairs by which connection started first,
    /// probes sent alone first (a hello with 0-RTT data), and pairs whose probe stalled behind the tunnel's connection
    /// (a server, or an interceptor, that answers one connection at a time).
    let pairsProbeFirst = Atomic<Int>(0), pairsTunnelFirst = Atomic<Int>(0), probesAlone = Atomic<Int>(0), pairStalls = Atomic<Int>(0)
    /// First contacts under a rule that holds nothing (alert): probes beside the tunnel on a spare, by whose hello
    /// left first, and probes with no spare (a warm address, a new offer), which connect after the tunnel.
    let besideProbeFirst = Atomic<Int>(0), besideTunnelFirst = Atomic<Int>(0), besideNoSpare = Atomic<Int>(0)
    /// Spare connections opened beside a tunnel's at its CONNECT (`SpareConnection`): handed to a probe, or closed
    /// unused (a TLS 1.2 hello, an offer with a result, no TLS, a tunnel gone before its hello).
    let sparesHanded = Atomic<Int>(0), sparesUnused = Atomic<Int>(0)

    /// Counts a `403` answered for `upstream`'s known-bad mark, on the mark and in `knownBadRefusals`.
    func refused(_ upstream: Authority, mark: KnownBadMark) {
        cache.countRefusal(upstream)
        refusalCounts.withLock { $0[mark.finding.reason, default: 0] += 1 }
    }

    public init(policies: PolicyStore, cache: VerdictCache = VerdictCache(), prober: Prober,
                spotChecker: SpotChecker = SpotChecker(), alerts: AlertWriter,
                accessLog: AlertWriter? = nil, logger: Logger,
                observer: Observer = Observer(hostname: ProcessInfo.processInfo.hostName),
                intermediates: IntermediatePool = IntermediatePool(),
                validations: ValidationQueue = ValidationQueue(threads: EventLoop.usableCPUCount),
                largeHandshakes: LargeHandshakeRoom = LargeHandshakeRoom(capacity: Inspector.defaultLargeHandshakeMemory)) {
        self.observer = observer
        self.largeHandshakes = largeHandshakes
        self.validations = validations
        self.intermediates = intermediates
        self.policies = policies
        self.cache = cache
        self.prober = prober
        self.spotChecker = spotChecker
        self.alerts = alerts
        self.accessLog = accessLog
        self.logger = logger
    }

    /// Judges a chain (DER as presented) for a tunnel: from the cache when this rule already judged these exact
    /// certificates for this name, at once on the calling loop; else by building and validating the path and running
    /// the checks on a validation thread (`validations`), then `deliver` on `loop`. The caller holds what it holds
    /// meanwhile (a `block` tunnel its server bytes); `deliver` is called exactly once, on `loop`'s thread.
    /// - Parameters:
    ///   - stapled: the OCSP response the server stapled with the chain, if any.
    ///   - digest: `Digest.sha256(chain:stapled:)` when the caller has it (a probe's result carries it).
    func judge(chain: [[UInt8]], stapled: [UInt8]?, digest: [UInt8]? = nil, rule: Rule, snapshot: PolicySnapshot,
               tunnel: ConnectionFacts, source: EvidenceSource, nowMilliseconds: Int64, on loop: EventLoop,
               deliver: @escaping (Verdict, Evidence) -> Void) {
        let host = tunnel.hostChecked
        // No digest (OpenSSL could not allocate): judge this chain afresh and cache nothing, so it shares no entry.
        // A chain over what a tunnel reads by default (read with room from `largeHandshakes`, up to 16 MiB) is never
        // cached either: its facts (tens of thousands of names) would stay for minutes beside thousands of other
        // entries. So it is not hashed here, on the loop (SHA-256 of 16 MiB: about 10 ms on this machine), for a lookup
        // that cannot hit.
        let cacheable = chain.reduce(0) { $0 + $1.count } <= TLSObserver.maxServerHandshakeMessageLength
        let key = (cacheable ? digest ?? (try? Digest.sha256(chain: chain, stapled: stapled)) : nil).map {
            VerdictCache.Key(chainHash: $0, rule: rule.identity, host: host, connectHost: tunnel.connectHost,
                             anchors: snapshot.anchorsGeneration)
        }
        if let key, let cached = cachedJudgement(key, rule: rule, tunnel: tunnel, nowMilliseconds: nowMilliseconds) {
            return deliver(cached.0, cached.1)
        }
        let answer = LoopBound(loop: loop, deliver: deliver)
        let queued = validations.submit { [self] in
            let (verdict, evidence) = validate(chain: chain, stapled: stapled, key: key, rule: rule, snapshot: snapshot,
                                               tunnel: tunnel, source: source, nowMilliseconds: nowMilliseconds)
            answer.loop.execute { answer.deliver(verdict, evidence) }
        }
        if !queued {   // the queue is full: validate here, as before the queue (slower for this loop, never no verdict)
            let (verdict, evidence) = validate(chain: chain, stapled: stapled, key: key, rule: rule, snapshot: snapshot,
                                               tunnel: tunnel, source: source, nowMilliseconds: nowMilliseconds)
            deliver(verdict, evidence)
        }
    }

    /// A caller's completion and its loop. The completion is not Sendable: it is only ever called on `loop`'s thread
    /// (through `loop.execute` from a validation thread), the thread that asked, hence the unchecked Sendable.
    private struct LoopBound: @unchecked Sendable {
        let loop: EventLoop
        let deliver: (Verdict, Evidence) -> Void
    }

    /// The cached verdict for `key`, with this connection's facts: nil when there is none, or when it waits for an
    /// intermediate the pool has since learned.
    private func cachedJudgement(_ key: VerdictCache.Key, rule: Rule, tunnel: ConnectionFacts,
                                 nowMilliseconds: Int64) -> (Verdict, Evidence)? {
        guard let entry = cache.verdict(for: key, now: nowMilliseconds),
              entry.poolGeneration.map({ $0 == intermediates.generation }) ?? true else { return nil }
        var evidence = entry.evidence
        evidence.source = .cache
        evidence.connection = tunnel   // this connection's facts, not those of the one first judged
        // The protocol floor belongs to this connection, not the cached one: re-run the cheap checks.
        let verdict = tunnel.protocolVersion == entry.evidence.protocolVersion && tunnel.cipher == entry.evidence.cipher
            ? entry.verdict : evaluator.evaluate(evidence, rule: rule, at: UnixTime(seconds: nowMilliseconds / 1000))
        return (verdict, evidence)
    }

    /// Builds and validates the path, runs the checks and caches the verdict under `key`. Any thread.
    func validate(chain: [[UInt8]], stapled: [UInt8]?, key: VerdictCache.Key?, rule: Rule, snapshot: PolicySnapshot,
                  tunnel: ConnectionFacts, source: EvidenceSource, nowMilliseconds: Int64) -> (Verdict, Evidence) {
        let now = UnixTime(seconds: nowMilliseconds / 1000)
        let generation = intermediates.generation   // before: what is learned meanwhile makes the entry stale
        let store = snapshot.store(for: rule)
        let (validation, presented) = intermediates.validateDecoding(chain: chain, store: store, at: now)
        let status = stapled.flatMap { stapledStatus($0, presented: presented, validation: validation, store: store) }
        var evidence = Evidence(connection: tunnel, validation: validation, source: source, stapled: status)
        let verdict = evaluator.evaluate(evidence, rule: rule, at: now)
        // A chain that gets an alert line gets one per connection while cached: its chain facts rendered once, kept
        // with the entry when small (typically 1.5-2.5 KB; a chain of thousands of names renders afresh each time
        // rather than double what its entry holds).
        if verdict.deciding != nil {
            let rendered = AlertRecord.render(evidence)
            if rendered.server.count + rendered.chain.count <= Self.maxRenderedBytes { evidence.rendered = rendered }
        }
        // A chain missing an issuer may validate once the pool learns it from another server: its entry holds
        // until then.
        let missingIssuer = validation.error.map { IntermediatePool.missingIssuerCodes.contains($0.opensslCode) } ?? false
        if let key {   // nil: not to be cached (see `judge`)
            cache.store(verdict, evidence: evidence, for: key, now: nowMilliseconds, poolGeneration: missingIssuer ? generation : nil)
        }
        return (verdict, evidence)
    }

    /// What a stapled OCSP response says about the validated path's leaf; nil when the path did not validate (the
    /// chain's own finding decides, and a staple about an untrusted leaf says nothing).
    private func stapledStatus(_ response: [UInt8], presented: [Certificate], validation: PathValidation,
                               store: TrustStore) -> StapledStatus? {
        guard validation.error == nil, validation.path.count >= 2 else { return nil }
        let issuerDigest = validation.path[1].sha256
        guard let leaf = presented.first,
              let issuer = presented.first(where: { $0.facts.sha256 == issuerDigest }) ?? intermediates.certificate(digest: issuerDigest)
        else { return .invalid("the leaf's issuer is not at hand to check the response") }
        return OCSPStaple.status(of: response, leaf: leaf, issuer: issuer, untrusted: presented, store: store)
    }

    /// The JA4 of a client's hello, remembered.
    func ja4(_ hello: ClientHello) -> String {
        let input = hello.ja4Input
        if let known = fingerprints.withLock({ $0[input] }) { return known }
        let fingerprint = input.fingerprint
        fingerprints.withLock { table in
            if table.count >= Self.maxFingerprints { table.removeAll() }
            table[input] = fingerprint
        }
        return fingerprint
    }

    /// Writes the tunnel's alert line: the deciding finding, with every finding listed; `marksKnownBad` when the finding
    /// marks its upstream (the line says until when, and how to clear it).
    func report(_ verdict: Verdict, evidence: Evidence?, rule: Rule, tunnel: ConnectionFacts, nowMilliseconds: Int64,
                marksKnownBad: Bool = false) {
        let counted = VerdictKey(action: verdict.deciding?.action, reason: verdict.deciding?.reason, evidence: evidence?.source)
        verdictCounts.withLock { $0[counted, default: 0] += 1 }
        guard let deciding = verdict.deciding else { return }
        let record = AlertRecord(timeMilliseconds: nowMilliseconds, connection: tunnel, finding: deciding, rule: rule,
                                 evidence: evidence, action: deciding.action, allFindings: verdict.findings,
                                 observer: observer,
                                 knownBadUntilMilliseconds: marksKnownBad ? nowMilliseconds + cache.knownBadMilliseconds : nil)
        alerts.submit(record.jsonLine)
        // The operator log gets the first of a run per upstream, reason and action, and a count with the next.
        let key = "\(deciding.action.rawValue) \(tunnel.connectHost):\(tunnel.port) \(deciding.reason.rawValue)"
        let (admitted, suppressed) = noticeThrottle.withLock { $0.admit(key, now: nowMilliseconds) }
        guard admitted else { return }
        var logger = logger
        logger[metadataKey: "tunnel.id"] = "\(tunnel.tunnelID)"
        let more = suppressed > 0 ? " (and \(suppressed) more like it since the last such line: see the alert log)" : ""
        logger.notice("\(key): \(deciding.detail)\(more)")
    }
}
