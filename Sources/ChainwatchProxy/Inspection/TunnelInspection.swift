import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL

/// The handshake inspection of one CONNECT tunnel: feeds both directions to a `HandshakeWatch`, gets the evidence
/// it asks for (the passive chain, or a probe), judges it and reports. Loop-confined. It outlives its tunnel when a
/// probe is in flight, so evidence is judged and logged even when the client has gone.
final class TunnelInspection {
    private let inspector: Inspector
    private let snapshot: PolicySnapshot
    private let loop: EventLoop
    private var facts: ConnectionFacts
    private let upstreamAddress: SocketAddress
    /// Reads server messages up to the protocol's 16 MiB; one over 224 KiB first takes room (`makeRoom`).
    private var watch = HandshakeWatch(serverMessageLimit: TLSObserver.maxProtocolMessageLength)
    /// The memory taken for a large server handshake message (or a probe's large chain kept for this tunnel), given
    /// back at the verdict.
    private var room: LargeHandshakeRoom.Reservation?
    /// The most server bytes the machine was told it may hold (`.holdUpTo`), so it is told once per raise.
    private var holdRaisedTo = 0
    /// What the connection's machine holds without being told more (`ConnectionLimits.holdLimit`).
    private let holdLimit: Int
    /// Held and buffered beyond a large message's own bytes: the ServerHello, record headers (5 bytes per 16 KiB),
    /// the messages after it in the same flight.
    static let roomSlack = 64 * 1024
    /// Hears the verdict once, and the redial requests of a probe made first (it holds its connection weakly: a
    /// probe may answer after the connection closed).
    private let report: (ConnectionMachine.Event) -> Void
    /// Whether server bytes are held until the verdict (block rules).
    private(set) var holds: Bool
    /// Set when the verdict is in (or inspection was abandoned); the tunnel then stops feeding bytes.
    private(set) var isFinished = false
    /// The verdict reached, for the access log: its action (`pass` with no finding), deciding reason, evidence source.
    private(set) var outcome: (action: String, reason: String?, evidence: String?)?
    /// The handshake as seen so far (SNI, version, cipher).
    var handshakeFacts: ConnectionFacts { facts }

    init(inspector: Inspector, snapshot: PolicySnapshot, loop: EventLoop, facts: ConnectionFacts, upstreamAddress: SocketAddress,
         holdLimit: Int, report: @escaping (ConnectionMachine.Event) -> Void) {
        self.report = report
        self.holdLimit = holdLimit
        self.inspector = inspector
        self.snapshot = snapshot
        self.loop = loop
        self.facts = facts
        self.upstreamAddress = upstreamAddress
        let rule = snapshot.policy.rule(for: facts.connectHost, port: facts.port)
        holds = Self.holds(rule)
        ruleCache = (facts.connectHost, rule)
    }

    /// Block-like dispositions hold the server's bytes until the verdict.
    private static func holds(_ rule: Rule) -> Bool {
        rule.action == .block || rule.nonTLS == .block || rule.onProbeError == .block || rule.sniMismatch == .block
            || rule.localRoot == .block
    }

    /// The rule for the host checked, looked up once per name (the SNI, when it comes, can change it).
    private var rule: Rule {
        let host = facts.hostChecked
        if let cached = ruleCache, cached.host == host { return cached.rule }
        let rule = snapshot.policy.rule(for: host, port: facts.port)
        ruleCache = (host, rule)
        return rule
    }
    private var ruleCache: (host: String, rule: Rule)?

    /// Whether server bytes must stay in the proxy now: under a block-like rule until the verdict, and always until the
    /// ClientHello is read (its SNI may pick a stricter rule; a TLS server never speaks first, so this costs nothing).
    var holdsServerBytes: Bool { !isFinished && (holds || !watch.sawClientHello) }

    /// How many of the server's first bytes may pass while the rest is held (a HelloRetryRequest's).
    var passableServerBytes: Int { watch.passableServerBytes }

    /// Whether the client's bytes are held until its ClientHello is whole: under a rule that holds the server's
    /// bytes, the probe may have to go first on an upstream connection none of them has reached. Bounded by
    /// `clientHoldMilliseconds`: a client that sends a few TLS-looking bytes and waits is not TLS, and its bytes flow.
    private(set) var holdsClientBytes = false
    private var clientHoldDeadline: Timer?
    /// A TLS client sends its whole ClientHello at once; its segments arrive within a round trip.
    static let clientHoldMilliseconds = 1000

    /// Starts holding the client's bytes when the rule holds the server's (the executor then holds them).
    func holdClientBytesIfNeeded() -> Bool {
        guard holds, !isFinished, !watch.sawClientHello else { return false }
        holdsClientBytes = true
        let timer = Timer(loop: loop) { [weak self] in
            guard let self, holdsClientBytes else { return }
            holdsClientBytes = false
            report(.flowing(.client))
        }
        timer.schedule(milliseconds: min(Self.clientHoldMilliseconds, inspector.prober.timeoutMilliseconds))
        clientHoldDeadline = timer
        return true
    }

    private func stopHoldingClientBytes() {
        holdsClientBytes = false
        clientHoldDeadline?.cancel()
        clientHoldDeadline = nil
    }

    func clientBytes(_ chunk: UnsafeRawBufferPointer) {
        guard !isFinished, !judging || judgingFirstProbe else { return }
        let hadHello = watch.sawClientHello
        let need = watch.client(chunk)
        if let hello = watch.clientHello, facts.serverName == nil, let sni = hello.serverName {
            facts.serverName = sni
            holds = holds || Self.holds(rule)
        }
        if !hadHello, need == .moreBytes, let hello = watch.clientHello { probeFirstIfNeeded(hello) }
        if holdsClientBytes, watch.sawClientHello || need != .moreBytes { stopHoldingClientBytes() }
        if judgingFirstProbe { return }   // its verdict handles what the watch decided meanwhile
        handle(need)
    }

    func serverBytes(_ chunk: UnsafeRawBufferPointer) {
        // A chain being judged: the rest of the flight adds nothing. But while the first probe's chain is judged, the
        // tunnel's own handshake may be under way (the machine kept its connection: bytes had passed), and every byte
        // of it must reach the watch, which reads records in order: one skipped, and what follows is read from the
        // middle of a record (a genuine flight then looks short, a forged one not TLS).
        guard !isFinished, !judging || judgingFirstProbe else { return }
        if !sawServerBytes, holds, verdictDeadline == nil { startVerdictDeadline() }
        sawServerBytes = true
        let need = watch.server(chunk)
        if let hello = watch.serverHello, facts.protocolVersion == nil {
            facts.protocolVersion = hello.version
            facts.cipher = NegotiatedCipher(hello.cipherSuite)
        }
        if need == .moreBytes, let length = watch.announcedServerMessageLength,
           length > TLSObserver.maxServerHandshakeMessageLength, !makeRoom(for: length) { return }
        // The evidence is on its way or being weighed: more of the flight is all these bytes add.
        if probing || judgingFirstProbe {
            if pendingEvidence != nil { weighEvidence(flightEnded: false) }
            return
        }
        handle(need)
    }

    /// The tunnel closed before a verdict and no probe is pending: nothing more will come.
    func abandon() {
        tunnelEnded = true   // no more of the flight will come, now or after a re-probe
        verdictDeadline?.cancel()
        if pendingEvidence != nil { weighEvidence(flightEnded: false) }
        guard !isFinished, !probing, !judging else { return }
        isFinished = true
        letGoOfBuffers()
    }

    /// A server handshake message longer than a tunnel reads by default (224 KiB; real chains stop near 210 KB)
    /// is read only with room from `Inspector.largeHandshakes`, taken as soon as its header announces its length and
    /// before its bytes come: its reassembly, the chain's copy for the validator and, when the server's bytes are
    /// held, the held bytes. Without room it is `oversized_handshake`: under a hold the client gets none of it.
    /// Returns whether the inspection goes on.
    private func makeRoom(for length: Int) -> Bool {
        makeRoom((length + Self.roomSlack) * (holds ? 3 : 2), holding: holds ? length + Self.roomSlack : nil,
                 for: "the server's handshake message announces \(length) bytes")
    }

    /// Takes `bytes` of room (unless as much is held already) and, with `holding`, lets the tunnel hold that many
    /// server bytes; without room, `oversized_handshake` (what: what needed it). Returns whether the inspection goes on.
    /// The room covers the kept probe chain too, while there is one (`keptProbeBytes`).
    private func makeRoom(_ bytes: Int, holding: Int?, for what: String) -> Bool {
        let bytes = bytes + keptProbeBytes
        if let room, room.bytes >= bytes { return raiseHold(to: holding) }
        guard let granted = inspector.largeHandshakes.reserve(bytes) else {
            let rule = self.rule
            let detail = "\(what), and the room for handshakes over \(TLSObserver.maxServerHandshakeMessageLength) bytes "
                + "(--large-handshake-memory, \(inspector.largeHandshakes.capacity >> 20) MiB for all tunnels) has no \(bytes) bytes free"
            finish(Evaluator.verdict(for: .oversizedHandshake(detail), rule: rule), evidence: nil, rule: rule)
            return false
        }
        room = granted   // a smaller one taken earlier goes back
        return raiseHold(to: holding)
    }

    private func raiseHold(to bytes: Int?) -> Bool {
        if let bytes, bytes > holdRaisedTo {
            holdRaisedTo = bytes
            report(.holdUpTo(.upstream, bytes: bytes))
        }
        return true
    }

    /// After the verdict: the watch's buffers (a large Certificate message can be megabytes) and their room go.
    private func letGoOfBuffers() {
        watch.release()
        firstProbe = nil
        room?.release()
        room = nil
    }

    /// Under a hold, from the server's first byte: how long its handshake may take to show the evidence. Each byte
    /// resets the idle timer, so without this a server dripping its Certificate a byte every few seconds would hold
    /// the tunnel (and its buffers) for ever. A probe has deadlines of its own.
    private var verdictDeadline: Timer?

    private func startVerdictDeadline() {
        let timer = Timer(loop: loop) { [weak self] in
            guard let self, !isFinished, !probing, !judging else { return }   // the chain came; its judgement will
            let rule = self.rule
            let seconds = Double(inspector.prober.timeoutMilliseconds) / 1000
            finish(Evaluator.verdict(for: .noVerdict("the server's handshake did not show its chain within \(seconds) s"), rule: rule),
                   evidence: nil, rule: rule)
        }
        timer.schedule(milliseconds: inspector.prober.timeoutMilliseconds)
        verdictDeadline = timer
    }

    private var probing = false
    /// The chain of a probe made first is being judged (`probeFirstIfNeeded`): the tunnel's bytes still reach the watch.
    private var judgingFirstProbe = false
    /// A chain is being validated off the loop (`Inspector.judge`); the inspection waits for its verdict, and lives
    /// until it comes.
    private var judging = false
    /// The chain judged was over 224 KiB (read with room): its verdict is not cached, nor its upstream marked
    /// known-bad (the mark keeps the evidence, tens of thousands of names, for minutes); each tunnel is judged anew.
    private var largeChain = false
    private var sawServerBytes = false
    private var tunnelEnded = false

    /// Under a rule that holds the server's bytes for its verdict (its action or one of its dispositions is `block`),
    /// a TLS 1.3 offer with no probe result yet for it: the probe goes first, before the tunnel's own handshake, with
    /// the tunnel's upstream connection closed (`.redial`). The verdict then comes from fresh evidence as soon as the
    /// tunnel's ServerHello arrives, and a server that serves one connection at a time (`openssl s_server`, many
    /// devices) answers the probe instead of holding it in its backlog until the probe times out. A chain that blocks
    /// is blocked there and then, and the client gets no server byte; else the tunnel reconnects to the same address
    /// and its handshake is compared with the probe as usual.
    private func probeFirstIfNeeded(_ hello: ClientHello) {
        guard holds, !sawServerBytes, hello.supportedVersions.contains(.tls1_3) else { return }
        let key = ProbeKey(address: upstreamAddress, offer: ClientOffer(mirroring: hello))
        guard !inspector.prober.hasResult(for: key) else { return }
        probing = true
        report(.redial)
        inspector.prober.probe(key, on: loop) { [self] result in
            probing = false
            guard !isFinished else { return }
            let rule = self.rule
            switch result {
            case .success(let probe):
                probeJA4 = probe.ja4
                if facts.protocolVersion == nil {   // the tunnel has no ServerHello yet: what the same offer got
                    facts.protocolVersion = probe.version
                    facts.cipher = NegotiatedCipher(probe.cipher)
                }
                judgingFirstProbe = true
                judge(probe.chainDER, stapled: probe.ocspResponse, digest: probe.chainDigest, source: .probe, rule: rule) {
                    [self] verdict, evidence in
                    judgingFirstProbe = false
                    // The tunnel closed meanwhile: its verdict is this one (an alert line is not lost with it).
                    if verdict.action == .block || tunnelEnded { return finish(verdict, evidence: evidence, rule: rule) }
                    keepForThisTunnel(probe, key: key)
                    report(.reconnect)
                    // A passing chain is judged again when the tunnel's ServerHello comes (the kept result, with the
                    // hellos compared; its verdict from the cache). Had the machine kept the connection (bytes had
                    // passed), the server may have answered meanwhile.
                    if let decided = watch.decided { handle(decided) }
                }
            case .failure, .oversized:
                let verdict = Evaluator.verdict(for: Self.noChain(result), rule: rule)
                if verdict.action == .block { return finish(verdict, evidence: nil, rule: rule) }
                report(.reconnect)
                finish(verdict, evidence: nil, rule: rule)   // a failed probe a rule lets through is reported now
            }
        }
    }

    /// The first probe's result, kept for this tunnel's ServerHello (the prober's cache may not keep it: a chain over
    /// the 512 KiB a probe reads by default is never cached, and the cache's bounds may drop any result). Without it
    /// the tunnel would need a second probe while it holds its own upstream connection, and a server that serves one
    /// connection at a time leaves that probe waiting until it times out: a genuine chain blocked as `probe_failed`.
    private var firstProbe: (key: ProbeKey, probe: ProbeChain)?
    /// The room a kept chain over 512 KiB takes while it waits or is weighed (part of `room`, with any held bytes).
    private var keptProbeBytes = 0

    /// A result the prober would cache is shared with it (no copy); a larger one takes room first, and the server
    /// then has the verdict deadline, from now, to show its handshake: a server that took the reconnect and sends
    /// nothing (its client keeping the tunnel open with a byte now and then) does not hold the room longer. Without
    /// room, the tunnel probes again, as before.
    private func keepForThisTunnel(_ probe: ProbeChain, key: ProbeKey) {
        let chainBytes = probe.chainDER.reduce(0) { $0 + $1.count }
        if chainBytes > TLSClient.defaultMaxCertificateList {
            guard room == nil, let granted = inspector.largeHandshakes.reserve(chainBytes + Self.roomSlack) else { return }
            room = granted
            keptProbeBytes = granted.bytes
            verdictDeadline?.cancel()   // one started at an earlier server byte may have fired while the probe ran
            startVerdictDeadline()
        }
        firstProbe = (key, probe)
    }

    /// The one key type, RSA or ECDSA (`.ec`), a ClientHello leaves the server: signature algorithms of one and none
    /// of the other (and, for TLS 1.2, cipher suites that authenticate with one of them only); nil when it leaves both.
    /// A server with an RSA and an ECDSA certificate answers such a client with the chain it keeps for that type,
    /// which may fail pins the other passes: a block verdict on a leaf of the type the client picked blocks that
    /// tunnel, but does not speak for the host, and marks it known-bad for no one (one legacy RSA-only client would
    /// otherwise have every client refused `403` for five minutes).
    static func onlyKeyType(offeredBy hello: ClientHello, version: TLSVersion?) -> CertificateFacts.KeyType? {
        let ecdsaSchemes: Set<UInt16> = [0x0403, 0x0503, 0x0603, 0x0203]
        let rsaSchemes: Set<UInt16> = [0x0401, 0x0501, 0x0601, 0x0201, 0x0804, 0x0805, 0x0806, 0x0809, 0x080A, 0x080B]
        func one(_ ecdsa: Bool, _ rsa: Bool) -> CertificateFacts.KeyType? { ecdsa == rsa ? nil : ecdsa ? .ec : .rsa }
        let schemes = hello.signatureAlgorithms
        if !schemes.isEmpty,
           let type = one(schemes.contains(where: ecdsaSchemes.contains), schemes.contains(where: rsaSchemes.contains)) {
            return type
        }
        guard let version, version < .tls1_3 else { return nil }
        let names = hello.cipherSuites.compactMap(\.name)
        return one(names.contains { $0.contains("_ECDSA_") }, names.contains { $0.contains("_RSA_") })
    }

    /// Why a probe brought no chain, as the evaluator's input.
    private static func noChain(_ result: ProbeResult) -> TunnelEvent {
        switch result {
        case .oversized(let detail): .oversizedHandshake(detail)
        case .failure(let reason): .probeFailed(reason)
        case .success: .probeFailed("no chain")
        }
    }

    /// Judges a chain through `Inspector.judge` (off the loop unless its verdict is cached), then `then` on this loop,
    /// unless the inspection finished meanwhile. No tunnel bytes are fed to the watch in between.
    private func judge(_ chain: [[UInt8]], stapled: [UInt8]?, digest: [UInt8]?, source: EvidenceSource, rule: Rule,
                       then: @escaping (Verdict, Evidence) -> Void) {
        judging = true
        largeChain = chain.reduce(0) { $0 + $1.count } > TLSObserver.maxServerHandshakeMessageLength
        inspector.judge(chain: chain, stapled: stapled, digest: digest, rule: rule, snapshot: snapshot, tunnel: facts,
                        source: source, nowMilliseconds: loop.cachedMilliseconds, on: loop) { [self] verdict, evidence in
            judging = false
            guard !isFinished else { return }
            then(verdict, evidence)
        }
    }

    private func handle(_ need: HandshakeWatch.Need) {
        switch need {
        case .moreBytes:
            return
        case .notTLS(let detail):
            let rule = self.rule
            finish(Evaluator.verdict(for: .notTLS(detail), rule: rule), evidence: nil, rule: rule)
        case .malformedHandshake(let detail):
            let rule = self.rule
            finish(Evaluator.verdict(for: .malformedHandshake(detail), rule: rule), evidence: nil, rule: rule)
        case .oversizedHandshake(let detail):
            let rule = self.rule
            finish(Evaluator.verdict(for: .oversizedHandshake(detail), rule: rule), evidence: nil, rule: rule)
        case .chain(let ders):
            let rule = self.rule
            judge(ders, stapled: watch.stapledOCSP, digest: nil, source: .passive, rule: rule) { [self] verdict, evidence in
                finish(verdict, evidence: evidence, rule: rule)
            }
        case .probe(let offer):
            probing = true
            probe(ProbeKey(address: upstreamAddress, offer: offer), fresh: false)
        }
    }

    /// Gets the probe evidence for this tunnel and judges it. A probe whose ServerHello or encrypted flight size
    /// disagrees with the tunnel's does not cover the tunnel (an interceptor spared the probe, or forges only since
    /// the probe was cached): it is dropped from the cache and made again; a tunnel that still disagrees with a fresh
    /// probe is a finding.
    private func probe(_ key: ProbeKey, fresh: Bool) {
        if fresh { keptProbeBytes = 0 }   // a kept result is dropped for the fresh one
        if !fresh, let kept = firstProbe, kept.key == key {   // made for this tunnel just before its handshake
            firstProbe = nil
            probeJA4 = kept.probe.ja4
            pendingEvidence = (key, kept.probe, false)
            return weighEvidence(flightEnded: false)
        }
        inspector.prober.probe(key, on: loop) { [self] result in   // keeps the inspection alive until it answers
            switch result {
            case .success(let probe):
                probeJA4 = probe.ja4
                pendingEvidence = (key, probe, fresh)
                weighEvidence(flightEnded: false)
            case .failure, .oversized:
                probing = false
                let rule = self.rule
                finish(Evaluator.verdict(for: Self.noChain(result), rule: rule), evidence: nil, rule: rule)
            }
        }
    }

    /// A probe result waiting to be weighed against the tunnel: its key, the result, whether it is fresh.
    private var pendingEvidence: (key: ProbeKey, probe: ProbeChain, fresh: Bool)?
    /// How long the tunnel's encrypted flight may take to reach the probe's size (a genuine server sends it with its
    /// ServerHello): then what came is what is compared.
    private var flightDeadline: Timer?

    /// Compares the tunnel with the pending probe result: the hellos at once, the encrypted flight once the tunnel has
    /// shown enough of it (or its deadline passed, or the tunnel ended); then the verdict, a re-probe, or a mismatch.
    private func weighEvidence(flightEnded: Bool) {
        guard let (key, probe, fresh) = pendingEvidence, !isFinished else { return }
        var difference = disagreement(with: probe)
        if difference == nil, let tunnelHello = watch.serverHello, let clientHello = watch.clientHello, tunnelHello.version >= .tls1_3,
           let probeClient = probe.parsedClientHello {
            // A tunnel whose bytes flowed and that ended with its flight short of the probe's, every record so far
            // alike, is judged by the probe: its client saw the flight and went away mid-handshake (OpenSSL's client
            // does as soon as a Certificate passes its 100 KiB, or when it refuses the chain), and completed no
            // handshake on it. A held tunnel's client saw nothing: one that ends short was given up on because the
            // server stalled, and that is a difference, as is a record of another length, and a flight that stops
            // short while the tunnel stays open (at the flight deadline).
            switch FlightAgreement.compare(tunnel: watch.serverFlight, tracking: watch.serverFlightTracking,
                                           flightEnded: flightEnded || (tunnelEnded && holds),
                                           probe: probe.flight, serverHello: tunnelHello, clientHello: clientHello,
                                           probeClientHello: probeClient) {
            case .needsMoreRecords where tunnelEnded && !holds:
                break
            case .needsMoreRecords:
                // The tunnel's flight must be able to reach the probe's size while it is held: past the 256 KiB a
                // tunnel holds by default (a Certificate over 224 KiB), it takes room for the held bytes.
                let flightBytes = probe.flight.recordLengths.reduce(0) { $0 + 5 + $1 } + Self.roomSlack
                if holds, flightBytes > holdLimit,
                   !makeRoom(flightBytes, holding: flightBytes, for: "the probe's encrypted flight is \(flightBytes) bytes") {
                    pendingEvidence = nil
                    probing = false
                    return
                }
                if flightDeadline == nil {
                    let timer = Timer(loop: loop) { [weak self] in self?.weighEvidence(flightEnded: true) }
                    timer.schedule(milliseconds: inspector.prober.timeoutMilliseconds)
                    flightDeadline = timer
                }
                return
            case .differs(let detail): difference = detail
            case .agrees, .undecidable: break
            }
        }
        pendingEvidence = nil
        flightDeadline?.cancel()
        flightDeadline = nil
        let rule = self.rule
        if let difference {
            guard fresh else {
                inspector.prober.invalidate(key)
                return self.probe(key, fresh: true)
            }
            probing = false
            let detail = "the tunnel's handshake differs from chainwatch's own with the same offer: \(difference)"
            return finish(Evaluator.verdict(for: .evidenceMismatch(detail), rule: rule), evidence: nil, rule: rule)
        }
        probing = false
        judge(probe.chainDER, stapled: probe.ocspResponse, digest: probe.chainDigest, source: .probe, rule: rule) {
            [self] verdict, evidence in finish(verdict, evidence: evidence, rule: rule)
        }
    }

    /// What the tunnel's ServerHello shows that the probe's, made with the same offer, does not. The probe's own
    /// hellos are OpenSSL's bytes, not a peer's: one that cannot be parsed is a fault of chainwatch's, and the tunnel is
    /// then judged by the probe's chain alone (logged).
    private func disagreement(with probe: ProbeChain) -> String? {
        guard let tunnelHello = watch.serverHello, let clientHello = watch.clientHello else { return nil }
        guard let probeHello = probe.parsedServerHello, let probeClient = probe.parsedClientHello else {
            inspector.logger.error("probe \(upstreamAddress): its own hellos cannot be parsed; ServerHellos not compared")
            return nil
        }
        return EvidenceAgreement.disagreement(tunnel: tunnelHello, probe: probeHello, client: clientHello, probeClient: probeClient)
    }

    /// The JA4 of the probe's own ClientHello, for an alert line.
    private var probeJA4: String?

    private func finish(_ verdict: Verdict, evidence: Evidence?, rule: Rule) {
        guard !isFinished else { return }
        isFinished = true
        stopHoldingClientBytes()   // the verdict releases or closes both sides
        verdictDeadline?.cancel()
        verdictDeadline = nil
        if verdict.deciding != nil {   // fingerprints only for alert lines: two SHA-256 each
            facts.clientJA4 = watch.clientHello.map(inspector.ja4)
            facts.probeJA4 = probeJA4
        }
        let now = loop.cachedMilliseconds
        outcome = (verdict.deciding?.action.rawValue ?? "pass", verdict.deciding?.reason.rawValue, evidence?.source.rawValue)
        inspector.report(verdict, evidence: evidence, rule: rule, tunnel: facts, nowMilliseconds: now)
        let picked = watch.clientHello.flatMap { Self.onlyKeyType(offeredBy: $0, version: facts.protocolVersion) }
        // Before the decision reaches the connection: once its client sees the verdict, the room is free for others.
        letGoOfBuffers()
        if verdict.action == .block, let deciding = verdict.deciding {
            if !largeChain, deciding.marksUpstreamBad(serverName: facts.serverName, connectHost: facts.connectHost),
               picked == nil || evidence?.validation.presented.first?.keyType != picked {
                inspector.cache.markBad(Authority(host: facts.connectHost, port: facts.port), VerdictCache.KnownBad(
                finding: deciding, ruleName: rule.name, rule: rule.identity, evidence: evidence,
                expires: now + inspector.cache.knownBadMilliseconds, anchors: snapshot.anchorsGeneration))
            }
            report(.decided(.block("\(deciding.reason.rawValue): \(deciding.detail)")))
        } else {
            report(.decided(.release))
        }
    }
}
