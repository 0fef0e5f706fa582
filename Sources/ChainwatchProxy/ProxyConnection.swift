import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
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
    /// What the client's shares are counted by (`SocketAddress.clientKey`: an IPv6 client by its /64), read once: held
    /// bytes, probes in flight (its inspection's), spare connections, and the spot checks drawn for it.
    let clientKey: [UInt8]
    var machine: ConnectionMachine
    var upstream: Connection?
    private var addresses: [SocketAddress] = []
    var connectedAddress: SocketAddress?
    private var pumps: [Side: SplicePump] = [:]
    var inspection: TunnelInspection?
    /// The connection opened beside the tunnel's at its CONNECT, for a first contact's probe (`SpareConnection`):
    /// handed to the inspection's probe, or closed unused once the client's hello is read (or at the close).
    var spare: SpareConnection?
    private var spareConsidered = false
    /// The spot check due at its address the tunnel carries (`SpotChecker.takeDue`): its spare is the check's, opened
    /// first, and kept out of the first-contact ledger.
    private(set) var spotCheck: SpotChecker.Due?
    var carriesSpotCheck: Bool { spotCheck != nil }
    private var spotCheckGivenBack = false
    /// The address the spot check was taken at (a retry may connect elsewhere): where it is given back.
    private var spotCheckAddress: SocketAddress?
    private var isClosed = false
    /// The client's first bytes, kept while a redialed tunnel may have to send them again (`ConnectionMachine.replayCopy`).
    private var replayBytes: [UInt8] = []
    var snapshot: PolicySnapshot?
    private lazy var timer = Timer(loop: worker.loop) { [unowned self] in self.timerFired() }
    /// A side whose head trickles in rests on this timer (`.rest`), apart from the connection's deadline.
    private var restTimer: Timer?
    private var lastActivity: Int64 = 0
    var events: [ConnectionMachine.Event] = []
    /// Reused for every event's actions.
    private var actions: [ConnectionMachine.Action] = []
    private var handling = false
    /// How the connection ends, for the metrics and the access log.
    var closeOutcome = CloseOutcome.dropped
    /// For the access log: what is logged of the request or tunnel in progress, since `accessStart`.
    var access = AccessState()
    /// Room taken from the process's budget for held bytes (`HeldBytesBudget`), given back at the verdict or the close.
    private var heldRoom = 0

    init(id: UInt64, worker: Worker, client: Connection, clientAddress: SocketAddress, dialect: ConnectionMachine.Dialect = .http) {
        self.id = id
        self.worker = worker
        self.client = client
        self.clientAddress = clientAddress
        clientKey = clientAddress.clientKey   // an IPv6 client by its /64
        machine = ConnectionMachine(limits: worker.configuration.connectionLimits, dialect: dialect)
        // A request line sets its own; a refusal before one uses this (read only when there is an access log).
        if worker.inspector.accessLog != nil { access.started = MonotonicClock.nanoseconds() }
        client.delegate = self
    }

    /// The worker's logger with this connection's metadata, built only when a line is logged: swift-log's stream
    /// handler re-renders its metadata on every set, which cost more per tunnel than parsing the request did.
    private var logger: Logger {
        var logger = worker.logger
        logger[metadataKey: "tunnel.id"] = "\(ConnectionFacts.tunnelID(id))"
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
            closeOutcome = .blocked
            access.closeReason = .blocked
            access.detail = why
        }
        actions.removeAll(keepingCapacity: true)
        machine.handle(event, into: &actions)
        run(actions)   // executing an action never handles an event (they are queued), so `actions` stays put
    }

    func connection(_ side: Side) -> Connection? { side == .client ? client : upstream }
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
            if case .forward = request { closeOutcome = .http }
            access.request(requestLine)
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
                        guard let why = worker.destinations.refusal(address: address.addressBytes, port: address.port,
                                                                    name: authority.host) else { return true }
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
            closeOutcome = .refused
            access.status = status
            access.closeReason = .refused
            access.detail = reason
        case .startInspection:
            startInspection()
        case .feedInspection(let side, let offset):
            feed(side, from: offset)
        case .endedForInspection(let side):
            if side == .client { inspection?.clientEnded() } else { inspection?.serverEnded() }
            // A spare no probe will take (the inspection ended): of no use, as after a hello that needs none.
            if spare != nil, inspection?.awaitsVerdict == false { closeSpare() }
        case .takeHeldRoom(let bytes):
            if worker.heldBudget.take(bytes, client: clientKey) { heldRoom += bytes } else { events.append(.noHeldRoom) }
        case .returnHeldRoom:
            returnHeldRoom()
        case .relay(let side, let count, let eager):
            guard let source = connection(side), let destination = connection(side.other) else { return }
            destination.send(count, movingFrom: source.input, eager: eager)
            worker.stats.bytesCopied.add(count, ordering: .relaxed)
            access.moved(count, from: side)
            events.append(.queued(side.other, destination.output.count))
        case .copyForReplay(let count):
            replayBytes += client.input.peek(max: count)
        case .dropReplayCopy:
            replayBytes = []
        case .replay(let count):
            guard let upstream, replayBytes.count == count else {
                // Never a stream with a hole in it: the tunnel ends instead.
                logger.error("replay of \(count) client bytes asked, \(replayBytes.count) kept")
                return events.append(.failed(.upstream, "no copy of the client's bytes to replay"))
            }
            upstream.write(replayBytes)
            events.append(.queued(.upstream, upstream.output.count))
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
        case .rest(let side, let milliseconds):
            let rest = restTimer ?? Timer(loop: worker.loop) { [unowned self] in self.post(.rested(self.restingSide)) }
            restTimer = rest
            restingSide = side
            rest.schedule(milliseconds: milliseconds)
        case .ignored:
            break   // an event its phase has no use for (a resolver answering after a refusal): nothing to do
        case .log(.info, let message):
            logger.info("\(message)")
        case .log(.warning, let message):
            logger.warning("\(message)")
        case .close(let resetting):
            if machine.closedIdle { access.closeReason = .idle }
            if machine.closedWithoutHeldRoom {
                access.closeReason = .noHeldRoom
                access.detail = "no room in --held-memory"
                worker.heldBudget.countTunnelClosed()
            }
            if !resetting.isEmpty, access.closeReason == .closed { access.closeReason = .reset }
            for side in resetting { connection(side)?.abort() }
            close()
        }
    }

    private func connect(to address: SocketAddress) {
        // A tunnel's first contact with an address, under a rule that holds nothing: a spare connection beside the
        // tunnel's, the two started in an order drawn at random (InspectionMachine.wantsSpareConnection).
        var spareAfter = false
        if !spareConsidered, worker.configuration.spareConnections, machine.connectsForTunnel, let snapshot, let target = machine.target {
            spareConsidered = true
            let now = worker.loop.cachedMilliseconds
            if let due = worker.inspector.spotChecker.takeDue(address, host: target.host, party: spotCheckParty, now: now) {
                // A spot check rides beside this tunnel, under any rule: its connection first, as its hello will be.
                spotCheck = due
                spotCheckAddress = address
                openSpare(to: address)
            } else if InspectionMachine.wantsSpareConnection(rule: snapshot.policy.rule(for: target.host, port: target.port)),
                      worker.spares.mayOpen(Self.upstream(address), client: clientKey, stack: spareStack, now: now) {
                if Bool.random() { openSpare(to: address) } else { spareAfter = true }
            }
        }
        defer { if spareAfter, upstream != nil { openSpare(to: address) } }
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

    private func openSpare(to address: SocketAddress) {
        guard let opened = SpareConnection(loop: worker.loop, address: address, onEnd: { [weak self] in self?.closeSpare() }) else { return }
        spare = opened
        if !carriesSpotCheck { worker.spares.opened(Self.upstream(address), client: clientKey, stack: spareStack) }
    }

    /// The spot check this tunnel took at its CONNECT, when it was not made (no inspection, no TLS 1.3 hello, nothing
    /// cached to compare with, a spare that ended first): back to wait for the next tunnel.
    func giveBackSpotCheck() {
        guard let spotCheck else { return }
        if let inspection {
            inspection.giveBackCheck()
        } else if !spotCheckGivenBack, let target = machine.target, let address = spotCheckAddress {
            worker.inspector.spotChecker.giveBack(spotCheck, address: address, host: target.host, now: worker.loop.cachedMilliseconds)
        }
        spotCheckGivenBack = true
    }

    /// Which of the client's stacks this tunnel is, as the spare ledger and the spot checks' dues know it (its
    /// CONNECT's User-Agent).
    var spareStack: UInt64 { SpareLedger.stack(userAgent: machine.userAgent) }

    /// Whom a spot check this tunnel may carry was drawn for: its client and stack (`SpotChecker.Party`).
    var spotCheckParty: SpotChecker.Party { SpotChecker.Party(client: clientKey, stack: spareStack) }

    /// The spare's address as the ledger knows it.
    static func upstream(_ address: SocketAddress) -> SpareLedger.Upstream {
        SpareLedger.Upstream(address: address.addressBytes, port: address.port)
    }

    /// Hands the spare to the inspection's probe (nil: none), counted.
    func handSpare() -> SpareConnection? {
        guard let spare else { return nil }
        self.spare = nil
        if !carriesSpotCheck { worker.spares.ended(Self.upstream(spare.address), client: clientKey, stack: spareStack, now: worker.loop.cachedMilliseconds) }
        return spare
    }

    /// Closes the spare connection no probe took (`SpareConnection`), counted.
    func closeSpare() {
        guard let spare else { return }
        giveBackSpotCheck()   // its check was not made on it
        spare.close()
        self.spare = nil
        worker.inspector.sparesUnused.add(1, ordering: .relaxed)
        if !carriesSpotCheck { worker.spares.ended(Self.upstream(spare.address), client: clientKey, stack: spareStack, now: worker.loop.cachedMilliseconds) }
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

    /// The proxy stops and its grace period is over: closes both sides (the access line says `shutdown`).
    func closeAtShutdown() {
        access.closeReason = .shutdown
        close()
    }

    /// The side `restTimer` wakes.
    private var restingSide = Side.client

    private func returnHeldRoom() {
        if heldRoom > 0 { worker.heldBudget.giveBack(heldRoom, client: clientKey) }
        heldRoom = 0
    }

    /// Closes both sides and leaves the worker. Idempotent: by a flag of its own, not by whether the sockets are
    /// open (a refused transparent connection is reset, its client closed, before this runs; it must still leave
    /// the worker and write its access line).
    private func close() {
        returnHeldRoom()
        guard !isClosed else { return }
        isClosed = true
        // A request (or tunnel) in progress; a keep-alive client idle between requests has none. Its line is written
        // once the inspection has heard of the close, which can decide it (a flight that ended short).
        let record = access.requestLine == nil && access.status == nil ? nil
            : accessRecord(kind: closeOutcome == .refused ? .refused : (closeOutcome == .http ? .http : .tunnel))
        let inspection = self.inspection
        inspection?.tunnelClosed()
        giveBackSpotCheck()
        self.inspection = nil
        if let record { writeAccess(record, inspection: inspection) }
        timer.cancel()
        restTimer?.cancel()
        restTimer = nil
        for pump in pumps.values { pump.close() }
        pumps.removeAll()
        client.close()
        upstream?.close()
        upstream = nil
        closeSpare()
        worker.stats.closed(closeOutcome)
        worker.connectionClosed(self)
    }
}
