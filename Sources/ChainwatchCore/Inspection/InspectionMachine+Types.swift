/// A probe's result as the inspection weighs it: what the same offer got from the same address. The probe engine's
/// result (`TLSClientResult`) conforms; tests make their own. The machine holds it as `any InspectionProbe`: a generic
/// machine cost every tunnel about 20 000 instructions of runtime generic-metadata lookups (its nested types, arrays
/// of its actions), a quarter of a TLS 1.3 connection's cost in callgrind.
public protocol InspectionProbe: Sendable {
    /// The negotiated version and suite.
    var version: TLSVersion { get }
    var cipher: CipherSuite { get }
    /// The JA4 of the probe's own ClientHello, for alert lines.
    var ja4: String? { get }
    /// The server's messages after the ServerHello and the encrypted records that carried them.
    var flight: FlightAgreement.ProbeFlight { get }
    /// The probe's own hellos, parsed; nil when they cannot be (then only the chain is judged).
    var parsedClientHello: ClientHello? { get }
    var parsedServerHello: ServerHello? { get }
    /// The chain as sent (DER, leaf first), the OCSP response stapled to it, and their digest when known (the verdict
    /// cache's key).
    var chainDER: [[UInt8]] { get }
    var ocspResponse: [UInt8]? { get }
    var chainDigest: [UInt8]? { get }
}

extension InspectionProbe {
    /// The bytes of the chain as sent (all certificates' DER).
    public var chainByteCount: Int { chainDER.reduce(0) { $0 + $1.count } }
}

/// What an inspection asks of the process while it runs, answered at once. Owned by the executor; the machine calls
/// it only from its events.
public protocol InspectionResources: AnyObject {
    /// Whether a probe with `offer` to the tunnel's address would be answered from the cache now.
    func hasProbeResult(for offer: ClientOffer) -> Bool
    /// Takes `bytes` of the room for large handshakes (`--large-handshake-memory`) for this tunnel, giving back what it
    /// held before. false: not that much is free (what it held stays held).
    func reserveRoom(_ bytes: Int) -> Bool
    /// The room's size for all tunnels, for the `oversized_handshake` detail.
    var roomCapacity: Int { get }
    /// A fair coin, drawn for each first contact: whether the probe's connection is opened before the tunnel's.
    /// (Always true for a tunnel that carries a spot check: its probe must be the lone hello a forger forges.)
    func probeGoesFirst() -> Bool
    /// Whether a spare connection was opened beside the tunnel's at its CONNECT (for a rule that holds nothing: a first
    /// contact; for any rule: a spot check due at the address). With one, a probe goes beside the tunnel, which keeps
    /// its connection, under any rule.
    var hasSpareConnection: Bool { get }
    /// Earlier probe results for `offer` at the tunnel's address whose flights differed from the newest one's, newest
    /// first: the members of a pool behind one address that answer the same offer differently. Each is judged by its
    /// own chain when a tunnel's flight is one of theirs.
    func otherProbes(for offer: ClientOffer) -> [any InspectionProbe]
    /// Whether the probe of this tunnel's pair (`.pair`, `.probeBeside`) is its own handshake, which holds a second
    /// hello after a HelloRetryRequest until told (`probeRetried`, `.sendProbeRetry`); false for a probe the tunnel
    /// only waits for (one already in flight for its key, or in line for a slot).
    var pairProbeHoldsItsRetry: Bool { get }
}

extension InspectionResources {
    public var hasSpareConnection: Bool { false }
    public var pairProbeHoldsItsRetry: Bool { false }
    public func otherProbes(for offer: ClientOffer) -> [any InspectionProbe] { [] }
}

extension InspectionMachine {
    // MARK: - Deadlines

    mutating func stopHoldingClientBytes(_ out: inout [Action]) {
        holdsClientBytes = false
        cancel(.clientHello, &out)
    }

    mutating func startVerdictDeadline(_ out: inout [Action]) {
        verdictDeadlineStarted = true
        arm(.verdict, settings.probeTimeoutMilliseconds, &out)
    }

    mutating func arm(_ deadline: Deadline, _ milliseconds: Int, _ out: inout [Action]) {
        armed.insert(deadline)
        out.append(.arm(deadline, milliseconds: milliseconds))
    }

    mutating func cancel(_ deadline: Deadline, _ out: inout [Action]) {
        guard armed.remove(deadline) else { return }
        out.append(.cancel(deadline))
    }

    /// The verdict, once decided (nil before, and when the tunnel ended before one was needed).
    public var outcome: InspectionOutcome? {
        if case .finished(let outcome) = phase { return outcome }
        return nil
    }

    public var isFinished: Bool {
        if case .finished = phase { return true }
        return false
    }

    /// The settings an inspection runs with.
    public struct Settings: Sendable, Hashable {
        /// `--probe-timeout`: a probe's deadline, and the verdict and flight deadlines.
        public var probeTimeoutMilliseconds: Int
        /// What the connection's machine holds without being told more (`ConnectionLimits.holdLimit`).
        public var holdLimit: Int
        /// The largest chain a probe keeps in the prober's cache (512 KiB): a larger one is kept for its tunnel with room.
        public var probeCacheChainLimit: Int

        public init(probeTimeoutMilliseconds: Int, holdLimit: Int, probeCacheChainLimit: Int) {
            self.probeTimeoutMilliseconds = probeTimeoutMilliseconds
            self.holdLimit = holdLimit
            self.probeCacheChainLimit = probeCacheChainLimit
        }

        /// A TLS client sends its whole ClientHello at once; its segments arrive within a round trip.
        public var clientHoldMilliseconds: Int { min(1000, probeTimeoutMilliseconds) }

        /// At first contact, how long after the tunnel's server answered the probe may go unanswered before the
        /// tunnel gives the server up to it (`pairStall`): a server that serves one connection at a time answers the
        /// other only once the first is closed. A tenth of the probe timeout, 200 ms to 1 s (500 ms by default).
        public var pairStallMilliseconds: Int { max(200, min(1000, probeTimeoutMilliseconds / 10)) }

        /// At first contact, how long one connection of the pair waits for the other's HelloRetryRequest: the server
        /// sends both at about the same moment, whatever its distance, unless it serves one connection at a time.
        public var otherRetryMilliseconds: Int { min(100, pairStallMilliseconds) }
    }

    /// Where the inspection stands; each phase carries what means something in it.
    public enum Phase: Sendable {
        /// Reading the hellos; no evidence asked for yet.
        case watching
        /// First contact: the tunnel's upstream connection was dropped (`.redial`) and opened again together with
        /// the probe's (`.pair`, in an order drawn at random), each sending its hello; the tunnel's server bytes are
        /// held until the probe answers.
        indirect case pairing(ClientOffer)
        /// Probe first: the upstream connection was dropped (`.redial`) and the probe with the client's offer runs
        /// (after a pair whose probe stalled behind the tunnel's connection).
        indirect case probingFirst(ClientOffer)
        /// Probe first: its chain is judged (under `rule`); the tunnel's own bytes still reach the watch.
        indirect case judgingFirstProbe(ClientOffer, Probe, rule: Rule)
        /// The probe for the tunnel's offer runs; `fresh`: a re-probe after the tunnel differed from a cached result.
        indirect case probing(ClientOffer, fresh: Bool)
        /// A probe's result is weighed against the tunnel's ServerHello and encrypted flight (the flight deadline
        /// starts once per result, when the flight falls short).
        indirect case weighing(ClientOffer, Probe, fresh: Bool, flightDeadlineStarted: Bool)
        /// A chain (the tunnel's own, or a probe's that agreed) is judged under `rule`.
        indirect case judging(rule: Rule)
        /// Done: the verdict (nil when the tunnel ended before one was needed).
        case finished(InspectionOutcome?)

        public var name: String {
            switch self {
            case .watching: "watching"
            case .pairing: "pairing"
            case .probingFirst: "probingFirst"
            case .judgingFirstProbe: "judgingFirstProbe"
            case .probing: "probing"
            case .weighing: "weighing"
            case .judging: "judging"
            case .finished: "finished"
            }
        }
    }

    /// Whether a tunnel under `rule` may get a spare connection beside its own at the CONNECT (`SpareLedger` says
    /// whether its client has had one to that address lately): a rule that holds nothing probes beside the tunnel at
    /// first contact (`.probeBeside`), and the spare lets that probe's hello leave with the client's. A rule that
    /// holds the server's bytes pairs two fresh connections instead (`.pair`).
    public static func wantsSpareConnection(rule: Rule) -> Bool {
        !holds(rule)
    }

    /// Block-like dispositions hold the server's bytes until the verdict.
    public static func holds(_ rule: Rule) -> Bool {
        rule.action == .block || rule.nonTLS == .block || rule.onProbeError == .block || rule.sniMismatch == .block
            || rule.localRoot == .block
    }

    /// Why a probe brought no chain, as the evaluator's input.
    static func noChain(_ answer: ProbeAnswer) -> TunnelEvent {
        switch answer {
        case .oversized(let detail): .oversizedHandshake(detail)
        case .failure(let reason): .probeFailed(reason)
        case .success: .probeFailed("no chain")
        }
    }

    /// What the tunnel's ServerHello shows that the probe's, made with the same offer, does not. The probe's own
    /// hellos are chainwatch's bytes, not a peer's: one that cannot be parsed is a fault of chainwatch's, and the
    /// tunnel is then judged by the probe's chain alone (logged).
    func disagreement(with probe: Probe, _ out: inout [Action]) -> String? {
        guard let tunnelHello = watch.serverHello, let clientHello = watch.clientHello else { return nil }
        guard let probeHello = probe.parsedServerHello, let probeClient = probe.parsedClientHello else {
            out.append(.logError("the probe's own hellos cannot be parsed; ServerHellos not compared"))
            return nil
        }
        return EvidenceAgreement.disagreement(tunnel: tunnelHello, probe: probeHello, client: clientHello, probeClient: probeClient)
    }

    /// Deadlines as bits (a `Set` hashed and allocated on every tunnel).
    struct DeadlineSet: Sendable {
        private var bits: UInt8 = 0
        mutating func insert(_ deadline: Deadline) { bits |= Self.bit(deadline) }
        /// Removes `deadline`; whether it was there.
        mutating func remove(_ deadline: Deadline) -> Bool {
            defer { bits &= ~Self.bit(deadline) }
            return bits & Self.bit(deadline) != 0
        }
        private static func bit(_ deadline: Deadline) -> UInt8 {
            switch deadline {
            case .clientHello: 1
            case .verdict: 2
            case .flight: 4
            case .pairStall: 8
            case .retryGate: 16
            }
        }
    }

    /// The timers an inspection runs, each armed and cancelled by name.
    public enum Deadline: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// How long the client's bytes are held for its whole ClientHello (a TLS client sends it at once).
        case clientHello
        /// Under a hold, from the server's first byte: how long its handshake may take to show the evidence.
        case verdict
        /// How long the tunnel's encrypted flight may take to reach the probe's size.
        case flight
        /// At first contact, from the tunnel's server's first byte: how long the paired probe may go unanswered
        /// (`Settings.pairStallMilliseconds`).
        case pairStall
        /// At first contact, a pair's second hellos: how long one side waits for the other's HelloRetryRequest
        /// (`Settings.otherRetryMilliseconds`), and then for the client's second hello (`pairStallMilliseconds`).
        case retryGate

        public var description: String {
            switch self {
            case .clientHello: "clientHello"
            case .verdict: "verdict"
            case .flight: "flight"
            case .pairStall: "pairStall"
            case .retryGate: "retryGate"
            }
        }
    }

    /// A chain to judge, and where it came from.
    public enum Chain: Sendable {
        /// Read from the tunnel (TLS ≤ 1.2), with the OCSP response stapled to it.
        case passive([[UInt8]], stapled: [UInt8]?)
        /// A probe's result: its chain, staple and digest.
        case probe(Probe)

        public var source: EvidenceSource {
            if case .passive = self { return .passive }
            return .probe
        }
    }

    /// The outcome of a probe, as the machine is told it.
    public enum ProbeAnswer: Sendable {
        case success(Probe)
        /// No chain (detail: why): `probe_failed`.
        case failure(String)
        /// The chain was larger than the probe reads and there was no room: `oversized_handshake`.
        case oversized(String)
    }

    /// What the executor does for the machine, in order.
    public enum Action: Sendable, CustomStringConvertible {
        /// Tell the connection's machine (hold, flow, redial, reconnect, the decision).
        case connection(ConnectionMachine.Event)
        /// Probe the tunnel's address with `offer`; `fresh`: forget the cached result first (a re-probe). Answered by
        /// `probeAnswered`.
        indirect case probe(ClientOffer, fresh: Bool)
        /// First contact, after `.redial`: open the tunnel's upstream connection again (`.reconnect`) and probe with
        /// `offer`, starting the probe's connection first when `probeFirst`, else the tunnel's, so that their hellos
        /// leave in that order. Answered by `probeAnswered`.
        indirect case pair(ClientOffer, probeFirst: Bool)
        /// First contact under a rule that holds nothing (alert): probe with `offer` beside the tunnel, whose client
        /// bytes are held (`.hold(.client, passingUpTo: 0)` just before) until the executor lets them flow: after the
        /// probe's start when `probeFirst`, else before it, so that the two hellos leave in that order. The probe
        /// uses the spare connection opened beside the tunnel's at its CONNECT, where there is one. Answered by
        /// `probeAnswered`.
        indirect case probeBeside(ClientOffer, probeFirst: Bool)
        /// Let the pair's probe send the second hello it holds (`probeRetried`), now.
        case sendProbeRetry
        /// Both second hellos are ready: the first now (the probe's, or the client's held bytes, which flow from then
        /// on), the other on the loop's next turn, so that the gap between them is the same whichever goes first.
        case sendSecondHellos(probeFirst: Bool)
        /// Let the pair's probe send its closing flight and close (`releaseProbeClose`).
        case releaseProbeClose
        /// Judge `chain` under `rule` for a tunnel with `facts`. Answered by `chainJudged`.
        indirect case judge(Chain, rule: Rule, facts: ConnectionFacts)
        /// Start `Deadline`'s timer (answered by `deadlineFired`), or stop it.
        case arm(Deadline, milliseconds: Int)
        case cancel(Deadline)
        /// Give back the room this tunnel holds for large handshakes.
        case releaseRoom
        /// A pair's probe stalled behind the tunnel's connection (`pairStall`): counted for the operator (a server, or an
        /// interceptor, that answers one connection at a time).
        case countPairStall
        /// Count the verdict and, when it has a finding, write its alert line.
        indirect case writeFinding(Verdict, evidence: Evidence?, rule: Rule, facts: ConnectionFacts)
        /// Mark the CONNECT host's upstream known-bad (`KnownBadRule` said so).
        indirect case markKnownBad(Finding, rule: Rule, evidence: Evidence?, facts: ConnectionFacts)
        /// Something of chainwatch's own went wrong (the probe's hellos cannot be parsed): log it.
        case logError(String)
        /// An event that cannot happen in the state it came in: a fault of the executor's, logged.
        case impossible(String)

        public var description: String {
            switch self {
            case .connection(let event):
                switch event {
                case .hold(let side, let offset): "hold(\(side), \(offset))"
                case .holdUpTo(let side, let bytes): "holdUpTo(\(side), \(bytes))"
                case .flowing(let side): "flowing(\(side))"
                case .redial: "redial"
                case .reconnect: "reconnect"
                case .keepReplayCopy: "keepReplayCopy"
                case .decided(.release): "release"
                case .decided(.block(let why)): "block(\(why.prefix { $0 != ":" }))"
                case .decided(.drop): "drop"
                default: "connection(\(event))"
                }
            case .probe(_, let fresh): fresh ? "probe(fresh)" : "probe"
            case .pair(_, let probeFirst): probeFirst ? "pair(probe first)" : "pair(tunnel first)"
            case .probeBeside(_, let probeFirst): probeFirst ? "probeBeside(probe first)" : "probeBeside(tunnel first)"
            case .sendProbeRetry: "sendProbeRetry"
            case .sendSecondHellos(let probeFirst): probeFirst ? "sendSecondHellos(probe first)" : "sendSecondHellos(client first)"
            case .releaseProbeClose: "releaseProbeClose"
            case .judge(let chain, _, _): "judge(\(chain.source.rawValue))"
            case .arm(let deadline, let ms): "arm(\(deadline), \(ms))"
            case .cancel(let deadline): "cancel(\(deadline))"
            case .releaseRoom: "releaseRoom"
            case .countPairStall: "countPairStall"
            case .writeFinding(let verdict, _, _, _):
                verdict.deciding.map { "writeFinding(\($0.action.rawValue) \($0.reason.rawValue))" } ?? "writeFinding(pass)"
            case .markKnownBad(let finding, _, _, _): "markKnownBad(\(finding.reason.rawValue))"
            case .logError(let text): "logError(\(text))"
            case .impossible(let text): "impossible(\(text))"
            }
        }
    }
}

/// What an inspection decided, for the access log: the verdict's action (nil: it passed), its deciding reason and
/// the evidence source of the chain judged (nil: none was).
public struct InspectionOutcome: Sendable, Hashable {
    public var action: Action?
    public var reason: Reason?
    public var evidence: EvidenceSource?

    public init(action: Action?, reason: Reason?, evidence: EvidenceSource?) {
        self.action = action; self.reason = reason; self.evidence = evidence
    }

    /// `pass`, `alert` or `block`.
    public var actionName: String { action?.rawValue ?? "pass" }
}
