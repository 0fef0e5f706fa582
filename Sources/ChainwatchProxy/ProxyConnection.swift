import ChainwatchCore
import ChainwatchEventLoop
import Glibc
import Logging

/// One client connection, executed: owns its two sockets, its timer, its splice pumps and its inspection, and runs
/// a `ConnectionMachine` (which makes every decision) by carrying out the machine's actions and reporting what
/// happened back to it as events. Owned by its `Worker`; lives and dies on the worker's loop.
///
/// Events are queued and handled one at a time (`post`): an event that an action causes (a verdict reached while
/// bytes are fed to the inspection, a resolver that answers at once) is handled after the action that caused it,
/// never inside it.
final class ProxyConnection: ConnectionDelegate {
    let id: UInt64
    unowned let worker: Worker
    let client: Connection
    let clientAddress: SocketAddress
    private var machine: ConnectionMachine
    private var upstream: Connection?
    private var addresses: [SocketAddress] = []
    private var connectedAddress: SocketAddress?
    private var pumps: [Side: SplicePump] = [:]
    private var inspection: TunnelInspection?
    private var snapshot: PolicySnapshot?
    private lazy var timer = Timer(loop: worker.loop) { [unowned self] in self.timerFired() }
    private var lastActivity: Int64 = 0
    private var events: [ConnectionMachine.Event] = []
    /// Reused for every event's actions.
    private var actions: [ConnectionMachine.Action] = []
    /// The server stream offset up to which the inspection let bytes pass while holding (a HelloRetryRequest).
    private var passedServerBytes = 0
    private var handling = false
    /// How the connection ends, for the metrics and the access log.
    private var outcome = CloseOutcome.dropped
    /// For the access log: what is logged of the request or tunnel in progress, since `accessStart`.
    private var access = AccessState()

    init(id: UInt64, worker: Worker, client: Connection, clientAddress: SocketAddress) {
        self.id = id
        self.worker = worker
        self.client = client
        self.clientAddress = clientAddress
        machine = ConnectionMachine(limits: worker.configuration.connectionLimits)
        client.delegate = self
    }

    /// The worker's logger with this connection's metadata, built only when a line is logged: swift-log's stream
    /// handler re-renders its metadata on every set, which cost more per tunnel than parsing the request did.
    private var logger: Logger {
        var logger = worker.logger
        logger[metadataKey: "tunnel.id"] = "\(id)"
        logger[metadataKey: "source.ip"] = "\(clientAddress.ip)"
        if let target = machine.target {
            logger[metadataKey: "destination.domain"] = "\(target.host)"
            logger[metadataKey: "destination.port"] = "\(target.port)"
        }
        return logger
    }

    func start() {
        lastActivity = worker.loop.cachedMilliseconds
        post(.started)
        // The listener defers accepting until the client has sent, so its request is most likely here already.
        client.readNow()
    }

    /// Refuses before reading anything (over the connection limit).
    func refuseAtOnce(status: Int, reason: String) {
        handling = true   // what the actions cause is queued, as in `post`
        run(machine.refuseAtOnce(status: status, reason: reason))
        drainEvents()
    }

    // MARK: - Events

    /// Handles `event` now, or after the one being handled: an event an action causes waits its turn.
    func post(_ event: ConnectionMachine.Event) {
        guard !handling else { return events.append(event) }
        handling = true
        handle(event)
        drainEvents()
    }

    /// Handles the queued events, in order; the caller has set `handling`.
    private func drainEvents() {
        var next = 0
        while next < events.count {
            let event = events[next]
            next += 1
            handle(event)
        }
        if !events.isEmpty { events.removeAll(keepingCapacity: true) }
        handling = false
    }

    private func handle(_ event: ConnectionMachine.Event) {
        if case .decided(.block(let why)) = event {
            outcome = .blocked
            access.closeReason = .blocked
            access.detail = why
        }
        actions.removeAll(keepingCapacity: true)
        machine.handle(event, into: &actions)
        run(actions)   // executing an action never handles an event (they are queued), so `actions` stays put
    }

    private func connection(_ side: Side) -> Connection? { side == .client ? client : upstream }
    private func side(of connection: Connection) -> Side { connection === client ? .client : .upstream }

    func connectionDidRead(_ connection: Connection) {
        lastActivity = worker.loop.cachedMilliseconds
        post(.readable(side(of: connection), buffered: connection.input.count))
    }

    func connectionDidDrain(_ connection: Connection) {
        post(.drained(side(of: connection), queued: connection.output.count))
    }

    func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        let side = side(of: connection)
        switch event {
        case .connected:
            lastActivity = worker.loop.cachedMilliseconds
            post(.connected)
        case .endOfStream: post(.endOfStream(side))
        case .error(let code): post(.failed(side, describeErrno(code)))
        }
    }

    private func timerFired() {
        let active = max(lastActivity, pumps.values.map(\.lastActivityMilliseconds).max() ?? 0)
        post(.timerFired(idleMilliseconds: worker.loop.cachedMilliseconds - active))
    }

    // MARK: - Actions

    private func run(_ actions: [ConnectionMachine.Action]) {
        for action in actions { execute(action) }
    }

    private func execute(_ action: ConnectionMachine.Action) {
        switch action {
        case .peek(let side, let from, let max):
            guard let connection = connection(side) else { return }
            events.append(.peeked(side, connection.input.peek(from: from, max: max)))
        case .consume(let side, let count):
            connection(side)?.input.drain(count)
            if side == .client { access.moved(count, from: .client) }   // a request head, as the client sent it
        case .vet(let request, let requestLine):
            if case .forward = request { outcome = .http }
            access.request(requestLine, now: worker.loop.cachedMilliseconds)
            switch request {
            case .connect(let authority), .forward(let authority, _): access.target = authority
            }
            events.append(.vetted(vet(request, requestLine: requestLine)))
        case .resolve(let authority):
            worker.loop.resolve(host: authority.host, port: authority.port) { [self] result in
                guard machine.phase == .connecting else { return }
                switch result {
                case .success(let found):
                    // Only addresses the destination policy allows are tried; none: 403 with the reason.
                    var refusal: String?
                    addresses = found.filter { address in
                        guard let why = worker.destinations.refusal(address: address.addressBytes, port: address.port) else { return true }
                        refusal = "\(authority.host):\(authority.port) resolves to \(address.ip), \(why): not a destination"
                        return false
                    }
                    if addresses.isEmpty, let refusal { return post(.destinationRefused(refusal)) }
                    post(.resolved(addressCount: addresses.count))
                case .failure(let error):
                    post(.resolveFailed("\(error)"))
                }
            }
        case .connect(let index):
            connect(to: addresses[index])
        case .dropUpstream:
            upstream?.close()
            upstream = nil
        case .exchangeEnded:
            logAccess(kind: .http)
        case .write(let side, let bytes):
            guard let connection = connection(side) else { return }
            connection.write(bytes)
            events.append(.queued(side, connection.output.count))
            if side == .client { access.moved(bytes.count, from: .upstream) }   // heads and the proxy's own answers
        case .refused(let status, let reason):
            logger.warning("\(status) \(reason)")
            worker.stats.responded(status: status)
            outcome = .refused
            access.status = status
            access.closeReason = .refused
            access.detail = reason
        case .startInspection:
            startInspection()
        case .feedInspection(let side, let offset):
            feed(side, from: offset)
        case .relay(let side, let count, let eager):
            guard let source = connection(side), let destination = connection(side.other) else { return }
            destination.send(count, movingFrom: source.input, eager: eager)
            worker.stats.bytesCopied.add(count, ordering: .relaxed)
            access.moved(count, from: side)
            events.append(.queued(side.other, destination.output.count))
        case .setReading(let side, let on):
            guard let connection = connection(side) else { return }
            if on { connection.enableRead() } else { connection.disableRead() }
        case .setLowWatermark(let side, let bytes):
            connection(side)?.setWriteLowWatermark(bytes)
        case .splice(let side):
            splice(from: side)
        case .shutdownWrite(let side):
            connection(side)?.shutdownWrite()
        case .discardInput(let side):
            guard let connection = connection(side) else { return }
            connection.input.drain(connection.input.count)
        case .schedule(let milliseconds):
            timer.schedule(milliseconds: milliseconds)
        case .cancelTimer:
            timer.cancel()
        case .log(.info, let message):
            logger.info("\(message)")
        case .log(.warning, let message):
            logger.warning("\(message)")
        case .close(let resetting):
            if machine.closedIdle { access.closeReason = .idle }
            if !resetting.isEmpty, access.closeReason == .closed { access.closeReason = .reset }
            for side in resetting { connection(side)?.abort() }
            close()
        }
    }

    private func connect(to address: SocketAddress) {
        let connection: Connection
        do {
            connection = try Connection(loop: worker.loop)
        } catch {
            events.append(.connectFailed(.failed("\(error)")))
            return
        }
        upstream = connection
        connectedAddress = address
        connection.delegate = self
        if !connection.connect(to: address) {
            let code = errno
            connection.close()
            upstream = nil
            events.append(.connectFailed(.failed(describeErrno(code))))
        }
    }

    private func splice(from side: Side) {
        guard let source = connection(side), let destination = connection(side.other),
              let pump = SplicePump(loop: worker.loop, from: source, to: destination, onMoved: { [weak self, stats = worker.stats] count in
                  // Weak: the pump reports after a wakeup whose end (a reset) may have closed this connection.
                  stats.bytesSpliced.add(count, ordering: .relaxed)
                  self?.access.moved(count, from: side)
              }, onEnd: { [unowned self] end in
                  self.pumpEnded(side, end)
              }) else {
            events.append(.spliceEnded(from: side, .unavailable))
            return
        }
        pumps[side] = pump
        pump.start()
    }

    private func pumpEnded(_ side: Side, _ end: SplicePump.End) {
        switch end {
        case .idle:
            lastActivity = max(lastActivity, pumps[side]?.lastActivityMilliseconds ?? 0)
            pumps[side] = nil
            post(.spliceEnded(from: side, .idle))
        case .endOfStream:
            post(.spliceEnded(from: side, .endOfStream))
        case .error(let code):
            post(.spliceEnded(from: side, .error(describeErrno(code))))
        }
    }

    /// Closes both sides and leaves the worker. Idempotent.
    private func close() {
        guard client.isOpen || upstream != nil else { return }
        if access.requestLine != nil {   // a request (or tunnel) in progress; a keep-alive client idle between requests has none
            logAccess(kind: outcome == .refused ? .refused : (outcome == .http ? .http : .tunnel))
        }
        inspection?.abandon()
        inspection = nil
        timer.cancel()
        for pump in pumps.values { pump.close() }
        pumps.removeAll()
        client.close()
        upstream?.close()
        upstream = nil
        worker.stats.closed(outcome)
        worker.connectionClosed(self)
    }
}

extension ProxyConnection {
    // MARK: - Access log

    /// What the access line of the request or tunnel in progress says so far.
    struct AccessState {
        /// The request line (split only when a line is written: most proxies run without an access log).
        var requestLine: String?
        /// The request's upstream (the machine forgets it when an exchange ends, before the line is written).
        var target: Authority?
        var started: Int64 = 0
        var status: Int?
        var fromClient = 0
        var toClient = 0
        var closeReason = AccessRecord.CloseReason.closed
        var detail: String?

        mutating func request(_ line: String, now: Int64) {
            requestLine = line
            started = now
        }

        /// The method, and the target unless it is a CONNECT's (the destination says that one).
        var methodAndURL: (method: String?, url: String?) {
            guard let parts = requestLine?.split(separator: " ", maxSplits: 1) else { return (nil, nil) }
            let method = parts.first.map(String.init)
            return (method, parts.count == 2 && method != "CONNECT" ? String(parts[1]) : nil)
        }

        /// Bytes the client sent (request heads and bodies, tunnel bytes), or that it was sent.
        mutating func moved(_ count: Int, from side: Side) {
            if side == .client { fromClient += count } else { toClient += count }
        }
    }

    /// Writes the access line of the request or tunnel in progress (when there is an access log), then starts afresh
    /// for the next request on the connection.
    private func logAccess(kind: AccessRecord.Kind) {
        defer { access = AccessState() }
        guard let log = worker.inspector.accessLog, access.requestLine != nil else { return }
        let (method, url) = access.methodAndURL
        let now = worker.loop.cachedMilliseconds
        var known = inspection?.handshakeFacts ?? access.target.map { self.facts(for: $0) } ?? ConnectionFacts(connectHost: "", port: 0)
        known.upstreamIP = known.upstreamIP ?? connectedAddress?.ip
        let verdict = inspection?.outcome
        let status = access.status ?? (kind == .tunnel ? 200 : nil)
        let record = AccessRecord(endMilliseconds: now, durationMilliseconds: max(0, now - access.started), kind: kind,
                                  connection: known, method: method, url: url, status: status,
                                  bytesFromClient: access.fromClient, bytesToClient: access.toClient,
                                  verdict: verdict?.action, reason: verdict?.reason, evidence: verdict?.evidence,
                                  closeReason: access.closeReason, detail: access.detail, observer: worker.inspector.observer)
        log.submit(record.jsonLine)
    }

    // MARK: - Inspection

    private func startInspection() {
        worker.stats.tunnelsOpened.add(1, ordering: .relaxed)
        outcome = .tunnel
        guard let snapshot, let target = machine.target, let connectedAddress else { return }
        var facts = facts(for: target)
        facts.upstreamIP = connectedAddress.ip
        let inspection = TunnelInspection(inspector: worker.inspector, snapshot: snapshot, loop: worker.loop, facts: facts,
                                          upstreamAddress: connectedAddress,
                                          holdLimit: worker.configuration.connectionLimits.holdLimit) { [weak self] event in
            self?.post(event)
        }
        self.inspection = inspection
        events.append(.hold(.upstream, passingUpTo: 0))   // until the ClientHello picks the rule
        // Under a rule that holds the server's bytes, the client's wait for its whole ClientHello (for a moment at
        // most): the probe may have to go first, on an upstream connection none of them has reached.
        if inspection.holdClientBytesIfNeeded() { events.append(.hold(.client, passingUpTo: 0)) }
    }

    private func feed(_ side: Side, from offset: Int) {
        guard let inspection, let connection = connection(side) else {
            events.append(.inspected(side))
            return
        }
        let held = inspection.holdsServerBytes
        let clientHeld = inspection.holdsClientBytes
        connection.input.forEachChunk(from: offset) { chunk in
            if side == .client { inspection.clientBytes(chunk) } else { inspection.serverBytes(chunk) }
        }
        if held, !inspection.holdsServerBytes { events.append(.flowing(.upstream)) }
        if clientHeld, !inspection.holdsClientBytes, !inspection.isFinished { events.append(.flowing(.client)) }
        if side == .upstream, inspection.passableServerBytes > passedServerBytes {
            passedServerBytes = inspection.passableServerBytes
            events.append(.hold(.upstream, passingUpTo: passedServerBytes))
        }
        events.append(.inspected(side))
    }

    /// What the alert lines say about this client and `authority`, before anything is known of the handshake.
    private func facts(for authority: Authority) -> ConnectionFacts {
        ConnectionFacts(id: id, sourceIP: clientAddress.ip, sourcePort: clientAddress.port, connectHost: authority.host, port: authority.port)
    }

    /// Whether a request may go on: an upstream whose last verdict blocked gets `403` (and an alert line), and plain
    /// HTTP to a host whose rule says `https_only` is alerted or, under block, refused.
    private func vet(_ request: ProxyRequest, requestLine: String) -> ProxyRequest.Refusal? {
        let inspector = worker.inspector
        let now = worker.loop.cachedMilliseconds
        switch request {
        case .connect(let authority):
            let snapshot = inspector.policies.snapshot
            self.snapshot = snapshot
            // A mark counts only under the policy and OS trust store that made it: one set by a judgement that was
            // still in flight across a reload (its rule changed, or the OS store did) answers nobody.
            guard let bad = inspector.cache.knownBad(authority, now: now), snapshot.ruleIdentities.contains(bad.rule),
                  bad.anchors == snapshot.anchorsGeneration else { return nil }
            let rule = snapshot.policy.rule(for: authority.host, port: authority.port)
            var evidence = bad.evidence
            evidence?.source = .cache
            // The line names the evidence that marked the upstream (its handshake's version, cipher, SNI, chain), as
            // a cached verdict's line does: this connection has had no handshake.
            var facts = facts(for: authority)
            facts.serverName = evidence?.serverName
            facts.protocolVersion = evidence?.protocolVersion
            facts.cipher = evidence?.cipher
            facts.upstreamIP = evidence?.connection.upstreamIP
            inspector.report(Verdict(rule: bad.rule, findings: [bad.finding]), evidence: evidence, rule: rule, tunnel: facts,
                             nowMilliseconds: now)
            return .init(status: 403, reason: "blocked by chainwatch: \(bad.finding.reason.rawValue): \(bad.finding.detail)")
        case .forward(let authority, _):
            let rule = inspector.policies.snapshot.policy.rule(for: authority.host, port: authority.port)
            guard rule.httpsOnly else { return nil }
            let verdict = Evaluator.verdict(for: .plainHTTP(String(requestLine.prefix(200))), rule: rule)
            inspector.report(verdict, evidence: nil, rule: rule, tunnel: facts(for: authority), nowMilliseconds: now)
            guard verdict.action == .block else { return nil }
            return .init(status: 403, reason: "blocked by chainwatch: https_only: plain HTTP to \(authority.host) is not allowed")
        }
    }
}
