import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Foundation
import Logging

/// The shared part of handshake inspection: policy, verdict cache, prober and alert writer. One per process;
/// every loop's tunnels use it. Thread-safe: each member is.
public final class Inspector: Sendable {
    public let policies: PolicyStore
    public let cache: VerdictCache
    public let prober: Prober
    public let alerts: AlertWriter
    let logger: Logger
    let evaluator = Evaluator()
    /// `observer.*` of every line.
    public let observer: Observer
    /// Intermediates seen in valid chains (and loaded at start), offered when a chain misses its own.
    public let intermediates: IntermediatePool

    public init(policies: PolicyStore, cache: VerdictCache = VerdictCache(), prober: Prober, alerts: AlertWriter, logger: Logger,
                observer: Observer = Observer(hostname: ProcessInfo.processInfo.hostName),
                intermediates: IntermediatePool = IntermediatePool()) {
        self.observer = observer
        self.intermediates = intermediates
        self.policies = policies
        self.cache = cache
        self.prober = prober
        self.alerts = alerts
        self.logger = logger
    }

    /// Judges a chain (DER as presented) for a tunnel: from the cache when this rule already judged these exact
    /// certificates for this name, else by building and validating the path and running the checks.
    /// - Parameter digest: `Digest.sha256(framed: chain)` when the caller has it (a probe's result carries it).
    func judge(chain: [[UInt8]], digest: [UInt8]? = nil, rule: Rule, snapshot: PolicySnapshot, tunnel: ConnectionFacts,
               source: EvidenceSource, nowMilliseconds: Int64) -> (Verdict, Evidence) {
        let host = tunnel.hostChecked
        // No digest (OpenSSL could not allocate): judge this chain afresh and cache nothing, so it shares no entry.
        let key = (digest ?? (try? Digest.sha256(framed: chain))).map {
            VerdictCache.Key(chainHash: $0, rule: rule.identity, host: host, connectHost: tunnel.connectHost)
        }
        if let key, let entry = cache.verdict(for: key, now: nowMilliseconds),
           entry.poolGeneration.map({ $0 == intermediates.generation }) ?? true {
            var evidence = entry.evidence
            evidence.source = .cache
            evidence.connection = tunnel   // this connection's facts, not those of the one first judged
            // The protocol floor belongs to this connection, not the cached one: re-run the cheap checks.
            let verdict = tunnel.protocolVersion == entry.evidence.protocolVersion && tunnel.cipher == entry.evidence.cipher
                ? entry.verdict : evaluator.evaluate(evidence, rule: rule, at: UnixTime(seconds: nowMilliseconds / 1000))
            return (verdict, evidence)
        }
        let now = UnixTime(seconds: nowMilliseconds / 1000)
        let generation = intermediates.generation   // before: what is learned meanwhile makes the entry stale
        let validation = intermediates.validate(chain: chain, store: snapshot.store(for: rule), at: now)
        let evidence = Evidence(connection: tunnel, validation: validation, source: source)
        let verdict = evaluator.evaluate(evidence, rule: rule, at: now)
        // A chain missing an issuer may validate once the pool learns it from another server: its entry holds
        // until then.
        let missingIssuer = validation.error.map { IntermediatePool.missingIssuerCodes.contains($0.opensslCode) } ?? false
        if let key {
            cache.store(verdict, evidence: evidence, for: key, now: nowMilliseconds, poolGeneration: missingIssuer ? generation : nil)
        }
        return (verdict, evidence)
    }

    /// Writes the tunnel's alert line: the deciding finding, with every finding listed.
    func report(_ verdict: Verdict, evidence: Evidence?, rule: Rule, tunnel: ConnectionFacts, nowMilliseconds: Int64) {
        guard let deciding = verdict.deciding else { return }
        let record = AlertRecord(timeMilliseconds: nowMilliseconds, connection: tunnel, finding: deciding, rule: rule,
                                 evidence: evidence, action: deciding.action, allFindings: verdict.findings,
                                 observer: observer)
        alerts.submit(record.jsonLine)
        var logger = logger
        logger[metadataKey: "tunnel.id"] = "\(tunnel.id)"
        logger.notice("\(deciding.action.rawValue) \(tunnel.connectHost):\(tunnel.port) \(deciding.reason.rawValue): \(deciding.detail)")
    }
}
