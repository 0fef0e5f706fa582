/// Every decision about one client connection, from its first request byte to its close: a CONNECT tunnel, or a
/// keep-alive series of plain-HTTP exchanges (`ExchangeMachine`). Pure: events in, actions out. The proxy's
/// executor owns the sockets, buffers, timer and splice pumps, carries out the actions in order, and reports what
/// happened as further events (a verdict is an event like any other), so no decision here depends on socket I/O
/// and each is tested with values.
///
/// The executor tells the machine how many bytes each side's input holds (`.readable`) and how many its output
/// queues (`.queued`, after every action that writes), and the machine tracks both, so backpressure, holds and the
/// splice hand-off are decided here. A side is read exactly while it has no `PauseReason`; the machine emits
/// `.setReading` whenever that changes.
///
/// About 560 lines, on purpose: every transition of a CONNECT tunnel's state is in this one file (its events and
/// actions are in `ConnectionMachine+Events.swift`, each side's state in `SideState` and a connect's in `ConnectAttempt`
/// (`ConnectionTypes.swift`), the plain-HTTP steps in `ConnectionMachine+Exchange.swift`). An event its phase has no
/// use for is answered with `.ignored`, never dropped silently.
public struct ConnectionMachine: Sendable {
    public enum Phase: Sendable, Hashable {
        /// Waiting for a complete request head from the client.
        case readingRequest
        /// Checking, resolving and connecting upstream.
        case connecting
        /// CONNECT: bytes flow both ways (held where inspection says so).
        case relaying
        /// Plain HTTP: one exchange in flight.
        case exchanging
        /// The proxy's own answer is sent; the client is read and discarded until it closes (so it gets the answer,
        /// not a reset).
        case lingering
        case closed
    }

    public let limits: ConnectionLimits
    public internal(set) var phase = Phase.readingRequest
    /// The upstream asked for (CONNECT target or the URL's authority).
    public internal(set) var target: Authority?
    public internal(set) var exchange: ExchangeMachine?
    /// The status of the exchange's final response, once its head is relayed (the access log's); nil before, and
    /// again from the next exchange.
    public internal(set) var responseStatus: Int?
    /// Plain-HTTP exchanges completed on this client connection.
    public internal(set) var exchangesServed = 0
    /// The connection was closed because no traffic came within the idle limit (the access log's close reason).
    public private(set) var closedIdle = false
    /// The tunnel was closed because the process's budget for held bytes had no room for what it held.
    public private(set) var closedWithoutHeldRoom = false
    /// Room asked of the budget for held bytes (`.takeHeldRoom`) since the tunnel began holding, in steps of
    /// `heldRoomStep`; given back (`.returnHeldRoom`) at the verdict, and by the executor at the close.
    public private(set) var heldRoom = 0
    /// Room for held bytes is taken this much at a time (one atomic operation per 16 KiB held, not per read).
    public static let heldRoomStep = 16 * 1024
    /// The request head read so far.
    var requestHead = HeadReader(limit: RequestHeadParser.defaultLimit)
    /// Plain HTTP: the upstream has begun a response head, which must be complete within the request timeout.
    var responseHeadDeadline = false
    /// How the head being read (the client's request, or the upstream's response) arrives: a few bytes per read, and
    /// the side rests between reads (each read of a byte costs a wakeup and system calls, whatever the parsing).
    var trickle = HeadTrickle()

    /// Each side's reading, buffering, relaying and holding state.
    var sides: PerSide<SideState>
    /// How the connect goes (the request being connected, the resolved addresses tried); kept while relaying, whose
    /// `.reconnect` dials the address the tunnel had again.
    var attempt: ConnectAttempt?
    /// The `CONNECT`'s User-Agent, if it sent one: which of a client's stacks the tunnel is (`SpareLedger`).
    public private(set) var userAgent: String?
    /// Whether the upstream connection being made is a tunnel's (CONNECT, SOCKS, transparent), which is inspected,
    /// not a plain-HTTP request's.
    public var connectsForTunnel: Bool {
        if case .connect? = attempt?.request { return true }
        return false
    }
    /// Whether the tunnel's inspection runs (bytes go to it before they are relayed).
    private var inspecting = false
    /// Where a `.redial` stands: the upstream connection was dropped for a probe and is not open again yet.
    public enum Redial: Sendable, Hashable {
        /// Waiting for `.reconnect` (the probe runs).
        case waiting
        /// Connecting again.
        case connecting
    }
    public private(set) var redial: Redial?
    /// How many of the client's first bytes the executor keeps a copy of (`.copyForReplay`), from the reconnect after a
    /// redial until the first server byte reaches the client or the verdict; nil: none kept. The copy counts as held
    /// bytes (`heldBytes`: the process's budget and the client's quarter of it). With it, a tunnel whose
    /// upstream was dropped again once its client's hello had gone up (a paired probe stalled behind it) sends those
    /// bytes to the new connection (`.replay`).
    public private(set) var replayCopy: Int?
    /// The most client bytes kept for a replay (a ClientHello, and whatever the client sent after it).
    public static let replayLimit = 64 * 1024
    /// Client bytes to replay once the redialed upstream is connected.
    private var replayOnReconnect = 0
    /// Plain HTTP: the last response is out and the connection closes once the client has it all.
    var closeWhenFlushed = false

    /// What the client speaks before its tunnel: HTTP (a CONNECT, or plain HTTP to forward) on `--listen`, SOCKS 5
    /// on `--socks`; nothing on `--transparent`, whose connections a firewall redirected: the tunnel goes to where
    /// the client was connecting (its original destination), and a refusal is a reset.
    public enum Dialect: Sendable, Hashable { case http, socks5, transparent(Authority) }
    public let dialect: Dialect
    /// A SOCKS client's greeting and request, read so far.
    private var socks: Socks5.Reader

    public init(limits: ConnectionLimits, dialect: Dialect = .http) {
        self.limits = limits
        self.dialect = dialect
        socks = Socks5.Reader(credentials: limits.socksCredentials)
        sides = PerSide(client: SideState(holdLimit: limits.holdLimit, paused: PauseSet()),
                        upstream: SideState(holdLimit: limits.holdLimit, paused: PauseSet(.notConnected)))
    }

    /// Whether `side` is paused for `reason` (for tests and logs).
    public func isPaused(_ side: Side, for reason: PauseReason) -> Bool { sides[side].pauses.contains(reason) }


    /// Refuses a client before its request is read (over the connection limit).
    public mutating func refuseAtOnce(status: Int, reason: String) -> [Action] {
        var out: [Action] = []
        refuse(status, reason, &out)
        return out
    }

    /// The actions `event` leads to, in order.
    public mutating func handle(_ event: Event) -> [Action] {
        var out: [Action] = []
        handle(event, into: &out)
        return out
    }

    /// Appends the actions `event` leads to to `out`: an executor that reuses one buffer allocates nothing per event.
    public mutating func handle(_ event: Event, into out: inout [Action]) {
        guard phase != .closed else { return out.append(.ignored("\(event.name) after the close")) }
        switch event {
        case .started:
            out.append(.schedule(milliseconds: limits.requestTimeoutMilliseconds))
            setReading(&out)
            if case .transparent(let destination) = dialect {
                if !limits.allowedPorts.isEmpty && !limits.allowedPorts.contains(destination.port) {
                    return refuse(403, "a redirected connection to port \(destination.port) is not allowed by --allow-port", &out)
                }
                target = destination
                startConnecting(.connect(destination), requestLine: "TRANSPARENT \(destination)", &out)
            }
        case .vetted(let refusal):
            guard phase == .connecting, let request = attempt?.request else { return ignore(event, &out) }
            if let refusal { refuse(refusal.status, refusal.reason, &out); break }
            let authority: Authority
            switch request {
            case .connect(let a): authority = a
            case .forward(let a, _): authority = a
            }
            out.append(.resolve(authority))
        case .resolved(let count):
            guard phase == .connecting else { return ignore(event, &out) }
            attempt?.addressCount = count
            attempt?.nextAddress = 0
            connectNext(lastFailure: nil, &out)
        case .resolveFailed(let reason):
            guard phase == .connecting else { return ignore(event, &out) }
            refuse(502, reason, socksAnswer: Socks5.reply(.hostUnreachable), &out)
        case .destinationRefused(let reason):
            guard phase == .connecting else { return ignore(event, &out) }
            refuse(403, reason, &out)
        case .connectFailed(let failure):
            if phase == .relaying, redial == .connecting { return reconnectFailed("\(failure)", &out) }
            guard phase == .connecting else { return ignore(event, &out) }
            out.append(.dropUpstream)
            connectNext(lastFailure: failure, &out)
        case .connected:
            if phase == .relaying, redial == .connecting { return reconnected(&out) }
            guard phase == .connecting else { return ignore(event, &out) }
            connected(&out)
        case .readable(let side, let count):
            sides[side].buffered = count
            readable(side, &out)
        case .inspected(let side):
            sides[side].feeding = false
            if phase == .relaying { relay(from: side, &out) }
        case .queued(let side, let count):
            sides[side].queued = count
            outputChanged(side, &out)
        case .drained(let side, let count):
            sides[side].queued = count
            drained(side, &out)
        case .endOfStream(let side):
            endOfStream(side, &out)
        case .failed(let side, let reason):
            failed(side, reason, &out)
        case .hold(let side, let offset):
            sides[side].allowance = max(0, offset - sides[side].streamRelayed)
            if phase == .relaying, !sides[side].feeding, sides[side].buffered > 0 { relay(from: side, &out) }
        case .holdUpTo(let side, let bytes):
            guard bytes > sides[side].holdLimit else { break }
            sides[side].holdLimit = bytes
            if sides[side].pauses.contains(.heldForVerdict), sides[side].buffered - (sides[side].allowance ?? 0) < bytes {
                resume(side, .heldForVerdict)
                setReading(&out)
            }
        case .flowing(let side):
            sides[side].allowance = nil
            resume(side, .heldForVerdict)
            setReading(&out)
            if phase == .relaying, !sides[side].feeding, sides[side].buffered > 0 { relay(from: side, &out) }
        case .decided(let decision):
            decided(decision, &out)
        case .noHeldRoom:
            guard phase == .relaying, inspecting else { return ignore(event, &out) }
            inspecting = false
            closedWithoutHeldRoom = true
            out.append(.log(.warning, "no room for the bytes held until the verdict (--held-memory is taken): closed before any passed"))
            close(resetting: [], &out)
        case .redial:
            dropUpstreamForProbe(&out)
        case .keepReplayCopy:
            guard phase == .relaying, inspecting, redial == nil, replayCopy == nil, sides[.client].streamRelayed == 0
            else { return ignore(event, &out) }
            replayCopy = 0
        case .reconnect:
            guard phase == .relaying, redial == .waiting else { return ignore(event, &out) }
            redial = .connecting
            out.append(.schedule(milliseconds: limits.connectTimeoutMilliseconds))
            out.append(.connect(addressIndex: max(0, (attempt?.nextAddress ?? 0) - 1)))   // the address the tunnel had
        case .spliceEnded(let from, let end):
            spliceEnded(from, end, &out)
        case .timerFired(let idle):
            timerFired(idle: idle, &out)
        case .rested(let side):
            guard sides[side].pauses.contains(.trickling) else { return ignore(event, &out) }
            resume(side, .trickling)
            setReading(&out)
            let read = side == .client ? requestHead.bytes.count : (exchange?.responseHead.bytes.count ?? 0)
            if sides[side].buffered > read { readable(side, &out) }   // bytes buffered before the rest, not read yet
        case .peeked(let side, let bytes):
            switch phase {
            case .readingRequest where side == .client:
                if dialect == .socks5 { readSocks(bytes, &out) } else { readRequest(bytes, &out) }
            case .exchanging: exchangeStep(side, bytes, &out)
            default: ignore(event, &out)
            }
        }
    }

    private func ignore(_ event: Event, _ out: inout [Action]) {
        out.append(.ignored("\(event.name) in \(phase)"))
    }

    // MARK: - Request

    private mutating func readRequest(_ bytes: [UInt8], _ out: inout [Action]) {
        let parsed: (head: RequestHead, length: Int)?
        do { parsed = try requestHead.request(adding: bytes) } catch {
            refuse(error.status, error.detail, &out)
            return
        }
        guard let (head, length) = parsed else { return restIfTrickling(.client, read: bytes.count, &out) }
        trickle = HeadTrickle()
        consumeClient(length, &out)
        let request: ProxyRequest
        do { request = try ProxyRequest.classify(head) } catch {
            refuse(error.status, error.reason, &out)
            return
        }
        switch request {
        case .connect(let authority):
            if !limits.allowedPorts.isEmpty && !limits.allowedPorts.contains(authority.port) {
                refuse(403, "CONNECT to port \(authority.port) is not allowed by --allow-port", &out)
                return
            }
            target = authority
            userAgent = head.value(of: "User-Agent")
        case .forward(let authority, let rewritten):
            // Plain HTTP reaches the same upstreams a tunnel would: the same ports.
            if !limits.allowedPorts.isEmpty && !limits.allowedPorts.contains(authority.port) {
                refuse(403, "plain HTTP to port \(authority.port) is not allowed by --allow-port", &out)
                return
            }
            target = authority
            exchange = ExchangeMachine(request: rewritten, originalHead: head, limits: limits)
            responseStatus = nil
        }
        startConnecting(request, requestLine: "\(head.method) \(head.target)", &out)
    }

    /// The request is read: the client waits while the upstream is vetted, resolved and connected.
    private mutating func startConnecting(_ request: ProxyRequest, requestLine: String, _ out: inout [Action]) {
        phase = .connecting
        attempt = ConnectAttempt(request: request)
        pause(.client, .awaitingUpstream)
        setReading(&out)
        out.append(.cancelTimer)
        out.append(.vet(request, requestLine: requestLine))
    }

    private mutating func consumeClient(_ count: Int, _ out: inout [Action]) {
        out.append(.consume(.client, count))
        sides[.client].buffered -= min(count, sides[.client].buffered)
    }

    /// A SOCKS client's greeting, then its request (`Socks5.Reader`); the request goes on as a CONNECT would.
    private mutating func readSocks(_ bytes: [UInt8], _ out: inout [Action]) {
        switch socks.read(bytes) {
        case .needMore:
            return
        case .answer(let reply, let consumed):
            consumeClient(consumed, &out)
            out.append(.write(.client, reply))
            if sides[.client].buffered > 0 { out.append(.peek(.client, from: 0, max: min(sides[.client].buffered, Socks5.maxMessage))) }
        case .connect(let authority, let consumed):
            consumeClient(consumed, &out)
            if !limits.allowedPorts.isEmpty && !limits.allowedPorts.contains(authority.port) {
                return refuse(403, "SOCKS CONNECT to port \(authority.port) is not allowed by --allow-port", &out)
            }
            target = authority
            startConnecting(.connect(authority), requestLine: "SOCKS5 \(authority)", &out)
        case .refuse(let reply, let reason):
            refuse(400, reason, socksAnswer: reply ?? [], &out)
        }
    }

    /// Tries the next resolved address; when none is left, answers with the last failure.
    private mutating func connectNext(lastFailure: ConnectFailure?, _ out: inout [Action]) {
        guard let next = attempt?.nextAddress, let count = attempt?.addressCount, next < count else {
            let failure = lastFailure ?? .failed("connection refused")
            refuse(failure.status, "cannot connect to \(target!): \(failure)", &out)
            return
        }
        out.append(.schedule(milliseconds: limits.connectTimeoutMilliseconds))
        out.append(.connect(addressIndex: next))
        attempt?.nextAddress = next + 1
    }

    private mutating func connected(_ out: inout [Action]) {
        out.append(.cancelTimer)
        out.append(.schedule(milliseconds: limits.idleTimeoutMilliseconds))
        resume(.upstream, .notConnected)
        resume(.client, .awaitingUpstream)
        if let exchange {
            phase = .exchanging
            out.append(.write(.upstream, exchange.requestHeadBytes))
            if exchange.requestBody.isComplete { pause(.client, .exchangeInProgress) }   // a pipelined request waits its turn
            setReading(&out)
            if sides[.client].buffered > 0 { out.append(.peek(.client, from: 0, max: sides[.client].buffered)) }
            return
        }
        phase = .relaying
        inspecting = true
        out.append(.startInspection)
        switch dialect {
        case .http: out.append(.write(.client, HTTPWriter.connectionEstablished))
        case .socks5: out.append(.write(.client, Socks5.reply(.succeeded)))
        case .transparent: break   // its client is connected already, to what it takes for its server
        }
        setReading(&out)
        if sides[.client].buffered > 0 { readable(.client, &out) }
    }

    /// Answers the client with an error of the proxy's own, then lingers until it closes. A SOCKS client gets
    /// `socksAnswer` (empty: nothing) or the reply that matches `status`.
    mutating func refuse(_ status: Int, _ reason: String, socksAnswer: [UInt8]? = nil, _ out: inout [Action]) {
        if case .transparent = dialect {   // a client that spoke to its server, not to a proxy: its connection resets
            if phase == .connecting || phase == .relaying { out.append(.dropUpstream) }
            exchange = nil
            out.append(.refused(status: status, reason: reason))
            return close(resetting: [.client], &out)
        }
        if phase == .connecting || phase == .exchanging || phase == .relaying { out.append(.dropUpstream) }
        phase = .lingering
        inspecting = false
        exchange = nil
        out.append(.refused(status: status, reason: reason))
        if dialect == .socks5 {
            let answer = socksAnswer ?? socks.refusal(status: status)
            if !answer.isEmpty { out.append(.write(.client, answer)) }
        } else {
            out.append(.write(.client, HTTPWriter.proxyResponse(status: status, body: reason)))
        }
        out.append(.discardInput(.client))
        sides[.client].buffered = 0
        sides[.client].pauses = PauseSet()
        sides[.upstream].pauses = PauseSet(.notConnected)
        setReading(&out)
        out.append(.schedule(milliseconds: limits.lingerMilliseconds))
    }

    // MARK: - Relay (CONNECT)

    private mutating func readable(_ side: Side, _ out: inout [Action]) {
        switch phase {
        case .relaying:
            if inspecting {
                guard !sides[side].feeding else { return }
                if sides[side].buffered > sides[side].fed {
                    sides[side].feeding = true
                    out.append(.feedInspection(side, from: sides[side].fed))
                    sides[side].fed = sides[side].buffered
                    return   // the relay follows `.inspected`, with whatever the inspection decided about these bytes
                }
            }
            relay(from: side, &out)
        case .readingRequest:
            guard side == .client else { break }
            if dialect == .socks5 {
                out.append(.peek(.client, from: 0, max: min(sides[.client].buffered, Socks5.maxMessage)))
            } else {
                peekRequestHead(&out)
            }
        case .exchanging:
            if sides[side].buffered > 0, sides[side].pauses.isEmpty { peekExchange(side, &out) }
        case .lingering:
            if side == .client, sides[.client].buffered > 0 {
                out.append(.discardInput(.client))
                sides[.client].buffered = 0
            }
        case .connecting, .closed:
            break
        }
    }

    /// Moves what `side` has buffered to the other side, as far as a hold allows; pauses it when held bytes reach
    /// the hold limit.
    private mutating func relay(from side: Side, _ out: inout [Action]) {
        let available = sides[side].buffered
        guard available > 0 else { return }
        if sides[side.other].pauses.contains(.notConnected) {   // redialing: nothing moves until the upstream is back
            if available >= sides[side].holdLimit, !sides[side].pauses.contains(.heldForVerdict) { pause(side, .heldForVerdict); setReading(&out) }
            coverHeldBytes(&out)
            return
        }
        var count = available
        if inspecting, let passing = sides[side].allowance {
            count = min(passing, available)
            sides[side].allowance = passing - count
            if available - count >= sides[side].holdLimit { pause(side, .heldForVerdict); setReading(&out) }
            if available - count > 0 { coverHeldBytes(&out, relaying: (side, count)) }
        }
        guard count > 0 else { return }
        if let copied = replayCopy {
            if side == .client, copied + count <= Self.replayLimit {
                replayCopy = copied + count
                out.append(.copyForReplay(count))
                coverHeldBytes(&out, relaying: (side, count))   // the copy is held memory too, within the client's share
            } else {
                dropReplayCopy(&out)   // the server's bytes reach the client, or too much to keep
            }
        }
        sides[side].buffered = available - count
        sides[side].fed = max(0, sides[side].fed - count)
        sides[side].relayed += count
        sides[side].streamRelayed += count
        emitRelay(from: side, count: count, eager: sides[side].relayed <= limits.eagerBytes, &out)
    }

    /// `.relay`, its bytes counted as queued for the other side until the executor says how much is left (`.queued`,
    /// right after the relay): a close decided in the same step (`finishHalfCloses` when a verdict releases what was
    /// held with both ways ended, `finishExchange` after a response's last bytes) would otherwise see nothing queued,
    /// and `Connection.close` discards what the write had not taken yet.
    mutating func emitRelay(from side: Side, count: Int, eager: Bool, _ out: inout [Action]) {
        sides[side.other].queued += count
        out.append(.relay(from: side, count: count, eager: eager))
    }

    /// Bytes held for the verdict, both sides together: those past a side's allowance, or all a side has while the
    /// upstream is redialed, and the copy of the client's first bytes kept for a replay. `relaying` are bytes about to
    /// leave `side`, not held.
    func heldBytes(relaying: (side: Side, count: Int)? = nil) -> Int {
        guard inspecting else { return 0 }
        var held = replayCopy ?? 0
        for side in [Side.client, .upstream] {
            let buffered = sides[side].buffered - (relaying?.side == side ? relaying!.count : 0)
            if sides[side.other].pauses.contains(.notConnected) {
                held += buffered
            } else if let allowance = sides[side].allowance {
                held += max(0, buffered - allowance)
            }
        }
        return held
    }

    /// Asks for room for the held bytes past the room taken so far, a step at a time.
    private mutating func coverHeldBytes(_ out: inout [Action], relaying: (side: Side, count: Int)? = nil) {
        let held = heldBytes(relaying: relaying)
        guard held > heldRoom else { return }
        let wanted = (held + Self.heldRoomStep - 1) / Self.heldRoomStep * Self.heldRoomStep
        out.append(.takeHeldRoom(wanted - heldRoom))
        heldRoom = wanted
    }

    /// After bytes were queued for `side` (or it drained): pause its source when full, and perhaps splice.
    private mutating func outputChanged(_ side: Side, _ out: inout [Action]) {
        let source = side.other
        if sides[side].queued >= limits.maxBufferedPerDirection, !sides[source].pauses.contains(.peerBackedUp) {
            pause(source, .peerBackedUp)
            setReading(&out)
            out.append(.setLowWatermark(side, limits.maxBufferedPerDirection / 2))
            sides[side].lowWatermarkSet = true
        }
        if phase == .lingering, side == .client, sides[.client].queued == 0, !sides[.client].writeShut {
            sides[.client].writeShut = true
            out.append(.shutdownWrite(.client))
            return
        }
        if phase == .exchanging { exchangeOutputChanged(side, &out); return }
        guard phase == .relaying else { return }
        spliceIfBulk(from: source, &out)
        finishHalfCloses(&out)
    }

    private mutating func drained(_ side: Side, _ out: inout [Action]) {
        let source = side.other
        if sides[source].pauses.contains(.peerBackedUp) {
            resume(source, .peerBackedUp)
            if sides[side].lowWatermarkSet { sides[side].lowWatermarkSet = false; out.append(.setLowWatermark(side, 0)) }
            setReading(&out)
            if sides[source].buffered > 0 {
                readable(source, &out)
            }
        }
        outputChanged(side, &out)
    }

    /// Hands a direction to a splice pump when it carries bulk, the verdict is in and nothing is buffered on its
    /// path (a pump must not overtake queued bytes).
    private mutating func spliceIfBulk(from source: Side, _ out: inout [Action]) {
        guard limits.spliceBulk, sides[source].relayed > limits.eagerBytes, !inspecting, phase == .relaying,
              !sides[source].pauses.contains(.spliced), !sides[source].pauses.contains(.ended), sides[source].buffered == 0,
              sides[source.other].queued == 0, !sides[source].pauses.contains(.peerBackedUp) else { return }
        pause(source, .spliced)
        setReading(&out)
        out.append(.splice(from: source))
    }

    private mutating func spliceEnded(_ source: Side, _ end: SpliceEnd, _ out: inout [Action]) {
        guard sides[source].pauses.contains(.spliced) else { return }
        switch end {
        case .unavailable:
            resume(source, .spliced)
            setReading(&out)
        case .idle:
            // The pipe is gone; the side is read again, and a burst must move `eagerBytes` again to get a pipe.
            sides[source].relayed = 0
            resume(source, .spliced)
            setReading(&out)
        case .endOfStream:
            let first = !sides[source.other].pauses.contains(.ended)
            pause(source, .ended)   // and stays spliced: the pump is done
            finishHalfCloses(&out)
            if first { halfClosed(&out) }
        case .error(let reason):
            out.append(.log(.info, "\(source == .client ? "upward" : "downward") splice failed: \(reason)"))
            close(resetting: [.client, .upstream], &out)
        }
    }

    /// Passes an end of stream on once everything before it is written; closes when both ways have ended.
    private mutating func finishHalfCloses(_ out: inout [Action]) {
        guard phase == .relaying else { return }
        let upstreamDone = sides[.client].pauses.contains(.ended) && sides[.upstream].queued == 0 && sides[.client].buffered == 0
        let clientDone = sides[.upstream].pauses.contains(.ended) && sides[.client].queued == 0 && sides[.upstream].buffered == 0
        if upstreamDone && clientDone {
            // Closing sends each side its FIN (nothing is left unread, so no RST); a shutdown first would be one
            // more system call per side for nothing.
            close(resetting: [], &out)
            return
        }
        if upstreamDone, !sides[.upstream].writeShut { sides[.upstream].writeShut = true; out.append(.shutdownWrite(.upstream)) }
        if clientDone, !sides[.client].writeShut { sides[.client].writeShut = true; out.append(.shutdownWrite(.client)) }
    }

    private mutating func endOfStream(_ side: Side, _ out: inout [Action]) {
        switch phase {
        case .relaying:
            let first = !sides[side.other].pauses.contains(.ended)
            pause(side, .ended)
            if inspecting { out.append(.endedForInspection(side)) }
            setReading(&out)
            finishHalfCloses(&out)
            if first { halfClosed(&out) }
        case .exchanging:
            exchangeEndOfStream(side, &out)
        case .readingRequest, .connecting, .lingering, .closed:
            close(resetting: [], &out)
        }
    }

    /// One side of a tunnel has ended: the shorter half-closed timeout applies from now on.
    private func halfClosed(_ out: inout [Action]) {
        if phase == .relaying, redial != .connecting { out.append(.schedule(milliseconds: idleLimit)) }
    }

    private mutating func failed(_ side: Side, _ reason: String, _ out: inout [Action]) {
        switch (phase, side) {
        case (.connecting, .upstream):
            out.append(.dropUpstream)
            connectNext(lastFailure: .failed(reason), &out)
        case (.relaying, _):
            out.append(.log(.info, "\(side) reset: \(reason)"))
            close(resetting: [side.other], &out)
        case (.exchanging, .upstream):
            if exchange?.responseStarted == false {
                refuse(502, "upstream failed: \(reason)", &out)
            } else {
                close(resetting: [.client], &out)
            }
        default:
            close(resetting: [], &out)
        }
    }

    private mutating func decided(_ decision: InspectionDecision, _ out: inout [Action]) {
        guard phase == .relaying, inspecting else { return out.append(.ignored("decided in \(phase) without an inspection")) }
        dropReplayCopy(&out)
        switch decision {
        case .release:
            inspecting = false
            for side in [Side.client, .upstream] { sides[side].endInspection() }
            if heldRoom > 0 { heldRoom = 0; out.append(.returnHeldRoom) }
            resume(.upstream, .heldForVerdict)
            resume(.client, .heldForVerdict)
            setReading(&out)
            if sides[.upstream].buffered > 0 { relay(from: .upstream, &out) }
            if sides[.client].buffered > 0 { relay(from: .client, &out) }
            finishHalfCloses(&out)
        case .block(let reason):
            inspecting = false
            out.append(.log(.warning, "blocked: \(reason)"))
            close(resetting: [], &out)
        case .drop(let reason):
            inspecting = false
            out.append(.log(.info, "closed: \(reason)"))
            close(resetting: [], &out)
        }
    }

    // MARK: - Redial (a probe before the tunnel's own handshake)

    /// Drops the upstream connection while nothing of the server's has reached the client, holding the client's
    /// bytes: none have gone up yet, or all that did are kept for a replay.
    private mutating func dropUpstreamForProbe(_ out: inout [Action]) {
        let sent = sides[.client].streamRelayed
        guard phase == .relaying, inspecting, redial == nil, sent == 0 || replayCopy == sent, sides[.upstream].streamRelayed == 0,
              !sides[.upstream].pauses.contains(.spliced) else { return out.append(.ignored("redial once bytes have passed")) }
        replayOnReconnect = sent
        redial = .waiting
        out.append(.dropUpstream)
        sides[.upstream].pauses = PauseSet(.notConnected)
        sides[.upstream].buffered = 0
        sides[.upstream].queued = 0
        sides[.upstream].fed = 0
        sides[.upstream].feeding = false
        sides[.upstream].writeShut = false
        sides[.upstream].allowance = 0
        setReading(&out)
    }

    private mutating func reconnected(_ out: inout [Action]) {
        redial = nil
        if replayOnReconnect > 0 {
            out.append(.replay(replayOnReconnect))   // before anything else goes up
            replayOnReconnect = 0
        }
        if replayCopy == nil, sides[.client].streamRelayed == 0 { replayCopy = 0 }
        out.append(.cancelTimer)
        out.append(.schedule(milliseconds: limits.idleTimeoutMilliseconds))
        resume(.upstream, .notConnected)
        resume(.client, .heldForVerdict)   // `relay` holds again what a hold still covers
        setReading(&out)
        if sides[.client].pauses.contains(.ended) { finishHalfCloses(&out) }
        if sides[.client].buffered > 0, !sides[.client].feeding { relay(from: .client, &out) }
    }

    private mutating func dropReplayCopy(_ out: inout [Action]) {
        guard replayCopy != nil else { return }
        replayCopy = nil
        out.append(.dropReplayCopy)
    }

    /// The tunnel's client already has its `200`: all that is left is to close it.
    private mutating func reconnectFailed(_ reason: String, _ out: inout [Action]) {
        out.append(.log(.warning, "cannot reconnect to the upstream after the probe: \(reason)"))
        close(resetting: [.client], &out)
    }

    // MARK: - Timer

    private mutating func timerFired(idle: Int64, _ out: inout [Action]) {
        switch phase {
        case .readingRequest:
            if exchangesServed > 0 && sides[.client].buffered == 0 {
                close(resetting: [], &out)   // an idle keep-alive client: close quietly
            } else {
                refuse(408, "no complete request within \(limits.requestTimeoutMilliseconds / 1000) s", &out)
            }
        case .connecting:
            out.append(.dropUpstream)
            connectNext(lastFailure: .timedOut, &out)
        case .relaying where redial == .connecting:
            reconnectFailed("timed out after \(limits.connectTimeoutMilliseconds) ms", &out)
        case .exchanging where responseHeadDeadline:
            refuse(504, "upstream response head not complete within \(limits.requestTimeoutMilliseconds / 1000) s of its first byte", &out)
        case .relaying, .exchanging:
            let limit = Int64(idleLimit)
            if idle >= limit {
                out.append(.log(.info, "idle for \(idle / 1000) s, closing"))
                closedIdle = true
                close(resetting: [], &out)
            } else {
                out.append(.schedule(milliseconds: Int(limit - idle)))
            }
        case .lingering, .closed:
            close(resetting: [], &out)
        }
    }

    /// Milliseconds without traffic after which the connection closes: the idle timeout, shorter once one side has
    /// ended its stream (a half-closed client whose upstream never answers would otherwise hold both sockets, the
    /// client's in CLOSE-WAIT, for the whole idle timeout).
    var idleLimit: Int {
        let halfClosed = sides[.client].pauses.contains(.ended) || sides[.upstream].pauses.contains(.ended)
        return halfClosed ? min(limits.halfClosedTimeoutMilliseconds, limits.idleTimeoutMilliseconds) : limits.idleTimeoutMilliseconds
    }

    /// After a read that left a head incomplete: when the head trickles in, `side` rests before its next read.
    mutating func restIfTrickling(_ side: Side, read count: Int, _ out: inout [Action]) {
        guard trickle.read(count), !sides[side].pauses.contains(.trickling) else { return }
        pause(side, .trickling)
        setReading(&out)
        out.append(.rest(side, milliseconds: trickle.nextRest(base: limits.tricklePauseMilliseconds)))
    }

    /// Asks for the request head's bytes past those already read.
    func peekRequestHead(_ out: inout [Action]) {
        let next = requestHead.nextPeek
        out.append(.peek(.client, from: next.from, max: next.max))
    }

    // MARK: - Reading state

    mutating func pause(_ side: Side, _ reason: PauseReason) { sides[side].pauses.insert(reason) }
    mutating func resume(_ side: Side, _ reason: PauseReason) { sides[side].pauses.remove(reason) }

    /// Emits `.setReading` for each side whose paused state changed.
    mutating func setReading(_ out: inout [Action]) {
        setReading(.client, &out)
        setReading(.upstream, &out)
    }

    private mutating func setReading(_ side: Side, _ out: inout [Action]) {
        let wanted = sides[side].pauses.isEmpty
        if sides[side].reading != wanted {
            sides[side].reading = wanted
            out.append(.setReading(side, wanted))
        }
    }

    mutating func close(resetting: [Side], _ out: inout [Action]) {
        phase = .closed
        inspecting = false
        out.append(.cancelTimer)
        out.append(.close(resetting: resetting))
    }
}
