import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL

/// Executes the `InspectionMachine` of one CONNECT tunnel: owns its timers, the room it takes for large handshakes,
/// and the prober and validator calls; feeds the machine the tunnel's bytes and their answers, and does what it
/// says. Decides nothing. Loop-confined. It outlives its tunnel while a probe or a judgement is on its way (their
/// completions hold it), so evidence is judged and logged even when the client has gone.
final class TunnelInspection {
    private let inspector: Inspector
    private let snapshot: PolicySnapshot
    private let loop: EventLoop
    private let upstreamAddress: SocketAddress
    /// The client (`SocketAddress.clientKey`), whose share of the probe line its tunnel's probes use (`Prober.maxPerClient`).
    private let client: [UInt8]
    /// The client's stack, as its CONNECT's User-Agent names it: a spot check drawn for this client waits first for a
    /// tunnel of the same client and stack (`SpotChecker.Party`, `SpotCheckDues`).
    private let stack: UInt64
    /// This loop's spot-check timers: a tunnel that relies on a probe tells the spot checker.
    private let spotChecks: SpotCheckTimers
    private var machine: InspectionMachine
    private var timers: [InspectionMachine.Deadline: Timer] = [:]
    /// Tells the connection's machine what the inspection's machine says (it holds the connection weakly: a probe may
    /// answer after the connection closed).
    private let tellConnection: (ConnectionMachine.Event) -> Void
    /// The resources the machine asks for as it goes (the probe cache, the room), answered at once.
    private let resources: Resources
    /// The spare connection opened beside the tunnel's at its CONNECT, if any, for a probe beside it (taken once).
    private let takeSpare: () -> SpareConnection?
    /// A spot check rides beside this tunnel (`SpotChecker`): its probe is made afresh, first, on the spare, and a
    /// chain other than the cached one is judged as the check's (`SpotChecker.ended`: evidence `spot_check`), whatever
    /// becomes of the tunnel's own verdict.
    private var check: Check?
    /// Lets the client's hello go after a spot check's (kept here: a timer is freed with its owner).
    private var leadTimer: Timer?
    private struct Check {
        /// The check as the tunnel took it (`SpotChecker.takeDue`): whom it was drawn for and its times, kept when it
        /// is given back.
        var due: SpotChecker.Due
        /// Made, or given back for the next tunnel (`giveBackCheck`).
        var settled = false
    }

    /// When the inspection began (the tunnel's upstream connection established), and how long after it the client's
    /// first bytes came: what a spot check made alone waits before its hello (`HelloDelays`).
    private let openedNanoseconds = MonotonicClock.nanoseconds()
    private var helloDelayMicroseconds: Int64?
    /// When the server's HelloRetryRequest came, how long the client took to answer it, and the key this tunnel relied
    /// on: both delays go to that key's checks as a pair, once the handshake has shown whether a retry came and how it
    /// was answered (`recordDelays`).
    private var retryNanoseconds: UInt64?
    private var retryDelayMicroseconds: Int64?
    private var reliedOn: ProbeKey?
    private var delaysRecorded = false

    init(inspector: Inspector, snapshot: PolicySnapshot, loop: EventLoop, facts: ConnectionFacts, upstreamAddress: SocketAddress,
         client: [UInt8], stack: UInt64, spotChecks: SpotCheckTimers, spotCheck: SpotChecker.Due? = nil, holdLimit: Int,
         takeSpare: @escaping () -> SpareConnection? = { nil }, spareIsOpen: @escaping () -> Bool = { false },
         tellConnection: @escaping (ConnectionMachine.Event) -> Void) {
        check = spotCheck.map { Check(due: $0) }
        self.client = client
        self.stack = stack
        self.takeSpare = takeSpare
        self.spotChecks = spotChecks
        self.inspector = inspector
        self.snapshot = snapshot
        self.loop = loop
        self.upstreamAddress = upstreamAddress
        self.tellConnection = tellConnection
        resources = Resources(prober: inspector.prober, address: upstreamAddress, room: inspector.largeHandshakes,
                              carriesCheck: spotCheck != nil, spareIsOpen: spareIsOpen)
        machine = InspectionMachine(policy: snapshot.policy, facts: facts, settings: .init(
            probeTimeoutMilliseconds: inspector.prober.timeoutMilliseconds, holdLimit: holdLimit,
            probeCacheChainLimit: TLSClient.defaultMaxCertificateList))
    }

    /// The handshake as seen so far (SNI, version, cipher), for the access line.
    var handshakeFacts: ConnectionFacts { machine.facts }
    /// The verdict, for the access line; nil before it (or when the tunnel ended before one was needed).
    var outcome: InspectionOutcome? { machine.outcome }
    /// Whether the client's hello has been read (a spare connection no probe took by then is of no use).
    var sawClientHello: Bool { machine.watch.sawClientHello }
    /// Whether a verdict is still on its way (a probe or a judgement the tunnel did not wait for).
    var awaitsVerdict: Bool { !machine.isFinished }
    /// Called once with the verdict and the handshake facts when it comes after the tunnel's access line was written
    /// (`ProxyConnection.writeAccess`), on this loop.
    var lateVerdict: ((InspectionOutcome?, ConnectionFacts) -> Void)?

    /// `spareOpen`: a spare connection waits beside the tunnel's, so the client's hello is held until whole.
    func start(spareOpen: Bool = false) { run(machine.start(holdingTheClientHello: spareOpen)) }

    func clientBytes(_ chunk: UnsafeRawBufferPointer) {
        if helloDelayMicroseconds == nil {
            helloDelayMicroseconds = Int64((MonotonicClock.nanoseconds() &- openedNanoseconds) / 1000)
        } else if let retry = retryNanoseconds {   // the client's answer to the server's HelloRetryRequest
            retryNanoseconds = nil
            retryDelayMicroseconds = Int64((MonotonicClock.nanoseconds() &- retry) / 1000)
            recordDelays()
        }
        run(machine.clientBytes(chunk, resources))
    }

    /// This tunnel's hello delays, for the checks of the key it relied on, once known: with a HelloRetryRequest, when
    /// the client has answered it; without, at the server's ServerHello (no retry can come after it).
    private func recordDelays() {
        guard !delaysRecorded, let key = reliedOn, let hello = helloDelayMicroseconds else { return }
        if machine.watch.sawHelloRetry {
            guard let retry = retryDelayMicroseconds else { return }
            spotChecks.recordDelays(key, HelloDelays.Sample(hello: hello, retry: retry))
        } else {
            guard machine.watch.serverHello != nil else { return }
            spotChecks.recordDelays(key, HelloDelays.Sample(hello: hello))
        }
        delaysRecorded = true
    }

    func serverBytes(_ chunk: UnsafeRawBufferPointer) {
        let retried = machine.watch.sawHelloRetry
        run(machine.serverBytes(chunk, resources))
        if !retried, machine.watch.sawHelloRetry { retryNanoseconds = MonotonicClock.nanoseconds() }
        recordDelays()
    }

    /// The client's stream ended (the tunnel may still carry the server's bytes to it).
    func clientEnded() { run(machine.clientEnded(resources)) }

    /// The server's stream ended (the tunnel may still carry the client's bytes to it).
    func serverEnded() { run(machine.serverEnded(resources)) }

    /// The tunnel closed: what is on its way is still judged and reported.
    func tunnelClosed() { run(machine.tunnelClosed(resources)) }

    // MARK: - Actions

    private func run(_ actions: [InspectionMachine.Action]) {
        // A finding that marks its upstream says so in its line (until when, how to clear it): the mark follows it.
        let marks = actions.contains { if case .markKnownBad = $0 { true } else { false } }
        for action in actions { execute(action, marks: marks) }
    }

    private func execute(_ action: InspectionMachine.Action, marks: Bool) {
        switch action {
        case .connection(let event):
            tellConnection(event)
        case .probe(let offer, let fresh):
            if case .probingFirst = machine.phase { inspector.probesAlone.add(1, ordering: .relaxed) }
            probe(offer, fresh: fresh)
        case .pair(let offer, let probeFirst):
            // The connection's machine acts on `.reconnect` at once (a connect now); the prober starts its handshake
            // on the loop's next turn. So the probe first: the reconnect waits its turn behind the probe's start.
            if probeFirst { inspector.pairsProbeFirst.add(1, ordering: .relaxed) } else { inspector.pairsTunnelFirst.add(1, ordering: .relaxed) }
            let gate = makePairGate()
            if probeFirst {
                probe(offer, fresh: false, retryGate: gate)
                let reconnect = OnThisLoop { [weak self] in self?.tellConnection(.reconnect) }
                loop.execute { reconnect.run() }
            } else {
                tellConnection(.reconnect)
                probe(offer, fresh: false, retryGate: gate)
            }
        case .probeBeside(let offer, let probeFirst):
            // The client's bytes are held; they flow now (their hello leaves in this turn) or on the loop's next turn,
            // after the prober's start, which writes the probe's hello at once on a spare that is connected.
            let spare = takeSpare()
            if spare == nil {
                inspector.besideNoSpare.add(1, ordering: .relaxed)   // its probe connects now: a round trip behind
            } else {
                inspector.sparesHanded.add(1, ordering: .relaxed)
                if probeFirst { inspector.besideProbeFirst.add(1, ordering: .relaxed) } else { inspector.besideTunnelFirst.add(1, ordering: .relaxed) }
            }
            let gate = makePairGate()
            if probeFirst {
                let checking = probe(offer, fresh: false, spare: spare, retryGate: gate)
                if checking, spare != nil {
                    // A spot check's hello must lead the client's by more than the jitter of whoever reads the two
                    // (an interceptor's threads): the client's follows `SpotChecker.leadMilliseconds` later.
                    let release = Timer(loop: loop) { [weak self] in self?.tellConnection(.flowing(.client)) }
                    leadTimer = release
                    release.schedule(milliseconds: SpotChecker.leadMilliseconds)
                } else {
                    let release = OnThisLoop { [weak self] in self?.tellConnection(.flowing(.client)) }
                    loop.execute { release.run() }
                }
            } else {
                tellConnection(.flowing(.client))
                probe(offer, fresh: false, spare: spare, retryGate: gate)
            }
        case .releaseProbeClose:
            resources.retryGate?.releaseClose()
        case .sendProbeRetry:
            resources.retryGate?.release()
        case .sendSecondHellos(let probeFirst):
            // The first now, the other a loop turn later, whichever goes first: the gap an interceptor sees between
            // them does not tell the order. (The client's bytes flow when the connection is told: at once, or after
            // the bytes being fed now.)
            let gate = resources.retryGate
            if probeFirst {
                gate?.release()
                let flow = OnThisLoop { [weak self] in self?.tellConnection(.flowing(.client)) }
                loop.execute { flow.run() }
            } else {
                tellConnection(.flowing(.client))
                let release = OnThisLoop { gate?.release() }
                loop.execute { release.run() }
            }
        case .judge(let chain, let rule, let facts):
            let (ders, stapled, digest): ([[UInt8]], [UInt8]?, [UInt8]?) = switch chain {
            case .passive(let ders, let stapled): (ders, stapled, nil)
            case .probe(let probe): (probe.chainDER, probe.ocspResponse, probe.chainDigest)
            }
            inspector.judge(chain: ders, stapled: stapled, digest: digest, rule: rule, snapshot: snapshot, tunnel: facts,
                            source: chain.source, nowMilliseconds: loop.cachedMilliseconds, on: loop) { [self] verdict, evidence in
                run(machine.chainJudged(verdict, evidence: evidence, resources))
            }
        case .arm(let deadline, let milliseconds):
            let timer = timers[deadline] ?? Timer(loop: loop) { [weak self] in
                guard let self else { return }
                run(machine.deadlineFired(deadline, resources))
            }
            timers[deadline] = timer
            timer.schedule(milliseconds: milliseconds)
        case .cancel(let deadline):
            timers[deadline]?.cancel()
        case .releaseRoom:
            resources.releaseRoom()
        case .countPairStall:
            inspector.pairStalls.add(1, ordering: .relaxed)
        case .writeFinding(let verdict, let evidence, let rule, var facts):
            if verdict.deciding != nil {   // fingerprints only for alert lines: two SHA-256 each
                facts.clientJA4 = machine.watch.clientHello.map(inspector.ja4)
            }
            inspector.report(verdict, evidence: evidence, rule: rule, tunnel: facts, nowMilliseconds: loop.cachedMilliseconds,
                             marksKnownBad: marks)
            if let lateVerdict {
                self.lateVerdict = nil
                lateVerdict(machine.outcome, facts)
            }
        case .markKnownBad(let finding, let rule, let evidence, let facts):
            inspector.cache.markBad(Authority(host: facts.connectHost, port: facts.port), VerdictCache.KnownBad(
                finding: finding, ruleName: rule.name, rule: rule.identity, evidence: evidence?.withNames(),
                expires: loop.cachedMilliseconds + inspector.cache.knownBadMilliseconds, anchors: snapshot.anchorsGeneration))
        case .logError(let text):
            inspector.logger.error("probe \(upstreamAddress): \(text)")
        case .impossible(let text):
            inspector.logger.error("inspection of \(upstreamAddress): impossible event: \(text)")
        }
    }

    /// The gate for the second hello of this tunnel's pair's probe (`PairProbeGate`): the probe tells the machine
    /// when it holds one.
    private func makePairGate() -> PairProbeGate {
        let gate = PairProbeGate(holdsClose: machine.holds, stallMilliseconds: machine.settings.pairStallMilliseconds,
                                 holdLimit: machine.settings.holdLimit)
        gate.onHold = { [weak self] in
            guard let self else { return }
            run(machine.probeRetried(resources))
        }
        resources.retryGate = gate
        return gate
    }

    /// Returns whether this probe is the spot check the tunnel carries.
    @discardableResult
    private func probe(_ offer: ClientOffer, fresh: Bool, spare: SpareConnection? = nil, retryGate: PairProbeGate? = nil) -> Bool {
        let key = ProbeKey(address: upstreamAddress, offer: offer)
        // The spot check this tunnel carries is its first probe, made afresh: the cached result stays for the other
        // tunnels, and the check's chain is compared with it. An offer with nothing cached is a first contact (its
        // probe goes first all the same) and no check: that is given back for the next tunnel.
        var previous: ProbeResult?
        if check?.settled == false {
            previous = inspector.prober.cachedSuccess(for: key)
            if previous == nil {
                giveBackCheck()
            } else {
                check?.settled = true
                inspector.spotChecker.besideStarted()
            }
        }
        // `fresh` (a re-probe after the tunnel's flight disagreed with the cached result) handshakes whatever the cache
        // holds, as a check does; a chain replaces the cached one.
        // A re-probe (`fresh`: the tunnel's flight disagreed with the cached result) is made beside its tunnel, after
        // that tunnel's hellos: it sends its own as late as that tunnel's client sent them, not at once (a review saw
        // one answer a HelloRetryRequest in 0.02 ms right after a tunnel that took 41 ms).
        var timing = ProbeTiming()
        if fresh, let hello = helloDelayMicroseconds {
            let bound = Int64(inspector.prober.timeoutMilliseconds) * 250
            timing = ProbeTiming(helloMicroseconds: min(hello, bound), retryMicroseconds: min(retryDelayMicroseconds ?? hello, bound))
        }
        inspector.prober.probe(key, client: client, on: loop, spare: spare, fresh: fresh || previous != nil, retryGate: retryGate,
                               timing: timing) { [self] result, cached in   // keeps the inspection alive until it answers
            var result = result
            if let previous {
                let context = SpotChecker.Context(key: key, client: client, stack: stack, rule: machine.rule, snapshot: snapshot, facts: machine.facts)
                inspector.spotChecker.ended(result, cachedDigest: previous.chain?.chainDigest, context: context, inspector: inspector, loop: loop)
                // A check that got no chain costs its tunnel nothing: it is weighed against the result it would have had.
                if result.chain == nil { result = previous }
            }
            if cached, case .success = result {
                reliedOn = key
                let context = SpotChecker.Context(key: key, client: client, stack: stack, rule: machine.rule, snapshot: snapshot, facts: machine.facts)
                inspector.spotChecker.used(key, context: context, inspector: inspector, timers: spotChecks)
                recordDelays()
            }
            let answer: InspectionMachine.ProbeAnswer = switch result {
            case .success(let probe): .success(probe)
            case .failure(let reason): .failure(reason)
            case .oversized(let detail): .oversized(detail)
            }
            run(machine.probeAnswered(answer, resources))
        }
        return previous != nil
    }

    /// The spot check this tunnel took at its CONNECT will not be made on it (no TLS 1.3 hello, an offer with nothing
    /// cached, a spare that ended, the tunnel gone): it waits for the next tunnel. Once; nothing when there is none.
    func giveBackCheck() {
        guard let due = check?.due, check?.settled == false else { return }
        check?.settled = true
        inspector.spotChecker.giveBack(due, address: upstreamAddress, host: machine.facts.connectHost, now: loop.cachedMilliseconds)
    }

    /// Work for this loop's next turn (`EventLoop.execute`), run on its thread only, hence the unchecked Sendable.
    private struct OnThisLoop: @unchecked Sendable {
        let run: () -> Void
    }

    /// The probe cache and the room for large handshakes, as the machine asks for them. Owns this tunnel's room.
    final class Resources: InspectionResources {
        private let prober: Prober
        private let address: SocketAddress
        private let room: LargeHandshakeRoom
        private var reservation: LargeHandshakeRoom.Reservation?

        /// The tunnel carries a spot check: its probe is made afresh and goes first.
        private let carriesCheck: Bool
        private let spareIsOpen: () -> Bool
        /// The gate of the pair's probe, once there is a pair.
        var retryGate: PairProbeGate?
        var pairProbeHoldsItsRetry: Bool { retryGate?.attached == true }

        init(prober: Prober, address: SocketAddress, room: LargeHandshakeRoom, carriesCheck: Bool, spareIsOpen: @escaping () -> Bool) {
            self.prober = prober
            self.address = address
            self.room = room
            self.carriesCheck = carriesCheck
            self.spareIsOpen = spareIsOpen
        }

        func hasProbeResult(for offer: ClientOffer) -> Bool {
            !carriesCheck && prober.hasResult(for: ProbeKey(address: address, offer: offer))
        }

        var hasSpareConnection: Bool { spareIsOpen() }

        func otherProbes(for offer: ClientOffer) -> [any InspectionProbe] {
            prober.otherFlights(for: ProbeKey(address: address, offer: offer))
        }

        func reserveRoom(_ bytes: Int) -> Bool {
            guard let granted = room.reserve(bytes) else { return false }
            reservation = granted   // a smaller one taken earlier goes back
            return true
        }

        var roomCapacity: Int { room.capacity }

        func probeGoesFirst() -> Bool { carriesCheck || Bool.random() }

        func releaseRoom() {
            reservation?.release()
            reservation = nil
        }
    }
}
