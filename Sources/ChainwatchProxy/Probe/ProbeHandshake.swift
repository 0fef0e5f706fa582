import ChainwatchCore
import ChainwatchCrypto
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Glibc

/// One probe handshake on one loop: chainwatch's own client (`ProbeClient`, sending the client's hello mirrored)
/// driven over a non-blocking `Connection`; for an offer made from no hello (`pin`, `selftest`), OpenSSL's
/// `TLSClient`. Owns both and its timeout. Kept alive from `start` until it reports (the connection's delegate reference, then the timer's
/// closure through the connection), whatever happens to whoever asked. Reports exactly once; sends no
/// application data. A first contact's probe under a rule that holds (`PairProbeGate`) keeps its connection after
/// the report, its closing flight unsent, until the tunnel is decided, for the pair stall at most (that
/// connection is no longer counted in the prober's handshakes in flight). Loop thread only.
final class ProbeHandshake: ConnectionDelegate {
    private let key: ProbeKey
    private let timeoutMilliseconds: Int
    private var report: ((ProbeResult) -> Void)?
    private var client: Engine?
    /// Which client runs this handshake.
    private enum Engine {
        case own(ProbeClient)
        case openSSL(TLSClient)
    }
    /// The primitives of the own client (swift-crypto, OpenSSL's signature verification).
    private static let crypto = SwiftCryptoTLS()
    private var connection: Connection?
    private var timer: Timer?
    /// Where a Certificate message over the client's 512 KiB gets room to be read (nil: it is not read).
    private let largeHandshakes: LargeHandshakeRoom?
    /// The room taken for a second handshake that reads such a message, held until the report.
    private var room: LargeHandshakeRoom.Reservation?
    private var loop: EventLoop?
    /// The connection opened beside the tunnel's at its CONNECT (`SpareConnection`), for the first handshake.
    private var spare: SpareConnection?
    /// A first contact's pair: the second hello after a HelloRetryRequest waits here for the tunnel's inspection.
    private var retryGate: PairProbeGate?
    /// Whether the gate was offered this handshake's second hello (once: a handshake read again with a larger
    /// Certificate limit sends its second hello at once).
    private var offeredRetry = false
    /// When the server's first byte came (the loop's clock): a probe that keeps its closing flight for the tunnel
    /// gives its connection up `PairProbeGate.stallMilliseconds` after it.
    private var firstServerByte: Int64?
    /// When a spot check made alone sends its hellos (`start`), and the timer that sends one.
    private var timing = ProbeTiming()
    private var helloTimer: PreciseTimer?
    /// Reported, the connection kept for the closing flight (`reportKeepingTheConnection`), and the bytes read since.
    private var keptAfterReport = false
    private var keptReadBytes = 0

    init(key: ProbeKey, timeoutMilliseconds: Int, largeHandshakes: LargeHandshakeRoom? = nil,
         report: @escaping (ProbeResult) -> Void) {
        self.key = key
        self.timeoutMilliseconds = timeoutMilliseconds
        self.largeHandshakes = largeHandshakes
        self.report = report
    }

    /// The larger Certificate limits tried, in turn, after the default 512 KiB: 2 MiB (about 80 000 names; a probe
    /// for such a chain takes 6 MiB of room, so several fit at once) and then the protocol's 16 MiB (48 MiB).
    static let largerCertificateLists = [2 << 20, TLSObserver.maxProtocolMessageLength]

    /// What a handshake that reads a Certificate message of `limit` bytes may hold: OpenSSL's message buffer, the
    /// chain's copy and its decoded certificates.
    static func room(forCertificateList limit: Int) -> Int { 3 * (limit + 64 * 1024) }

    /// The Certificate limit of the handshake running now.
    private var certificateList = TLSClient.defaultMaxCertificateList

    /// Connects to `key.address` and starts the handshake; the report comes from a later callback (or from here
    /// when a step fails at once). The deadline covers a second handshake for a large Certificate message.
    /// With `spare`, the first handshake uses that connection (already connecting, or connected: the hello is sent at
    /// once) instead of connecting; one that failed meanwhile is replaced by a connection of its own.
    /// `timing`: how long the hellos wait (a spot check made alone, `ProbeTiming`).
    func start(on loop: EventLoop, spare: SpareConnection? = nil, retryGate: PairProbeGate? = nil, timing: ProbeTiming = ProbeTiming()) {
        self.loop = loop
        self.timing = timing
        self.spare = spare
        self.retryGate = retryGate
        let timer = Timer(loop: loop) { [unowned self] in
            finish(.failure("timed out after \(timeoutMilliseconds) ms"))
        }
        self.timer = timer
        timer.schedule(milliseconds: timeoutMilliseconds)
        handshake(maxCertificateList: TLSClient.defaultMaxCertificateList)
    }

    private func handshake(maxCertificateList: Int) {
        guard let loop else { return }
        certificateList = maxCertificateList
        firstServerByte = nil
        if let template = key.offer.template {
            do throws(ProbeClientError) {
                client = .own(try ProbeClient(clientHello: template.message, recordVersion: template.recordVersion,
                                              crypto: Self.crypto, maxCertificateList: maxCertificateList))
            } catch {
                return finish(.failure("handshake failed: \(error)"))
            }
        } else {
            do throws(OpenSSLError) {
                client = .openSSL(try TLSClient(offer: key.offer, maxCertificateList: maxCertificateList))
            } catch {
                return finish(.failure(Self.handshakeFailure(error)))
            }
        }
        if let spare, spare.address == key.address, let (connection, connected) = spare.take() {
            self.spare = nil
            self.connection = connection
            connection.delegate = self   // strong until close(), as below
            if connected { self.connection(connection, didReceive: .connected) }
            return
        }
        spare?.close()
        spare = nil
        let connection: Connection
        do throws(EventLoopError) {
            connection = try Connection(loop: loop)
        } catch {
            return finish(.failure("connect failed: \(error)"))
        }
        self.connection = connection
        connection.delegate = self   // strong until close(): keeps this handshake alive while it runs
        guard connection.connect(to: key.address) else { return finish(.failure(Self.connectFailure(errno: errno))) }
    }

    // MARK: ConnectionDelegate

    func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        switch event {
        case .connected:
            let connected = timing.helloMicroseconds > 0 ? MonotonicClock.nanoseconds() : 0
            connection.enableRead()
            guard case .own(let own) = client else { return advance() }
            let delay = timing.helloMicroseconds
            timing.helloMicroseconds = 0   // the first handshake only: a second one (a larger Certificate) goes at once
            send(own.start(), after: delay, since: connected, on: connection)
        case .endOfStream:
            finish(.failure("handshake failed: connection closed by server"))
        case .error(let code):
            finish(.failure(Self.connectFailure(errno: code)))
        }
    }

    func connectionDidRead(_ connection: Connection) {
        if firstServerByte == nil { firstServerByte = loop?.cachedMilliseconds }
        if keptAfterReport { return readWhileKept(connection) }
        guard let client else { return }
        guard case .openSSL(let client) = client else { return readOwn(connection) }
        var failure: OpenSSLError?
        connection.input.forEachChunk(from: 0) { chunk in
            guard failure == nil else { return }
            do throws(OpenSSLError) { try client.receive(chunk) } catch { failure = error }
        }
        connection.input.drain(connection.input.count)
        if let failure { return fail(failure) }
        advance()
    }

    func connectionDidDrain(_ connection: Connection) {}

    /// Writes `bytes` `microseconds` after `since` (the monotonic clock's nanoseconds when what they answer came: the
    /// time taken to make them counts), at once when that has passed, and not once the connection is gone or replaced
    /// by another. On a `PreciseTimer`: libevent's own timers wait whole milliseconds, rounded up, and one due within
    /// the time the loop took fires at once, so delays of 0.5 to 1 ms came out at 0.02 ms or at 1 ms and more; without
    /// a timer descriptor, at once.
    private func send(_ bytes: [UInt8], after microseconds: Int64, since: UInt64, on connection: Connection) {
        let remaining = microseconds - Int64((MonotonicClock.nanoseconds() &- since) / 1000)
        guard microseconds > 0, remaining > 0, let loop, let timer = PreciseTimer(loop: loop, action: { [weak self, weak connection] in
            guard let self, let connection, self.connection === connection else { return }
            self.helloTimer = nil
            connection.write(bytes)
        }) else { return connection.write(bytes) }
        helloTimer = timer
        timer.schedule(microseconds: remaining)
    }

    // MARK: Handshake

    /// Feeds the own client what arrived, sends what it answers, and reports when it is done.
    private func readOwn(_ connection: Connection) {
        guard case .own(var own) = client else { return }
        let arrived = timing.retryMicroseconds > 0 ? MonotonicClock.nanoseconds() : 0
        client = nil   // not two copies of the client's buffers while it runs
        var outcome: Result<ProbeClientResult?, ProbeClientError> = .success(nil)
        var startedHolding = false
        var closing: [UInt8] = []
        connection.input.forEachChunk(from: 0) { chunk in
            guard case .success(nil) = outcome else { return }
            do throws(ProbeClientError) {
                switch try own.receive(chunk) {
                case .needsMoreBytes(let send):
                    if !send.isEmpty {
                        // The second hello after a HelloRetryRequest waits for the tunnel's (`PairProbeGate`).
                        if own.hasRetried, !offeredRetry, let retryGate {
                            offeredRetry = true
                            startedHolding = retryGate.hold(send) { [weak self] bytes in self?.connection?.write(bytes) }
                            if !startedHolding { connection.write(send) }
                        } else if let retryGate, retryGate.holds {
                            _ = retryGate.hold(send) { [weak self] bytes in self?.connection?.write(bytes) }
                        } else if own.hasRetried, !offeredRetry, timing.retryMicroseconds > 0 {
                            offeredRetry = true   // a check alone: its second hello as late as a tunnel's client's
                            let delay = timing.retryMicroseconds
                            timing.retryMicroseconds = 0
                            self.send(send, after: delay, since: arrived, on: connection)
                        } else {
                            connection.write(send)
                        }
                    }
                case .done(let result, let send):
                    retryGate?.release()   // cannot hold here (the server answered what it held); in order all the same
                    closing = send
                    outcome = .success(result)
                }
            } catch {
                outcome = .failure(error)
            }
        }
        connection.input.drain(connection.input.count)
        client = .own(own)
        if startedHolding, let notify = retryGate?.onHold {
            retryGate?.onHold = nil
            notify()   // may let it go at once
        }
        switch outcome {
        case .success(nil): return
        case .success(let result?):
            if let retryGate, retryGate.keepsClose { return reportKeepingTheConnection(.success(TLSClientResult(result)), closing: closing) }
            if !closing.isEmpty { connection.write(closing) }
            finish(.success(TLSClientResult(result)))
        case .failure(let error):
            guard error.isExcessiveMessageSize else { return finish(.failure("handshake failed: \(error)")) }
            retryLarger()
        }
    }

    /// Runs the handshake on what has arrived and sends what it wrote.
    private func advance() {
        guard case .openSSL(let client) = client, let connection else { return }
        let progress: TLSClient.Progress
        do throws(OpenSSLError) {
            progress = try client.advance()
        } catch {
            connection.write(client.takeOutgoing())   // the alert that tells the server why, if any
            return fail(error)
        }
        let outgoing = client.takeOutgoing()
        if !outgoing.isEmpty { connection.write(outgoing) }
        guard case .done(let result) = progress else { return }
        finish(result.chainDER.isEmpty ? .failure("no certificate") : .success(result))
    }

    /// A failed handshake: reported, unless the server's Certificate message was over the limit, which another
    /// handshake reads with the next larger limit (`largerCertificateLists`) when `largeHandshakes` has room for it;
    /// without room it is `.oversized`.
    private func fail(_ error: OpenSSLError) {
        guard error.isExcessiveMessageSize else { return finish(.failure(Self.handshakeFailure(error))) }
        retryLarger()
    }

    private func retryLarger() {
        guard let next = Self.largerCertificateLists.first(where: { $0 > certificateList }) else {
            return finish(.failure("handshake failed: the server's Certificate message is over the protocol's limit"))
        }
        let bytes = Self.room(forCertificateList: next)
        guard let largeHandshakes, let granted = largeHandshakes.reserve(bytes) else {
            let capacity = (largeHandshakes?.capacity ?? 0) >> 20
            return finish(.oversized("the server's Certificate message is over the \(certificateList) bytes the probe read, "
                + "and the room for larger ones (--large-handshake-memory, \(capacity) MiB for all tunnels) has no "
                + "\(bytes) bytes free"))
        }
        room?.release()
        room = granted
        connection?.delegate = nil
        connection?.close()
        connection = nil
        handshake(maxCertificateList: next)
    }

    /// A first contact's probe under a rule that holds (`PairProbeGate`): the result is reported now, and the closing
    /// flight and the connection are kept until the tunnel is decided (`PairProbeGate.releaseClose`), or
    /// given up without the flight once `stallMilliseconds` have passed since the server's first byte, as a tunnel
    /// held for the verdict gives its connection up after the pair stall.
    private func reportKeepingTheConnection(_ result: ProbeResult, closing: [UInt8]) {
        guard let report, let loop, let connection, let retryGate else { return finish(result) }
        self.report = nil
        keptAfterReport = true
        timer?.cancel()
        spare?.close()
        spare = nil
        client = nil
        room?.release()
        room = nil
        let elapsed = firstServerByte.map { Int(loop.cachedMilliseconds - $0) } ?? 0
        let remaining = retryGate.stallMilliseconds - elapsed
        if remaining <= 0 {
            closeKept(sending: nil)   // the stall passed while the flight came: given up at once
        } else {
            retryGate.holdClose { [weak self] in self?.closeKept(sending: closing) }
            let stall = Timer(loop: loop) { [weak self] in self?.closeKept(sending: nil) }
            timer = stall
            stall.schedule(milliseconds: remaining)
        }
        report(result)
    }

    /// What a server sends to a kept connection is read and dropped up to the hold a tunnel has for the verdict
    /// (`PairProbeGate.holdLimit`), and then no more, as the tunnel's connection reads until its hold is full: the
    /// bytes the socket takes, and how a close with bytes unread resets it, are then alike.
    private func readWhileKept(_ connection: Connection) {
        let count = connection.input.count
        connection.input.drain(count)
        keptReadBytes += count
        if keptReadBytes >= retryGate?.holdLimit ?? 0 { connection.disableRead() }
    }

    /// Ends a connection kept after the report: with the closing flight (the tunnel is decided, ended or gave its
    /// connection up) or without it (the stall passed).
    private func closeKept(sending closing: [UInt8]?) {
        keptAfterReport = false
        timer?.cancel()
        retryGate?.dropClose()
        retryGate = nil
        guard let connection else { return }
        self.connection = nil
        if let closing, !closing.isEmpty { connection.write(closing) }
        connection.close()
    }

    /// Socket errors worded for the alert: the connect ones as such, the rest as a failed handshake.
    private static func connectFailure(errno code: Int32) -> String {
        switch code {
        case ECONNREFUSED: "connect refused"
        case ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ETIMEDOUT, EAFNOSUPPORT: "connect failed: \(String(cString: strerror(code)))"
        default: "handshake failed: \(String(cString: strerror(code)))"
        }
    }

    /// `handshake failed: tlsv1 alert protocol version`: the error queue's reasons, else the call.
    private static func handshakeFailure(_ error: OpenSSLError) -> String {
        error.queue.isEmpty ? "handshake failed: \(error.call) failed" : "handshake failed: " + error.reasons.joined(separator: "; ")
    }

    /// Reports once: stops the timer, closes the connection (after a completed handshake with a close_notify, not
    /// waited for), then reports. Closing drops the connection's reference to this handshake.
    private func finish(_ result: ProbeResult) {
        guard let report else {   // reported already: a connection kept after the report ends (the server closed)
            if keptAfterReport { closeKept(sending: nil) }
            return
        }
        self.report = nil
        retryGate = nil
        timer?.cancel()
        helloTimer?.cancel()
        helloTimer = nil
        spare?.close()   // a handshake that failed before it took its spare (a hello it could not mirror)
        spare = nil
        if let connection {
            if case .success = result, case .openSSL(let client) = client { connection.write(client.closeNotify()) }
            connection.close()
        }
        client = nil
        room?.release()   // the chain itself goes to the prober, which does not cache one this large
        room = nil
        report(result)
    }
}
