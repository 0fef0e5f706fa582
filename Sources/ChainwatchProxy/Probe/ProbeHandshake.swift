import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Glibc

/// One probe handshake on one loop: a `TLSClient` driven over a non-blocking `Connection`. Owns both and its
/// timeout. Kept alive from `start` until it reports (the connection's delegate reference, then the timer's
/// closure through the connection), whatever happens to whoever asked. Reports exactly once; sends no
/// application data. Loop thread only.
final class ProbeHandshake: ConnectionDelegate {
    private let key: ProbeKey
    private let timeoutMilliseconds: Int
    private var report: ((ProbeResult) -> Void)?
    private var client: TLSClient?
    private var connection: Connection?
    private var timer: Timer?

    init(key: ProbeKey, timeoutMilliseconds: Int, report: @escaping (ProbeResult) -> Void) {
        self.key = key
        self.timeoutMilliseconds = timeoutMilliseconds
        self.report = report
    }

    /// Connects to `key.address` and starts the handshake; the report comes from a later callback (or from here
    /// when a step fails at once).
    func start(on loop: EventLoop) {
        do throws(OpenSSLError) {
            client = try TLSClient(offer: key.offer)
        } catch {
            return finish(.failure(Self.handshakeFailure(error)))
        }
        let connection: Connection
        do throws(EventLoopError) {
            connection = try Connection(loop: loop)
        } catch {
            return finish(.failure("connect failed: \(error)"))
        }
        self.connection = connection
        connection.delegate = self   // strong until close(): keeps this handshake alive while it runs
        let timer = Timer(loop: loop) { [unowned self] in
            finish(.failure("timed out after \(timeoutMilliseconds) ms"))
        }
        self.timer = timer
        timer.schedule(milliseconds: timeoutMilliseconds)
        guard connection.connect(to: key.address) else { return finish(.failure(Self.connectFailure(errno: errno))) }
    }

    // MARK: ConnectionDelegate

    func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        switch event {
        case .connected:
            connection.enableRead()
            advance()
        case .endOfStream:
            finish(.failure("handshake failed: connection closed by server"))
        case .error(let code):
            finish(.failure(Self.connectFailure(errno: code)))
        }
    }

    func connectionDidRead(_ connection: Connection) {
        guard let client else { return }
        var failure: OpenSSLError?
        connection.input.forEachChunk(from: 0) { chunk in
            guard failure == nil else { return }
            do throws(OpenSSLError) { try client.receive(chunk) } catch { failure = error }
        }
        connection.input.drain(connection.input.count)
        if let failure { return finish(.failure(Self.handshakeFailure(failure))) }
        advance()
    }

    func connectionDidDrain(_ connection: Connection) {}

    // MARK: Handshake

    /// Runs the handshake on what has arrived and sends what it wrote.
    private func advance() {
        guard let client, let connection else { return }
        let progress: TLSClient.Progress
        do throws(OpenSSLError) {
            progress = try client.advance()
        } catch {
            connection.write(client.takeOutgoing())   // the alert that tells the server why, if any
            return finish(.failure(Self.handshakeFailure(error)))
        }
        let outgoing = client.takeOutgoing()
        if !outgoing.isEmpty { connection.write(outgoing) }
        guard case .done(let result) = progress else { return }
        finish(result.chainDER.isEmpty ? .failure("no certificate") : .success(result))
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
        guard let report else { return }
        self.report = nil
        timer?.cancel()
        if let connection {
            if case .success = result, let client { connection.write(client.closeNotify()) }
            connection.close()
        }
        report(result)
    }
}
