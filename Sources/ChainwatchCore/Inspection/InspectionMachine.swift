/// Decides one CONNECT tunnel's verdict: reads both directions' handshake (`HandshakeWatch`), says what evidence the
/// verdict needs and when it is complete, and what follows from it. Pure: events in, actions out, no I/O, no clock
/// (deadlines are named actions whose firing is an event). The executor (`TunnelInspection`, ChainwatchProxy) owns
/// the buffers, timers, the prober and the validator, and does what the actions say.
///
/// The phases, for a tunnel under a rule that holds the server's bytes (`block` or a block disposition):
/// ```
/// watching ─ TLS 1.3 hello, no cached probe ─► pairing ─ probe answers ─► weighing (once the tunnel's flight is in)
///    │                                            ├ tunnel's own ≤ 1.2 chain ─► judging
///    │                                            └ probe stalls behind the tunnel ─► probingFirst (redial)
///    │  probingFirst ─ chain ─► judgingFirstProbe ─ passes ─► watching (reconnect, the client's bytes replayed)
///    │       └ no chain / blocks ───────────────────────────────► finished
///    ├─ ≤ 1.2 Certificate ───────────────────────────────────────────────► judging ─────────────────► finished
///    └─ TLS 1.3 ServerHello ─► probing ─► weighing ─ agrees ─► judging; differs ─► probing(fresh) ─► weighing ─ differs (3 times) ─► finished
/// ```
/// At first contact (`pairing`) the probe and the tunnel's own connection are opened together, in an order drawn at
/// random, so an interceptor cannot tell them apart by which comes first: forging one of the two is forging the probe
/// half the time. A server that asks both to retry gets their second hellos the same way (`probeRetried`).
/// An alert rule holds nothing once the ClientHello has picked it and does not probe first. Events that come late
/// (a probe answered after the tunnel was decided) do nothing; events that cannot happen in a phase are answered
/// with `.impossible`.
public struct InspectionMachine: Sendable {
    /// A probe's result, as the machine holds it.
    public typealias Probe = any InspectionProbe

    /// Held and buffered beyond a large message's own bytes: the ServerHello, record headers (5 bytes per 16 KiB),
    /// the messages after it in the same flight.
    public static var roomSlack: Int { 64 * 1024 }

    public private(set) var phase: Phase = .watching
    /// The handshake as seen so far (SNI, version, cipher), for the alert and access lines.
    public private(set) var facts: ConnectionFacts
    /// Both directions' handshake.
    public private(set) var watch = HandshakeWatch(serverMessageLimit: TLSObserver.maxProtocolMessageLength)
    /// Whether server bytes are held until the verdict (a block-like rule for the CONNECT host or the SNI).
    public private(set) var holds: Bool
    /// Whether the client's bytes are held until its ClientHello is whole (`Deadline.clientHello` bounds it).
    public internal(set) var holdsClientBytes = false

    private let policy: Policy
    public let settings: Settings
    private var ruleCache: (host: String, rule: Rule)
    /// Deadlines armed and not yet fired or cancelled.
    var armed = DeadlineSet()
    var verdictDeadlineStarted = false
    private var sawServerBytes = false
    /// The server's bytes read on the tunnel's current upstream connection (what `passedServerBytes` is an offset in),
    /// and whether that connection's stream ended (`serverEnded`).
    private var serverStreamBytes = 0
    private var serverStreamEnded = false
    /// Whether the server's first byte was a TLS record's content type (alert, handshake, ChangeCipherSpec, data).
    private var serverSpokeTLS = false
    var tunnelEnded = false
    /// The server stream offset up to which bytes may pass while held (a HelloRetryRequest's), as last told.
    var passedServerBytes = 0
    /// A first contact whose server asks both connections to retry: the probe holds its second hello until the
    /// client's is whole, and the two leave in an order drawn at random (`probeRetried`).
    var retry = RetryPairing()
    /// The pair's probe, under a rule that holds, keeps its closing flight (and its connection) until the tunnel is
    /// decided (`.releaseProbeClose`), as silent as the tunnel's held connection.
    var pairProbeHoldsItsClose = false
    /// The most server bytes the connection was told it may hold (`.holdUpTo`), so it is told once per raise.
    private var holdRaisedTo = 0
    /// The room this tunnel holds (0: none), and the part of it a kept probe chain takes.
    private var roomBytes = 0
    private var keptProbeBytes = 0
    /// The first probe's result, kept for this tunnel's ServerHello: the prober's cache may not keep it (a chain over
    /// 512 KiB never is, and its bounds may drop any result). Without it the tunnel would need a second probe while
    /// it holds its own upstream connection, and a one-connection server leaves that probe waiting until it times out.
    private var kept: (offer: ClientOffer, probe: Probe)?
    /// Fresh probes made for this tunnel (re-probes after its flight differed).
    private var freshProbes = 0
    /// The most fresh probes one tunnel makes before its difference is a finding: a pool of two members behind a
    /// random balancer, whose other flight the prober has not kept yet, gives a false `evidence_mismatch` with
    /// probability 1/8 instead of 1/2.
    static let maxFreshProbes = 3
    /// The chain judged was over 224 KiB (read with room): its upstream is not marked known-bad.
    private var largeChain = false
    private var probeJA4: String?
    /// A pair's probe still runs while the tunnel's own evidence decided (a TLS ≤ 1.2 chain): its answer is not
    /// waited for and changes nothing.
    private var pairProbeOutstanding = false
    /// The probe went beside the tunnel (`.probeBeside`): the executor lets the client's held hello go, after or
    /// before the probe's start, not the machine.
    private var probingBeside = false

    public init(policy: Policy, facts: ConnectionFacts, settings: Settings) {
        self.policy = policy
        self.facts = facts
        self.settings = settings
        let rule = policy.rule(for: facts.connectHost, port: facts.port)
        ruleCache = (facts.connectHost, rule)
        holds = Self.holds(rule)
    }

    /// The rule that judges the tunnel (`Policy.ruleHost`: the CONNECT host's; the SNI's only for an address
    /// literal), looked up once per name.
    public var rule: Rule {
        mutating get {
            let host = Policy.ruleHost(connectHost: facts.connectHost, serverName: facts.serverName)
            if ruleCache.host == host { return ruleCache.rule }
            ruleCache = (host, policy.rule(for: host, port: facts.port))
            return ruleCache.rule
        }
    }

    // MARK: - Events

    /// The tunnel is established: server bytes are held until the ClientHello is read (for a CONNECT to an address,
    /// its SNI picks the rule; a TLS server never speaks first, so this costs nothing), and under a rule that holds
    /// them, the client's
    /// until its ClientHello is whole (the probe may have to go first, on an upstream connection none has reached).
    ///
    /// `holdingTheClientHello`: hold the client's bytes until its hello is whole under any rule (a spare connection
    /// waits beside the tunnel's, for a probe whose hello must be able to leave before the client's: a hello that
    /// came in pieces would otherwise have its first piece on the way already). A hello is no use to a server until
    /// it is whole, so this costs the client nothing.
    public mutating func start(holdingTheClientHello: Bool = false) -> [Action] {
        guard case .watching = phase, !sawServerBytes, !watch.sawClientHello else { return [.impossible("start in \(phase.name)")] }
        var out: [Action] = [.connection(.hold(.upstream, passingUpTo: 0))]
        if holds || holdingTheClientHello {
            holdsClientBytes = true
            out.append(.connection(.hold(.client, passingUpTo: 0)))
            arm(.clientHello, settings.clientHoldMilliseconds, &out)
        }
        return out
    }

    /// Client → server bytes, in order, any chunking.
    public mutating func clientBytes(_ bytes: some Collection<UInt8>, _ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        retry.clientStreamBytes += bytes.count
        switch phase {
        case .finished, .judging: return out   // decided, or a chain is judged: the rest adds nothing
        case .watching, .pairing, .probingFirst, .judgingFirstProbe, .probing, .weighing: break
        }
        let hadHello = watch.sawClientHello
        let need = watch.client(bytes)
        if holds, watch.sawClientHello, retry.clientTail.holds {
            let tail = min(bytes.count, retry.clientStreamBytes - watch.clientHelloEnd)
            if tail > 0 { retry.clientTail.feed(bytes.suffix(tail)) }
        }
        var holdsFromTheHello = false
        if !hadHello, let hello = watch.clientHello {
            if facts.serverName == nil, let sni = hello.serverName {
                facts.serverName = sni
                holdsFromTheHello = !holds && Self.holds(rule)
                holds = holds || holdsFromTheHello
            }
            if !holds { out.append(.connection(.flowing(.upstream))) }
            if need == .moreBytes { probeFirstIfNeeded(hello, resources, &out) }
        }
        // The SNI picked a rule that holds after the server had spoken (a CONNECT to an address): what it sent is held
        // as under that rule from the start, with its deadline, and what may pass (a refusal) passes.
        if holdsFromTheHello, sawServerBytes {
            if !verdictDeadlineStarted { startVerdictDeadline(&out) }
            passHelloRetry(resources, &out)
        }
        let stopsHoldingClient = holdsClientBytes && (watch.sawClientHello || need != .moreBytes)
        if stopsHoldingClient { stopHoldingClientBytes(&out) }
        if case .watching = phase, !awaitsTheHello { handle(need, resources, &out) }
        // A server that ended before this hello, for a rule the hello's SNI picked: ended again under that rule.
        if holdsFromTheHello, serverStreamEnded { serverHasEnded(resources, &out) }
        // A probe beside the tunnel: the executor lets the client's bytes flow, before or after the probe's start.
        if stopsHoldingClient, !isFinished, !(probingBeside && !hadHello) { out.append(.connection(.flowing(.client))) }
        if retry.scan != nil { scanSecondHello(bytes, resources, &out) }
        return out
    }

    /// Server → client bytes, in order, any chunking.
    public mutating func serverBytes(_ bytes: some Collection<UInt8>, _ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        switch phase {
        case .finished, .judging: return out
        case .watching, .pairing, .probingFirst, .judgingFirstProbe, .probing, .weighing: break
        }
        if !sawServerBytes, holds, !verdictDeadlineStarted { startVerdictDeadline(&out) }
        let firstServerBytes = !sawServerBytes
        if firstServerBytes, let first = bytes.first { serverSpokeTLS = (20...23).contains(first) }
        sawServerBytes = true
        serverStreamBytes += bytes.count
        let need = watch.server(bytes)
        if let hello = watch.serverHello, facts.protocolVersion == nil {
            facts.protocolVersion = hello.version
            facts.cipher = NegotiatedCipher(hello.cipherSuite)
        }
        if need == .moreBytes, let length = watch.announcedServerMessageLength,
           length > TLSObserver.maxServerHandshakeMessageLength, !makeRoom(forMessage: length, resources, &out) { return out }
        switch phase {
        case .watching:
            // What a server that speaks TLS-looking records before the client's hello decides waits for that hello
            // when its SNI picks the rule (a CONNECT to an address, a transparent connection): decided now, it would be
            // under the address's rule, never the one the hello names (a TLS ≤ 1.2 flight with RSA key exchange can be
            // sent before the hello it answers; so can a record that is no handshake, ahead of one). It is held
            // meanwhile, as any server byte before the hello is. A server that speaks first in plain text (an SMTP
            // banner) is decided at once: its client waits for it, and sends no hello.
            if awaitsTheHello { break }
            handle(need, resources, &out)
        case .pairing:
            switch need {
            case .moreBytes, .probe:
                // The tunnel's TLS 1.3 handshake, weighed once the probe answers; a probe that stays unanswered
                // waits behind this connection (under block: the tunnel that lets nothing through may give it up).
                // (Not when the probe holds a second hello: the server answered it already.)
                if firstServerBytes, retry.probe != .holds { arm(.pairStall, settings.pairStallMilliseconds, &out) }
            default:
                // Its own chain (TLS ≤ 1.2), or no handshake: that decides, and the probe is not waited for.
                pairProbeOutstanding = true
                cancel(.pairStall, &out)
                handle(need, resources, &out)
            }
        case .weighing:
            switch need {
            case .moreBytes, .probe: weigh(flightEnded: false, resources, &out)   // more of the flight
            default:
                // A pair's probe answered before the tunnel's server showed its own chain (TLS ≤ 1.2): that decides.
                cancel(.flight, &out)
                handle(need, resources, &out)
            }
        default: break   // the evidence is on its way: more of the flight is all these bytes add
        }
        passHelloRetry(resources, &out)
        // A pair's probe that holds its second hello has nothing to pair it with once the tunnel's server answered
        // without a retry (or the tunnel is decided otherwise).
        if retry.probe != .released, watch.serverHello != nil || !isPairing { endRetryPairing(&out) }
        return out
    }

    /// A HelloRetryRequest (or a refusal before any ServerHello) may pass the hold: its client needs it to go on. Not
    /// while a pair's probe is unanswered, unless the probe holds a retry of its own (`probeRetried`): the tunnel may
    /// still have to give its connection up to the probe, which it can only while nothing of its server's has
    /// reached the client.
    /// Under a rule that holds nothing there is nothing to pass (a hold told now would hold what follows it).
    mutating func passHelloRetry(_ resources: any InspectionResources, _ out: inout [Action]) {
        if isPairing, retry.probe != .holds { return holdSecondHelloIfPaired(resources, &out) }
        if holds, !isFinished, watch.passableServerBytes > passedServerBytes {
            passedServerBytes = watch.passableServerBytes
            out.append(.connection(.hold(.upstream, passingUpTo: passedServerBytes)))
        }
        holdSecondHelloIfPaired(resources, &out)
    }

    var isPairing: Bool { if case .pairing = phase { true } else { false } }

    /// The answer to `.probe`.
    public mutating func probeAnswered(_ answer: ProbeAnswer, _ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        switch phase {
        case .pairing(let offer):
            cancel(.pairStall, &out)
            endRetryPairing(&out)   // answered: it held no second hello; a client's held for it goes
            switch answer {
            case .success(let probe):
                probeJA4 = probe.ja4
                if facts.protocolVersion == nil {
                    facts.protocolVersion = probe.version
                    facts.cipher = NegotiatedCipher(probe.cipher)
                }
                // A chain the prober does not cache is this tunnel's to hold while its flight comes: with room.
                let chainBytes = probe.chainByteCount
                if chainBytes > settings.probeCacheChainLimit {
                    guard makeRoom(chainBytes + Self.roomSlack, holding: nil, for: "the probe's chain is \(chainBytes) bytes",
                                   resources, &out) else { return out }
                    keptProbeBytes = chainBytes + Self.roomSlack
                }
                phase = .weighing(offer, probe, fresh: false, flightDeadlineStarted: false)
                weigh(flightEnded: false, resources, &out)
                passHelloRetry(resources, &out)
            case .failure, .oversized:
                let rule = self.rule
                finish(Evaluator.verdict(for: Self.noChain(answer), rule: rule), evidence: nil, rule: rule, &out)
            }
        case .judging where pairProbeOutstanding, .finished:
            pairProbeOutstanding = false   // decided by the tunnel's own chain (or ended) while the probe ran
        case .probingFirst(let offer):
            let rule = self.rule
            switch answer {
            case .success(let probe):
                probeJA4 = probe.ja4
                if facts.protocolVersion == nil {   // the tunnel has no ServerHello yet: what the same offer got
                    facts.protocolVersion = probe.version
                    facts.cipher = NegotiatedCipher(probe.cipher)
                }
                judge(.probe(probe), firstProbe: offer, rule: rule, &out)
            case .failure, .oversized:
                let verdict = Evaluator.verdict(for: Self.noChain(answer), rule: rule)
                if verdict.action != .block { out.append(.connection(.reconnect)) }   // reported now, and let through
                finish(verdict, evidence: nil, rule: rule, &out)
            }
        case .probing(let offer, let fresh):
            switch answer {
            case .success(let probe):
                probeJA4 = probe.ja4
                phase = .weighing(offer, probe, fresh: fresh, flightDeadlineStarted: false)
                weigh(flightEnded: false, resources, &out)
            case .failure, .oversized:
                let rule = self.rule
                finish(Evaluator.verdict(for: Self.noChain(answer), rule: rule), evidence: nil, rule: rule, &out)
            }
        case .watching, .judgingFirstProbe, .weighing, .judging:
            out.append(.impossible("probe answered in \(phase.name)"))
        }
        return out
    }

    /// The answer to `.judge`.
    public mutating func chainJudged(_ verdict: Verdict, evidence: Evidence, _ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        switch phase {
        case .judgingFirstProbe(let offer, let probe, let rule):
            // The tunnel closed meanwhile: its verdict is this one (an alert line is not lost with it).
            if verdict.action == .block || tunnelEnded {
                finish(verdict, evidence: evidence, rule: rule, &out)
                return out
            }
            keep(probe, for: offer, resources, &out)
            out.append(.connection(.reconnect))
            phase = .watching
            // A passing chain is judged again when the tunnel's ServerHello comes (the kept result, with the hellos
            // compared; its verdict from the cache). Had the connection kept its upstream (bytes had passed), the
            // server may have answered meanwhile.
            if let decided = watch.decided { handle(decided, resources, &out) }
        case .judging(let rule):
            finish(verdict, evidence: evidence, rule: rule, &out)
        case .finished:
            break
        case .watching, .pairing, .probingFirst, .probing, .weighing:
            out.append(.impossible("chain judged in \(phase.name)"))
        }
        return out
    }

    /// An armed deadline fired.
    public mutating func deadlineFired(_ deadline: Deadline, _ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        guard armed.remove(deadline) else {
            return isFinished ? out : [.impossible("\(deadline) fired unarmed in \(phase.name)")]
        }
        switch deadline {
        case .clientHello:
            // A client that sends a few TLS-looking bytes and waits is not TLS: its bytes flow. So do its server's
            // under a rule that holds nothing and that no hello can change (they were held for the hello: a server
            // that answered with a part record of its own waited for the idle timeouts); for a CONNECT to an
            // address, whose hello's SNI may still pick a rule that holds, they wait for the hello.
            guard holdsClientBytes else { break }
            holdsClientBytes = false
            out.append(.connection(.flowing(.client)))
            if !holds, !ruleMayChange, !watch.sawClientHello, case .watching = phase { out.append(.connection(.flowing(.upstream))) }
        case .verdict:
            switch phase {
            case .watching:
                // A chain that waited for its promised staple is what the server showed in time: judged.
                if let need = watch.nothingMoreFromTheServer() { handle(need, resources, &out); break }
                let rule = self.rule
                let seconds = Double(settings.probeTimeoutMilliseconds) / 1000
                finish(Evaluator.verdict(for: .noVerdict("the server's handshake did not show its chain within \(seconds) s"), rule: rule),
                       evidence: nil, rule: rule, &out)
            default:
                break   // the evidence came (a probe or a judgement has deadlines of its own)
            }
        case .flight:
            weigh(flightEnded: true, resources, &out)
        case .pairStall:
            pairStalled(&out)
        case .retryGate:
            endRetryPairing(&out)   // the other connection's retry, or the client's second hello, did not come in time
        }
        return out
    }

    /// The tunnel's server answered and the pair's probe did not within `pairStallMilliseconds`: a server that serves
    /// one connection at a time (or an interceptor that lets one through at a time) holds the probe until the tunnel's
    /// connection closes, and the tunnel waits for the probe. The tunnel gives its connection up (`.redial`; nothing
    /// of the server's has reached the client), the probe is answered, and the tunnel connects again with its
    /// client's bytes replayed, as a probe-first tunnel does.
    ///
    /// Under a rule that holds nothing the tunnel's server bytes have passed: the stall is counted, nothing more (the
    /// probe is weighed whenever it answers).
    private mutating func pairStalled(_ out: inout [Action]) {
        guard case .pairing(let offer) = phase, !tunnelEnded else { return }
        guard holds else { return out.append(.countPairStall) }
        guard passedServerBytes == 0 else { return }
        out.append(.countPairStall)
        releaseProbeClose(&out)   // the tunnel gives its connection up: nothing left to look like
        out.append(.connection(.redial))
        watch.restartServer()
        sawServerBytes = false
        serverStreamBytes = 0
        serverStreamEnded = false
        cancel(.verdict, &out)
        verdictDeadlineStarted = false
        facts.protocolVersion = nil
        facts.cipher = nil
        phase = .probingFirst(offer)
    }

    /// The client's stream ended. Before its ClientHello was whole, no handshake will follow on this tunnel, and the
    /// inspection ends without a finding, as a tunnel that closes before its hello does. What the server sent
    /// meanwhile (held for the hello, whose server name may pick the rule) goes to the client under a rule that holds
    /// nothing (`.release`); under one that holds, nothing unjudged passes, and the tunnel closes (`.drop`: a client
    /// that has ended cannot begin a handshake, so no server bytes are owed to it, and a rule that blocks what is not
    /// TLS must not pass a server's bytes that were never classified). Without this, a server that answers the
    /// client's end with a TLS-looking record (an alert, as TLS servers send to a connection that ends before its
    /// hello) was held until the idle timeout under `alert`, its bytes never delivered, and under `block` blocked with
    /// a line at the verdict deadline: a false alarm for a client that only opened a tunnel and left.
    /// After the hello nothing changes (the server's handshake may still come, and is inspected as it does), but for
    /// one case: under a rule that holds, a client that ends after its server's HelloRetryRequest having sent nothing
    /// after its first hello will not send the second one, and without it the server shows no chain. Its tunnel
    /// closes as one that ended does (a probe on its way is still judged and reported), without waiting for the
    /// verdict deadline and a `handshake_timeout` line about a client that left. So does one that sent only alerts
    /// (refusing the retry) and compatibility ChangeCipherSpecs after its first hello (`AlertsOnly`).
    public mutating func clientEnded(_ resources: any InspectionResources) -> [Action] {
        guard !isFinished else { return [] }
        let beforeHello = !watch.sawClientHello   // still watching: a pair or a probe starts at the hello
        let leftAfterRetry = holds && watch.sawHelloRetry && watch.serverHello == nil && retry.clientTail.holds
        guard beforeHello || leftAfterRetry else { return [] }
        var out = tunnelClosed(resources)
        let why = beforeHello ? "the client ended before its hello" : "the client left after a HelloRetryRequest"
        out.append(.connection(.decided(holds ? .drop(why) : .release)))
        return out
    }

    /// The server's stream ended (its FIN; the client may still send). No more of its handshake will come on this
    /// connection, so a handshake whose server bytes are held, and whose evidence is not all in, can never complete:
    /// - Under a rule that holds, with server bytes held (past what may pass, a HelloRetryRequest's or a refusal's),
    ///   the inspection ends as when the tunnel closes (evidence on its way is still judged and reported; a TLS 1.3
    ///   flight being weighed is compared as ended, which a flight short of the probe's fails), and the tunnel closes
    ///   with nothing of the server's passed (`.drop`), unless that ending reached a verdict, which decides itself.
    ///   Before, the client waited for the verdict deadline (TLS ≤ 1.2, or no ServerHello) or the flight deadline
    ///   (TLS 1.3), and got a `handshake_timeout` line about a server that had left; an upstream reset at the same
    ///   point ended quietly at once, as this end now does.
    /// - Under a rule that holds nothing, before the client's hello (a server that spoke first, TLS-looking bytes, and
    ///   ended): what it sent goes to the client (`.release`), as no handshake can follow. Only when no server name can
    ///   change the rule: for a CONNECT to an address the hello's SNI picks it, and may pick one that holds, so that
    ///   tunnel waits for the hello (the end is applied again under the rule it picks) or the client's end.
    /// - Otherwise nothing changes: the bytes flowed, or a chain is being judged, or nothing is held.
    public mutating func serverEnded(_ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        serverStreamEnded = true
        serverHasEnded(resources, &out)
        return out
    }

    private mutating func serverHasEnded(_ resources: any InspectionResources, _ out: inout [Action]) {
        guard !isFinished, sawServerBytes else { return }
        switch phase {
        case .watching, .pairing, .probing, .weighing: break
        case .probingFirst, .judgingFirstProbe, .judging, .finished: return   // a chain is judged (or none is due)
        }
        if holds {
            guard serverStreamBytes > passedServerBytes else { return }   // nothing held: the end passes
            let ending = tunnelClosed(resources)
            if case .finished(_?) = phase { return out += ending }   // `finish` decided (a flight found short, say)
            // The tunnel closes before what the ending started (a judgement, a probe) can answer: a verdict from the
            // cache answers within the same step, and its release would pass the held bytes.
            out.append(.connection(.decided(.drop("the server ended its connection mid-handshake"))))
            return out += ending
        }
        guard !watch.sawClientHello, !ruleMayChange else { return }
        out += tunnelClosed(resources)
        out.append(.connection(.decided(.release)))
    }

    /// Whether the client's hello may still pick the rule: its SNI does for a CONNECT to an address (`Policy.ruleHost`).
    private var ruleMayChange: Bool { facts.serverName == nil && HostName.ipAddressBytes(facts.connectHost) != nil }

    /// What a server that spoke TLS-looking records first decided waits for the client's hello, whose SNI picks the
    /// rule (`serverBytes`), until the hello is whole or cannot come.
    private var awaitsTheHello: Bool {
        watch.decidedByServer && !watch.sawClientHello && !watch.clientSentNoHello && serverSpokeTLS && ruleMayChange
    }

    /// The tunnel closed: nothing more of its handshake will come, now or after a re-probe. Evidence already on its
    /// way is still judged and reported (that is exactly the interesting case); else the inspection ends quietly.
    public mutating func tunnelClosed(_ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        guard !isFinished else { return out }
        tunnelEnded = true
        cancel(.verdict, &out)
        cancel(.clientHello, &out)
        cancel(.pairStall, &out)
        endRetryPairing(&out)
        releaseProbeClose(&out)
        holdsClientBytes = false
        if case .weighing = phase { weigh(flightEnded: false, resources, &out) }
        // A TLS ≤ 1.2 chain that waited for its promised staple is all the server showed: judged, and reported.
        if case .watching = phase, let need = watch.nothingMoreFromTheServer() { handle(need, resources, &out) }
        guard case .watching = phase else { return out }   // a probe or a judgement is on its way
        phase = .finished(nil)
        for deadline in Deadline.allCases { cancel(deadline, &out) }
        letGoOfBuffers(&out)
        return out
    }

    // MARK: - Steps

    /// Under a rule that holds the server's bytes, a TLS 1.3 offer with no probe result yet (first contact): the
    /// tunnel's upstream connection, open since the CONNECT, is closed (`.redial`) and opened again together with the
    /// probe's, in an order drawn at random (`.pair`): two fresh connections to the same address, each with the same
    /// offer, whose hellos leave a moment apart. An interceptor that forges the first, or the second, of two such
    /// connections forges the probe half the time, and the probe's chain is judged before any server byte reaches
    /// the client. A server that serves one connection at a time and took the tunnel's first: `pairStalled`.
    ///
    /// A hello that sends 0-RTT data keeps the probe first, alone (`.probe`, then `.reconnect` once its chain passes):
    /// a pair that stalls replays the client's bytes to a new connection, and early data sent twice is the replay
    /// RFC 8446 §8 warns of (a server may act on it twice, or refuse the second use of its ticket).
    ///
    /// Under a rule that holds nothing (alert) the tunnel keeps its connection and nothing is held for a verdict: the
    /// probe starts at once beside it (`.probeBeside`), on the spare connection opened beside the tunnel's at the
    /// CONNECT where there is one, and the client's hello waits a loop turn at most, so that the two hellos leave in
    /// an order drawn at random. The phase is `pairing` as under block, without the stall deadline: a tunnel that
    /// lets its server's bytes through has nothing to give up. Its early data goes on the tunnel only (the probe's
    /// offer never carries it).
    ///
    /// Under a rule that holds, a spare connection (opened at the CONNECT for a spot check due at the address) is used
    /// the same way: the tunnel keeps its connection (no redial, which an interceptor could see), the probe goes
    /// beside it, and the server's bytes stay held until the flight is weighed; a stall gives the tunnel's connection
    /// up as a pair's does. A hello with 0-RTT data still goes the probe-first way (a stall would replay it).
    private mutating func probeFirstIfNeeded(_ hello: ClientHello, _ resources: any InspectionResources, _ out: inout [Action]) {
        guard !sawServerBytes, hello.supportedVersions.contains(.tls1_3) else { return }
        let offer = ClientOffer(mirroring: hello)
        guard !resources.hasProbeResult(for: offer) else { return }
        guard holds, !(resources.hasSpareConnection && !hello.offersEarlyData) else {
            phase = .pairing(offer)
            probingBeside = true
            // Under a rule that holds, a stall gives the tunnel's connection up after its hello went: keep a copy.
            if holds { out.append(.connection(.keepReplayCopy)) }
            out.append(.connection(.hold(.client, passingUpTo: 0)))
            out.append(.probeBeside(offer, probeFirst: resources.probeGoesFirst()))
            pairProbeHoldsItsClose = holds
            return
        }
        out.append(.connection(.redial))
        if hello.offersEarlyData {
            phase = .probingFirst(offer)
            out.append(.probe(offer, fresh: false))
        } else {
            phase = .pairing(offer)
            out.append(.pair(offer, probeFirst: resources.probeGoesFirst()))
            pairProbeHoldsItsClose = true
        }
    }

    private mutating func handle(_ need: HandshakeWatch.Need, _ resources: any InspectionResources, _ out: inout [Action]) {
        let event: TunnelEvent
        switch need {
        case .moreBytes: return
        case .notTLS(let detail):
            // A server that answers a ClientHello with something else: its chain cannot be judged.
            event = watch.decidedByServer && watch.sawClientHello ? .serverNotTLS(detail) : .notTLS(detail)
        case .malformedHandshake(let detail): event = .malformedHandshake(detail)
        case .oversizedHandshake(let detail): event = .oversizedHandshake(detail)
        case .chain(let ders):
            return judge(.passive(ders, stapled: watch.stapledOCSP), firstProbe: nil, rule: rule, &out)
        case .probe(let offer):
            return probe(offer, fresh: false, resources, &out)
        }
        let rule = self.rule
        finish(Evaluator.verdict(for: event, rule: rule), evidence: nil, rule: rule, &out)
    }

    /// Gets the probe evidence for this tunnel: the result kept from the probe made first, or a probe.
    private mutating func probe(_ offer: ClientOffer, fresh: Bool, _ resources: any InspectionResources, _ out: inout [Action]) {
        if fresh {
            keptProbeBytes = 0   // a kept result is dropped for the fresh one
            freshProbes += 1
        }
        if !fresh, let kept, kept.offer == offer {   // made for this tunnel just before its handshake
            self.kept = nil
            probeJA4 = kept.probe.ja4
            phase = .weighing(offer, kept.probe, fresh: false, flightDeadlineStarted: false)
            return weigh(flightEnded: false, resources, &out)
        }
        phase = .probing(offer, fresh: fresh)
        out.append(.probe(offer, fresh: fresh))
    }

    private mutating func judge(_ chain: Chain, firstProbe: ClientOffer?, rule: Rule, _ out: inout [Action]) {
        let bytes: Int
        switch chain {
        case .passive(let ders, _): bytes = ders.reduce(0) { $0 + $1.count }
        case .probe(let probe): bytes = probe.chainByteCount
        }
        largeChain = bytes > TLSObserver.maxServerHandshakeMessageLength
        if let firstProbe, case .probe(let probe) = chain {
            phase = .judgingFirstProbe(firstProbe, probe, rule: rule)
        } else {
            phase = .judging(rule: rule)
        }
        out.append(.judge(chain, rule: rule, facts: facts))
    }

    /// Keeps the first probe's result for this tunnel. A result the prober caches is shared with it; a larger one
    /// takes room first, and the server then has the verdict deadline, from now, to show its handshake (one that took
    /// the reconnect and sends nothing does not hold the room longer). Without room the tunnel probes again.
    private mutating func keep(_ probe: Probe, for offer: ClientOffer, _ resources: any InspectionResources, _ out: inout [Action]) {
        let chainBytes = probe.chainByteCount
        if chainBytes > settings.probeCacheChainLimit {
            let bytes = chainBytes + Self.roomSlack
            guard roomBytes == 0, resources.reserveRoom(bytes) else { return }
            roomBytes = bytes
            keptProbeBytes = bytes
            cancel(.verdict, &out)   // one started at an earlier server byte may have fired while the probe ran
            startVerdictDeadline(&out)
        }
        kept = (offer, probe)
    }

    /// Compares the tunnel with the probe's result being weighed: the hellos at once, the encrypted flight once the
    /// tunnel has shown enough of it (or its deadline passed, or the tunnel ended); then the probe's chain is judged,
    /// or a re-probe made, or the difference is the finding.
    private mutating func weigh(flightEnded: Bool, _ resources: any InspectionResources, _ out: inout [Action]) {
        guard case .weighing(let offer, let probe, let fresh, let flightStarted) = phase else { return }
        // A pair's probe may answer before the tunnel's server has shown its ServerHello, or while a TLS ≤ 1.2
        // ServerHello's Certificate is still to come (that chain, the tunnel's own, then decides).
        let tunnelHelloMissing = watch.serverHello == nil || (watch.serverHello!.version < .tls1_3 && watch.decided == nil)
        if tunnelHelloMissing, !tunnelEnded {
            if !flightEnded {
                if !flightStarted {
                    phase = .weighing(offer, probe, fresh: fresh, flightDeadlineStarted: true)
                    arm(.flight, settings.probeTimeoutMilliseconds, &out)
                }
                return
            }
            let rule = self.rule
            let seconds = Double(settings.probeTimeoutMilliseconds) / 1000
            return finish(Evaluator.verdict(for: .noVerdict("the server's handshake did not show its chain within \(seconds) s"), rule: rule),
                          evidence: nil, rule: rule, &out)
        }
        var difference = disagreement(with: probe, &out)
        if difference == nil, let tunnelHello = watch.serverHello, let clientHello = watch.clientHello,
           tunnelHello.version >= .tls1_3, let probeClient = probe.parsedClientHello {
            // A tunnel whose bytes flowed and that ended with its flight short of the probe's, every record so far
            // alike, is judged by the probe: its client saw the flight and left mid-handshake (OpenSSL's does once a
            // Certificate passes its 100 KiB). A held tunnel that ends short is a difference (its server stalled), as
            // is a flight still short at the flight deadline.
            switch FlightAgreement.compare(tunnel: watch.serverFlight, tracking: watch.serverFlightTracking,
                                           flightEnded: flightEnded || (tunnelEnded && holds),
                                           probe: probe.flight, serverHello: tunnelHello, clientHello: clientHello,
                                           probeClientHello: probeClient) {
            case .needsMoreRecords where tunnelEnded && !holds:
                break
            case .needsMoreRecords:
                // The tunnel's flight must be able to reach the probe's size while it is held: past what a tunnel
                // holds by default (a Certificate over 224 KiB), it takes room for the held bytes.
                let flightBytes = probe.flight.recordLengths.reduce(0) { $0 + 5 + $1 } + Self.roomSlack
                if holds, flightBytes > settings.holdLimit,
                   !makeRoom(flightBytes, holding: flightBytes, for: "the probe's encrypted flight is \(flightBytes) bytes", resources, &out) {
                    return
                }
                if !flightStarted {
                    phase = .weighing(offer, probe, fresh: fresh, flightDeadlineStarted: true)
                    arm(.flight, settings.probeTimeoutMilliseconds, &out)
                }
                return
            case .differs(let detail): difference = detail
            case .agrees, .undecidable: break
            }
        }
        cancel(.flight, &out)
        let rule = self.rule
        if let difference {
            // A probe whose hellos or flight disagree with the tunnel's does not cover it (an interceptor spared the
            // probe, or forges only since the probe was cached): it is made again; a tunnel that still disagrees
            // with a fresh probe is a finding.
            guard fresh else { return self.probe(offer, fresh: true, resources, &out) }
            // A pool of servers behind one address (members mid-rollout, or on other TLS stacks) answers one offer
            // with more than one flight, and the fresh probe may have met another member than the tunnel did (a
            // balancer that alternates gives the next connection, the fresh probe's, the other member every time).
            // An earlier probe's flight the tunnel's agrees with so far is weighed instead, and its own chain judged;
            // otherwise the address is probed afresh again, up to `maxFreshProbes`. A forger spared by the probes
            // meets them all and is the finding: each probe's chain is the server's, or a forged one, judged. A
            // flight found short at its deadline or at the tunnel's end (a stalled server, not another member's
            // flight) gets the one fresh probe: each more would wait for the deadline again.
            let others = resources.otherProbes(for: offer)
            let ended = flightEnded || (tunnelEnded && holds)
            if let other = others.first(where: { agreesSoFar(with: $0, flightEnded: ended) }) {
                // Weighed afresh: the flight deadline was cancelled above, and is armed again if more records are due.
                probeJA4 = other.ja4
                phase = .weighing(offer, other, fresh: true, flightDeadlineStarted: false)
                return weigh(flightEnded: flightEnded, resources, &out)
            }
            if freshProbes < (ended ? 1 : Self.maxFreshProbes) { return self.probe(offer, fresh: true, resources, &out) }
            let detail = "the tunnel's handshake differs from chainwatch's own with the same offer: \(difference)"
            return finish(Evaluator.verdict(for: .evidenceMismatch(detail), rule: rule), evidence: nil, rule: rule, &out)
        }
        judge(.probe(probe), firstProbe: nil, rule: rule, &out)
    }

    /// Whether the tunnel's hellos and its flight so far agree with a kept earlier probe's: `weigh`'s comparison,
    /// without acting, and stricter: a kept flight that cannot be compared (a member that pads its records) or whose
    /// hellos cannot be parsed agrees with nothing, or it would answer for any forged tunnel while it is kept.
    private func agreesSoFar(with probe: Probe, flightEnded: Bool) -> Bool {
        guard let tunnelHello = watch.serverHello, let clientHello = watch.clientHello, tunnelHello.version >= .tls1_3,
              let probeHello = probe.parsedServerHello, let probeClient = probe.parsedClientHello,
              EvidenceAgreement.disagreement(tunnel: tunnelHello, probe: probeHello, client: clientHello, probeClient: probeClient) == nil
        else { return false }
        switch FlightAgreement.compare(tunnel: watch.serverFlight, tracking: watch.serverFlightTracking, flightEnded: flightEnded,
                                       probe: probe.flight, serverHello: tunnelHello, clientHello: clientHello,
                                       probeClientHello: probeClient) {
        case .agrees, .needsMoreRecords: return true
        case .differs, .undecidable: return false
        }
    }

    /// A server handshake message longer than a tunnel reads by default (224 KiB; real chains stop near 210 KB) is
    /// read only with room, taken as soon as its header announces its length and before its bytes come: its
    /// reassembly, the chain's copy for the validator and, when the server's bytes are held, the held bytes.
    private mutating func makeRoom(forMessage length: Int, _ resources: any InspectionResources, _ out: inout [Action]) -> Bool {
        makeRoom((length + Self.roomSlack) * (holds ? 3 : 2), holding: holds ? length + Self.roomSlack : nil,
                 for: "the server's handshake message announces \(length) bytes", resources, &out)
    }

    /// Takes `bytes` of room (unless as much is held already; the kept probe chain's counts too) and, with `holding`,
    /// lets the tunnel hold that many server bytes; without room, `oversized_handshake` (what: what needed it).
    /// Returns whether the inspection goes on.
    private mutating func makeRoom(_ bytes: Int, holding: Int?, for what: String, _ resources: any InspectionResources,
                                   _ out: inout [Action]) -> Bool {
        let bytes = bytes + keptProbeBytes
        if roomBytes < bytes {
            guard resources.reserveRoom(bytes) else {
                let rule = self.rule
                let detail = "\(what), and the room for handshakes over \(TLSObserver.maxServerHandshakeMessageLength) bytes "
                    + "(--large-handshake-memory, \(resources.roomCapacity >> 20) MiB for all tunnels) has no \(bytes) bytes free"
                finish(Evaluator.verdict(for: .oversizedHandshake(detail), rule: rule), evidence: nil, rule: rule, &out)
                return false
            }
            roomBytes = bytes
        }
        if let holding, holding > holdRaisedTo {
            holdRaisedTo = holding
            out.append(.connection(.holdUpTo(.upstream, bytes: holding)))
        }
        return true
    }

    private mutating func finish(_ verdict: Verdict, evidence: Evidence?, rule: Rule, _ out: inout [Action]) {
        guard !isFinished else { return }
        holdsClientBytes = false   // the verdict releases or closes both sides
        endRetryPairing(lettingTheClientGo: false, &out)
        releaseProbeClose(&out)
        for deadline in Deadline.allCases { cancel(deadline, &out) }
        if verdict.deciding != nil { facts.probeJA4 = probeJA4 }
        let outcome = InspectionOutcome(action: verdict.deciding?.action, reason: verdict.deciding?.reason, evidence: evidence?.source)
        phase = .finished(outcome)
        out.append(.writeFinding(verdict, evidence: evidence, rule: rule, facts: facts))
        // Before the decision reaches the connection: once its client sees the verdict, the room is free for others.
        letGoOfBuffers(&out)
        if verdict.action == .block, let deciding = verdict.deciding {
            if let marking = KnownBadRule.marking(verdict, facts: facts, leafKeyType: evidence?.validation.presented.first?.keyType,
                                                  clientHello: watch.clientHello, largeChain: largeChain) {
                out.append(.markKnownBad(marking, rule: rule, evidence: evidence, facts: facts))
            }
            out.append(.connection(.decided(.block("\(deciding.reason.rawValue): \(deciding.detail)"))))
        } else {
            out.append(.connection(.decided(.release)))
        }
    }

    /// After the verdict: the watch's buffers (a large Certificate message can be megabytes) and their room go.
    private mutating func letGoOfBuffers(_ out: inout [Action]) {
        watch.release()
        kept = nil
        keptProbeBytes = 0
        if roomBytes > 0 {
            roomBytes = 0
            out.append(.releaseRoom)
        }
    }
}
