import ChainwatchEventLoop

/// A connection opened beside a tunnel's own at its CONNECT, to the same address, in an order drawn at random, for
/// the probe that a first contact under a rule that holds nothing (alert) makes (`InspectionMachine`'s
/// `.probeBeside`). With it, the probe's connection and the tunnel's reach the server together, and the probe's
/// hello can leave at the moment the client's does, before or after it: an interceptor sees two connections and two
/// hellos in no fixed order. Without it the probe would connect only once the client's hello is in, a round trip
/// behind the tunnel, every time.
///
/// Sends nothing of its own until a probe takes it (`take`). It ends by itself, and says so (`onEnd`), when it is no
/// use and would only hold a server's slot: the server speaks first or closes (not a TLS server, which never speaks
/// first: a one-connection service that greets would otherwise serve the spare and keep the client waiting), or no
/// probe took it within `lifetimeMilliseconds` (a client that sends part of a hello and stops). Loop thread only.
public final class SpareConnection: ConnectionDelegate, @unchecked Sendable {
    enum State { case connecting, connected, failed }
    let address: SocketAddress
    private(set) var state = State.connecting
    private var connection: Connection?
    private var timer: Timer?
    private var onEnd: (() -> Void)?

    /// Starts connecting; nil when no socket could be made or the connect failed at once.
    init?(loop: EventLoop, address: SocketAddress, lifetimeMilliseconds: Int = 2_000, onEnd: @escaping () -> Void) {
        self.address = address
        guard let connection = try? Connection(loop: loop) else { return nil }
        connection.delegate = self   // strong until close() or take(): the connect's outcome is recorded here
        guard connection.connect(to: address) else {
            connection.close()
            return nil
        }
        self.connection = connection
        self.onEnd = onEnd
        let timer = Timer(loop: loop) { [weak self] in self?.end() }
        timer.schedule(milliseconds: lifetimeMilliseconds)
        self.timer = timer
    }

    /// Hands the connection to a probe (its new delegate): nil when it ended meanwhile or was taken.
    func take() -> (Connection, connected: Bool)? {
        guard state != .failed, let connection else { return nil }
        self.connection = nil
        connection.delegate = nil
        connection.disableRead()
        timer?.cancel()
        onEnd = nil
        return (connection, state == .connected)
    }

    /// Closes it, unused, without `onEnd` (its owner closes it). Idempotent.
    func close() {
        timer?.cancel()
        onEnd = nil
        connection?.close()
        connection = nil
        state = .failed
    }

    /// Ends it by itself, and tells its owner.
    private func end() {
        let told = onEnd
        close()
        told?()
    }

    public func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        switch event {
        case .connected:
            state = .connected
            connection.enableRead()   // to see a server that speaks first, or closes
        case .endOfStream, .error:
            end()
        }
    }

    public func connectionDidRead(_ connection: Connection) { end() }   // a server that speaks first is no TLS server
    public func connectionDidDrain(_ connection: Connection) {}
}
