import ChainwatchCore
import ChainwatchEventLoop
import Glibc
import Logging

/// One client connection, from its first request byte to its close: a CONNECT tunnel, or a keep-alive series of
/// plain-HTTP exchanges. Owned by its `Worker`; lives and dies on the worker's loop.
final class Tunnel: ConnectionDelegate, InspectionDelegate {
    enum Phase: Equatable {
        /// Waiting for a complete request head from the client.
        case readingRequest
        /// Resolving and connecting upstream.
        case connecting
        /// CONNECT: bytes flow both ways.
        case relaying
        /// Plain HTTP: one exchange in flight.
        case exchanging
        /// Our own error answer is sent; reading and discarding until the client closes, so it gets the answer
        /// and not a reset (a close with unread input sends an RST).
        case lingering
        case closed
    }

    let id: UInt64
    unowned let worker: Worker
    let client: Connection
    let clientAddress: SocketAddress
    private(set) var phase = Phase.readingRequest
    private var upstream: Connection?
    private var target: Authority?
    /// The worker's logger with this tunnel's metadata, built only when a line is logged: swift-log's stream handler
    /// re-renders its metadata on every set, which cost more per tunnel than parsing the request did.
    private var logger: Logger {
        var logger = worker.logger
        logger[metadataKey: "tunnel.id"] = "\(id)"
        logger[metadataKey: "source.ip"] = "\(clientAddress.ip)"
        if let target {
            logger[metadataKey: "destination.domain"] = "\(target.host)"
            logger[metadataKey: "destination.port"] = "\(target.port)"
        }
        return logger
    }
    private lazy var timer = Timer(loop: worker.loop) { [unowned self] in self.timerFired() }
    private var lastActivity: Int64 = 0

    // Relay state, per direction.
    private var clientSentEOF = false
    private var upstreamSentEOF = false
    private var clientPaused = false      // client reads paused: upstream output is full
    private var upstreamPaused = false    // upstream reads paused: client output is full
    private var closeWhenFlushed = false

    // Inspection state (CONNECT).
    private var snapshot: PolicySnapshot?
    private var inspection: TunnelInspection?
    private var connectedAddress: SocketAddress?
    /// Bytes of `upstream.input` already fed to the inspection (held bytes stay there until the verdict).
    private var serverFed = 0
    /// Inside a feed, delegate calls are deferred: buffers must not move while their chunks are being read.
    private var feeding = false
    private var pendingDecision: Decision?
    private enum Decision { case release, block(Finding) }
    /// Bytes relayed each way so far, and how many of the first go out without waiting a loop turn.
    private var relayedUp = 0
    private var relayedDown = 0
    static let eagerBytes = 64 * 1024
    /// After the verdict, a direction that has moved more than `eagerBytes` is carrying bulk data: it is handed to a
    /// splice(2) pump (kernel to kernel, no copies through the proxy) once both buffers on its path are empty.
    private var upPump: SplicePump?     // client → upstream
    private var downPump: SplicePump?   // upstream → client
        /// Most server bytes held while a verdict is pending.
    static let holdLimit = 256 * 1024

    // Plain HTTP state.
    private var exchange: Exchange?
    private var exchangesServed = 0

    init(id: UInt64, worker: Worker, client: Connection, clientAddress: SocketAddress) {
        self.id = id
        self.worker = worker
        self.client = client
        self.clientAddress = clientAddress
        client.delegate = self
    }

    func start() {
        lastActivity = worker.loop.cachedMilliseconds
        timer.schedule(milliseconds: worker.configuration.requestTimeoutMilliseconds)
        // The listener defers accepting until the client has sent, so its request is most likely here already: read
        // it now, and arm the read event only if more is needed. Writing is enabled by the first write that has to
        // queue (see Connection.write).
        client.readNow()
        if phase == .readingRequest && client.isOpen { client.enableRead() }
    }

    // MARK: - Request

    private func readRequest() {
        let input = client.input
        let limit = RequestHeadParser.defaultLimit
        let parsed: (head: RequestHead, length: Int)?
        do {
            parsed = try RequestHeadParser.parse(input.peek(max: limit + 4), limit: limit)
        } catch {
            refuse(status: error.status, reason: error.detail)
            return
        }
        guard let (head, length) = parsed else { return }
        input.drain(length)
        let request: ProxyRequest
        do {
            request = try ProxyRequest.classify(head)
        } catch {
            refuse(status: error.status, reason: error.reason)
            return
        }
        switch request {
        case .connect(let authority):
            if !worker.configuration.allowedPorts.isEmpty && !worker.configuration.allowedPorts.contains(authority.port) {
                refuse(status: 403, reason: "CONNECT to port \(authority.port) is not allowed by --allow-port")
                return
            }
            snapshot = worker.inspector.policies.snapshot
            if refuseKnownBad(authority) { return }
            begin(target: authority, exchange: nil)
        case .forward(let authority, let rewritten):
            if refusePlainHTTP(authority, requestLine: "\(head.method) \(head.target)") { return }
            let framing = BodyFraming.request(head) ?? .length(0)
            begin(target: authority, exchange: Exchange(
                method: head.method, head: rewritten, requestBody: BodyScanner(framing),
                keepAlive: ProxyRequest.clientKeepsAlive(head), clientVersion: head.version))
        }
    }

    private func begin(target authority: Authority, exchange: Exchange?) {
        target = authority
        self.exchange = exchange
        phase = .connecting
        client.disableRead()   // bytes after the head (an eager ClientHello, a body) wait in client.input
        timer.cancel()
        worker.loop.resolve(host: authority.host, port: authority.port) { [self] result in
            guard phase == .connecting else { return }
            switch result {
            case .failure(let error):
                refuse(status: 502, reason: "\(error)")
            case .success(let addresses):
                connect(addresses[...], lastError: nil)
            }
        }
    }

    /// Tries each resolved address in turn, each with the connect timeout.
    private func connect(_ addresses: ArraySlice<SocketAddress>, lastError: ConnectFailure?) {
        guard let address = addresses.first else {
            let failure = lastError ?? .failed(ECONNREFUSED)
            refuse(status: failure.status, reason: "cannot connect to \(target!): \(failure)")
            return
        }
        let connection: Connection
        do {
            connection = try Connection(loop: worker.loop)
        } catch {
            refuse(status: 502, reason: "\(error)")
            return
        }
        upstream = connection
        connectedAddress = address
        pendingAddresses = addresses.dropFirst()
        connection.delegate = self
        timer.schedule(milliseconds: worker.configuration.connectTimeoutMilliseconds)
        if !connection.connect(to: address) {
            let failure = ConnectFailure.failed(errno)
            connection.close()
            upstream = nil
            connect(pendingAddresses, lastError: failure)
        }
    }
    private var pendingAddresses: ArraySlice<SocketAddress> = []

    enum ConnectFailure: CustomStringConvertible {
        case failed(Int32), timedOut
        var status: Int { if case .timedOut = self { 504 } else { 502 } }
        var description: String {
            switch self {
            case .failed(let e): String(cString: strerror(e)).lowercased()
            case .timedOut: "connect timed out"
            }
        }
    }

    private func upstreamConnected() {
        timer.cancel()
        lastActivity = worker.loop.cachedMilliseconds
        timer.schedule(milliseconds: worker.configuration.idleTimeoutMilliseconds)
        guard let upstream else { return }
        if let exchange {
            // Plain HTTP moves bytes into the outputs directly: both sides write-enabled.
            upstream.enableReadWrite()
            client.enableWrite()
            upstream.output.append(HTTPWriter.bytes(of: exchange.head))
            phase = .exchanging
            client.enableRead()
            forwardRequestBody()
        } else {
            upstream.enableRead()   // the relay writes with send(movingFrom:), which enables writing when it queues
            worker.stats.tunnelsOpened.add(1, ordering: .relaxed)
            startInspection()
            client.write(HTTPWriter.connectionEstablished)
            phase = .relaying
            client.enableRead()
            if client.input.count > 0 { relay(from: client, to: upstream) }
        }
    }

    /// Answers the client with an error of the proxy's own, then closes gracefully. One log line.
    func refuse(status: Int, reason: String) {
        guard phase != .closed else { return }
        logger.warning("\(status) \(reason)")
        worker.stats.refused.add(1, ordering: .relaxed)
        upstream?.close()
        upstream = nil
        client.write(HTTPWriter.proxyResponse(status: status, body: reason))
        phase = .lingering
        client.input.drain(client.input.count)
        client.enableRead()
        timer.schedule(milliseconds: 2_000)   // a client that never reads or closes still goes away
        if client.output.count == 0 { client.shutdownWrite() }
    }

    // MARK: - Relay (CONNECT)

    /// Moves everything readable from one side to the other's output (no copies); pauses the reader when the
    /// other side's output is full, so a slow side throttles the fast one and memory stays bounded.
    private func relay(from source: Connection, to destination: Connection) {
        if let inspection, !inspection.isFinished {
            feeding = true
            if source === client {
                if inspection.wantsClientBytes { source.input.forEachChunk(from: 0) { inspection.clientBytes($0) } }
            } else {
                source.input.forEachChunk(from: serverFed) { inspection.serverBytes($0) }
                serverFed = source.input.count
            }
            feeding = false
            if let decision = pendingDecision {
                pendingDecision = nil
                apply(decision)   // a release relays the upstream's bytes itself
                guard phase == .relaying, source === client else { return }
            } else if source === upstream, inspection.holdsServerBytes {
                if source.input.count >= Self.holdLimit { source.disableRead() }   // resumes on release
                return
            } else if source === client, let upstream, upstream.input.count > 0, !inspection.holdsServerBytes {
                // Server bytes held only until this ClientHello (an alert rule): pass them on now, not at the next read.
                relay(from: upstream, to: client)
                guard phase == .relaying else { return }
            }
        }
        if source === upstream { serverFed = 0 }
        // The first bytes each way (handshake flights, a request, a response) go out at once; a tunnel that has
        // moved more is carrying bulk data, which batches better through the output buffer.
        let count = source.input.count
        if source === client { relayedUp += count } else { relayedDown += count }
        destination.send(movingFrom: source.input, eager: (source === client ? relayedUp : relayedDown) <= Self.eagerBytes)
        pauseIfFull(reader: source, writer: destination)
        spliceIfBulk(from: source, to: destination)
    }

    /// Hands one direction to a splice pump when it carries bulk, the verdict is in and nothing is buffered on its
    /// path (the pump must not overtake queued bytes). Without a pipe (out of descriptors) it keeps copying.
    private func spliceIfBulk(from source: Connection, to destination: Connection) {
        let upward = source === client
        // Cheapest and most often false first: this runs after every relayed read. A paused reader needs no check of
        // its own: it implies a full output on its path.
        guard (upward ? relayedUp : relayedDown) > Self.eagerBytes, inspection == nil, phase == .relaying,
              (upward ? upPump : downPump) == nil, !(upward ? clientSentEOF : upstreamSentEOF),
              source.input.count == 0, destination.output.count == 0, exchange == nil,
              worker.configuration.spliceBulk else { return }
        guard let pump = SplicePump(loop: worker.loop, from: source, to: destination, onEnd: { [unowned self] end in
            self.pumpEnded(upward: upward, end)
        }) else { return }
        source.disableRead()
        if upward { upPump = pump } else { downPump = pump }
        pump.start()
    }

    private func pumpEnded(upward: Bool, _ end: SplicePump.End) {
        switch end {
        case .idle:
            // The pipe is gone; the connection reads again, and a burst must move another `eagerBytes` to get a pipe.
            lastActivity = max(lastActivity, (upward ? upPump : downPump)?.lastActivityMilliseconds ?? 0)
            if upward { upPump = nil; relayedUp = 0 } else { downPump = nil; relayedDown = 0 }
            (upward ? client : upstream)?.enableRead()
        case .endOfStream:
            if upward { clientSentEOF = true } else { upstreamSentEOF = true }
            finishHalfCloses()
        case .error(let e):
            logger.info("\(upward ? "upward" : "downward") splice failed: \(String(cString: strerror(e)))")
            client.abort()
            upstream?.abort()
            close()
        }
    }

    private func pauseIfFull(reader: Connection, writer: Connection) {
        let limit = worker.configuration.maxBufferedPerDirection
        guard writer.output.count >= limit else { return }
        reader.disableRead()
        if reader === client { clientPaused = true } else { upstreamPaused = true }
        writer.setWriteLowWatermark(limit / 2)
    }

    private func drained(_ connection: Connection) {
        guard let upstream else { return }
        if connection === upstream, clientPaused {
            clientPaused = false
            upstream.setWriteLowWatermark(0)
            client.enableRead()
            if client.input.count > 0 { readable(client) }
        } else if connection === client, upstreamPaused {
            upstreamPaused = false
            client.setWriteLowWatermark(0)
            upstream.enableRead()
            if upstream.input.count > 0 { readable(upstream) }
        }
        guard phase == .relaying else { return }
        if connection === upstream { spliceIfBulk(from: client, to: upstream) } else { spliceIfBulk(from: upstream, to: client) }
        finishHalfCloses()
    }

    /// Passes an end-of-stream on once the other side has written everything before it; closes when both ends are done.
    private func finishHalfCloses() {
        guard let upstream else { return }
        let upstreamDone = clientSentEOF && upstream.output.count == 0
        let clientDone = upstreamSentEOF && client.output.count == 0 && upstream.input.count == 0
        if upstreamDone && clientDone {
            // Both ways ended and everything is written: closing sends each side its FIN (nothing is left unread, so
            // no RST), and a shutdown first would be one more system call per side for nothing.
            close()
            return
        }
        if upstreamDone, !upstreamWriteShut {
            upstreamWriteShut = true
            upstream.shutdownWrite()
        }
        if clientDone, !clientWriteShut {
            clientWriteShut = true
            client.shutdownWrite()
        }
    }
    private var clientWriteShut = false
    private var upstreamWriteShut = false

    // MARK: - Inspection

    private func startInspection() {
        guard let snapshot, let target, let connectedAddress else { return }
        var facts = facts(for: target)
        facts.upstreamIP = connectedAddress.ip
        let inspection = TunnelInspection(inspector: worker.inspector, snapshot: snapshot, loop: worker.loop, facts: facts,
                                          upstreamAddress: connectedAddress)
        inspection.delegate = self
        self.inspection = inspection
    }

    private func apply(_ decision: Decision) {
        guard phase == .relaying, let upstream else { return }
        switch decision {
        case .release:
            inspection = nil
            if !upstream.isReading && !upstreamPaused && !upstreamSentEOF { upstream.enableRead() }
            serverFed = 0
            if upstream.input.count > 0 { relay(from: upstream, to: client) }
            finishHalfCloses()
        case .block(let finding):
            logger.warning("blocked: \(finding.reason.rawValue): \(finding.detail)")
            inspection = nil
            close()
        }
    }

    /// What the alert lines say about this client and `authority`, before anything is known of the handshake.
    private func facts(for authority: Authority) -> TunnelFacts {
        TunnelFacts(id: id, sourceIP: clientAddress.ip, sourcePort: clientAddress.port, connectHost: authority.host, port: authority.port)
    }

    /// An upstream whose last verdict blocked gets `403` at once, with the reason, and an alert line.
    private func refuseKnownBad(_ authority: Authority) -> Bool {
        let inspector = worker.inspector
        guard let snapshot, let bad = inspector.cache.knownBad(authority, now: worker.loop.cachedMilliseconds) else { return false }
        let rule = snapshot.policy.rule(for: authority.host, port: authority.port)
        var evidence = bad.evidence
        evidence?.source = .cache
        var facts = facts(for: authority)
        facts.serverName = evidence?.serverName
        inspector.report(Verdict(rule: bad.rule, findings: [bad.finding]), evidence: evidence, rule: rule, tunnel: facts,
                         nowMilliseconds: worker.loop.cachedMilliseconds)
        refuse(status: 403, reason: "blocked by chainwatch: \(bad.finding.reason.rawValue): \(bad.finding.detail)")
        return true
    }

    /// Plain HTTP to a host whose rule says `https_only`: alert, or `403` under block.
    private func refusePlainHTTP(_ authority: Authority, requestLine: String) -> Bool {
        let inspector = worker.inspector
        let snapshot = inspector.policies.snapshot
        let rule = snapshot.policy.rule(for: authority.host, port: authority.port)
        guard rule.httpsOnly else { return false }
        let verdict = Evaluator.verdict(for: .plainHTTP(String(requestLine.prefix(200))), rule: rule)
        inspector.report(verdict, evidence: nil, rule: rule, tunnel: facts(for: authority), nowMilliseconds: worker.loop.cachedMilliseconds)
        guard verdict.action == .block else { return false }
        refuse(status: 403, reason: "blocked by chainwatch: https_only: plain HTTP to \(authority.host) is not allowed")
        return true
    }

    // MARK: - Plain HTTP

    struct Exchange {
        var method: String
        var head: RequestHead
        var requestBody: BodyScanner
        var keepAlive: Bool
        /// `HTTP/1.0` clients get no interim (1xx) responses.
        var clientVersion: String
        var responseBody: BodyScanner?
        var interimResponses = 0
    }
    /// Most interim (1xx) responses accepted before one final response.
    static let maxInterimResponses = 8

    private func forwardRequestBody() {
        guard var exchange, let upstream, !exchange.requestBody.isComplete else { return }
        do {
            try move(&exchange.requestBody, from: client.input, to: upstream.output)
        } catch {
            refuse(status: 400, reason: "malformed chunked request body: \(error)")
            return
        }
        self.exchange = exchange
        if exchange.requestBody.isComplete { client.disableRead() }   // pipelined requests wait their turn
        else { pauseIfFull(reader: client, writer: upstream) }
    }

    private func forwardResponse() {
        guard var exchange, let upstream else { return }
        if exchange.responseBody == nil {
            let parsed: (head: ResponseHead, length: Int)?
            do {
                parsed = try ResponseHead.parse(upstream.input.peek(max: 64 * 1024 + 4))
            } catch {
                refuse(status: 502, reason: "upstream sent a malformed response: \(error.detail)")
                return
            }
            guard let (head, length) = parsed else { return }
            upstream.input.drain(length)
            guard let framing = BodyFraming.response(head, requestMethod: exchange.method) else {
                refuse(status: 502, reason: "upstream response has an ambiguous body length")
                return
            }
            var headers = ProxyRequest.endToEnd(head.headers)
            if (100..<200).contains(head.status) {
                // Interim responses: a few are normal (100 Continue, 103 Early Hints); an endless stream is an attack
                // on the proxy's memory, and each one passes through the backpressure check like any other bytes.
                self.exchange?.interimResponses += 1
                guard self.exchange!.interimResponses <= Self.maxInterimResponses else {
                    logger.warning("upstream sent more than \(Self.maxInterimResponses) interim responses")
                    client.abort()
                    close()
                    return
                }
                if exchange.clientVersion == "HTTP/1.1" {
                    client.write(HTTPWriter.bytes(of: ResponseHead(version: "HTTP/1.1", status: head.status, reasonPhrase: head.reasonPhrase, headers: headers)))
                }
                pauseIfFull(reader: upstream, writer: client)
                if upstream.input.count > 0 && upstream.isReading { forwardResponse() }
                return
            }
            if framing == .untilClose { exchange.keepAlive = false }
            headers.append(("Via", "1.1 chainwatch"))
            headers.append(("Connection", exchange.keepAlive ? "keep-alive" : "close"))
            client.write(HTTPWriter.bytes(of: ResponseHead(version: "HTTP/1.1", status: head.status, reasonPhrase: head.reasonPhrase, headers: headers)))
            exchange.responseBody = BodyScanner(framing)
        }
        do {
            try move(&exchange.responseBody!, from: upstream.input, to: client.output)
        } catch {
            logger.warning("upstream sent a malformed chunked body: \(error)")
            client.abort()
            close()
            return
        }
        self.exchange = exchange
        if exchange.responseBody!.isComplete { finishExchange() }
        else { pauseIfFull(reader: upstream, writer: client) }
    }

    /// The response is complete: drop the upstream connection and serve the next request, or close.
    private func finishExchange() {
        guard let exchange else { return }
        exchangesServed += 1
        upstream?.close()
        upstream = nil
        upstreamPaused = false
        clientPaused = false
        self.exchange = nil
        client.setWriteLowWatermark(0)
        guard exchange.keepAlive, exchange.requestBody.isComplete else {
            closeWhenFlushed = true
            client.disableRead()
            if client.output.count == 0 { close() }
            return
        }
        phase = .readingRequest
        timer.schedule(milliseconds: worker.configuration.requestTimeoutMilliseconds)   // the next head, like the first
        client.enableRead()
        if client.input.count > 0 { readRequest() }
    }

    /// Moves the bytes of `source` that belong to the body `scanner` tracks, without copying them.
    private func move(_ scanner: inout BodyScanner, from source: Buffer, to destination: Buffer) throws(BodyScanner.ScanError) {
        var used = 0
        var failure: BodyScanner.ScanError?
        source.forEachChunk(from: 0) { chunk in
            guard failure == nil, !scanner.isComplete else { return }
            do throws(BodyScanner.ScanError) { used += try scanner.consume(chunk) } catch { failure = error }
        }
        if let failure { throw failure }
        destination.move(used, from: source)
    }

    // MARK: - Events

    private func readable(_ connection: Connection) {
        lastActivity = worker.loop.cachedMilliseconds
        switch phase {
        case .readingRequest:
            if connection === client { readRequest() }
        case .relaying:
            guard let upstream else { return }
            if connection === client { relay(from: client, to: upstream) } else { relay(from: upstream, to: client) }
        case .exchanging:
            if connection === client { forwardRequestBody() } else { forwardResponse() }
        case .lingering:
            client.input.drain(client.input.count)
        case .connecting, .closed:
            break
        }
    }

    func connectionDidRead(_ connection: Connection) { readable(connection) }

    func connectionDidDrain(_ connection: Connection) {
        if phase == .lingering, connection === client, client.output.count == 0 {
            client.shutdownWrite()
            return
        }
        if closeWhenFlushed, connection === client, client.output.count == 0 {
            close()
            return
        }
        drained(connection)
    }

    func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        if connection === client {
            clientEvent(event)
        } else {
            upstreamEvent(event)
        }
    }

    private func clientEvent(_ event: ConnectionEvent) {
        switch (phase, event) {
        case (.relaying, .endOfStream):
            clientSentEOF = true
            finishHalfCloses()
        case (.relaying, .error(let e)):
            logger.info("client reset: \(String(cString: strerror(e)))")
            upstream?.abort()
            close()
        default:
            close()
        }
    }

    private func upstreamEvent(_ event: ConnectionEvent) {
        switch (phase, event) {
        case (.connecting, .connected):
            upstreamConnected()
        case (.connecting, .error(let e)):
            upstream?.close()
            upstream = nil
            connect(pendingAddresses, lastError: .failed(e))
        case (.relaying, .endOfStream):
            upstreamSentEOF = true
            finishHalfCloses()
        case (.relaying, .error(let e)):
            logger.info("upstream reset: \(String(cString: strerror(e)))")
            client.abort()
            close()
        case (.exchanging, .endOfStream):
            if upstream?.input.count ?? 0 > 0 { forwardResponse() }
            guard let exchange else { return }
            if exchange.responseBody == nil {
                refuse(status: 502, reason: "upstream closed the connection without a response")
            } else if exchange.responseBody!.endsAtClose || exchange.responseBody!.isComplete {
                self.exchange?.keepAlive = false
                finishExchange()
            } else {
                logger.info("upstream closed mid-response")
                client.abort()
                close()
            }
        case (.exchanging, .error(let e)):
            if exchange?.responseBody == nil {
                refuse(status: 502, reason: "upstream failed: \(String(cString: strerror(e)))")
            } else {
                client.abort()
                close()
            }
        default:
            close()
        }
    }

    private func timerFired() {
        switch phase {
        case .readingRequest:
            if exchangesServed > 0 && client.input.count == 0 {
                close()   // an idle keep-alive client: close quietly
            } else {
                refuse(status: 408, reason: "no complete request within \(worker.configuration.requestTimeoutMilliseconds / 1000) s")
            }
        case .connecting:
            upstream?.close()
            upstream = nil
            connect(pendingAddresses, lastError: .timedOut)
        case .relaying, .exchanging:
            let active = max(lastActivity, upPump?.lastActivityMilliseconds ?? 0, downPump?.lastActivityMilliseconds ?? 0)
            let idle = worker.loop.cachedMilliseconds - active
            let limit = Int64(worker.configuration.idleTimeoutMilliseconds)
            if idle >= limit {
                logger.info("idle for \(idle / 1000) s, closing")
                close()
            } else {
                timer.schedule(milliseconds: Int(limit - idle))
            }
        case .lingering, .closed:
            close()
        }
    }

    /// Closes both sides and leaves the worker. Idempotent.
    func close() {
        guard client.isOpen || upstream != nil else { return }
        inspection?.abandon()
        inspection = nil
        phase = .closed
        timer.cancel()
        upPump?.close()
        downPump?.close()
        upPump = nil
        downPump = nil
        client.close()
        upstream?.close()
        upstream = nil
        worker.tunnelClosed(self)
    }
}

extension Tunnel {
    func inspectionReleased() {
        if feeding { pendingDecision = .release } else { apply(.release) }
    }

    func inspectionBlocked(_ finding: Finding) {
        if feeding { pendingDecision = .block(finding) } else { apply(.block(finding)) }
    }
}
