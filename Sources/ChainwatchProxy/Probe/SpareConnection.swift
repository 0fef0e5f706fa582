import ChainwatchEventLoop

/// A connection opened beside a tunnel's own at its CONNECT, to the same address, in an order drawn at random, for
/// the probe that a first contact under a rule that holds nothing (alert) makes (`InspectionMachine`'s
/// `.probeBeside`). With it, the probe's connection and the tunnel's reach the server together, and the probe's
/// hello can leave at the moment the client's does, before or after it: an interceptor sees two connections and two
/// hellos in no fixed order. Without it the probe would connect only once the client's hello is in, a round trip
/// behind the tunnel, every time. Sends nothing of its own and reads nothing until a probe takes it (`take`); a
/// spare no probe takes is closed (no byte sent). Loop thread only.
public final class SpareConnection: ConnectionDelegate, @unchecked Sendable {
    enum State { case connecting, connected, failed }
    let address: SocketAddress
    private(set) var state = State.connecting
    private var connection: Connection?

    /// Starts connecting; nil when no socket could be made or the connect failed at once.
    init?(loop: EventLoop, address: SocketAddress) {
        self.address = address
        guard let connection = try? Connection(loop: loop) else { return nil }
        connection.delegate = self   // strong until close() or take(): the connect's outcome is recorded here
        guard connection.connect(to: address) else {
            connection.close()
            return nil
        }
        self.connection = connection
    }

    /// Hands the connection to a probe (its new delegate): nil when it failed meanwhile (closed) or was taken.
    func take() -> (Connection, connected: Bool)? {
        guard state != .failed, let connection else { return nil }
        self.connection = nil
        connection.delegate = nil
        return (connection, state == .connected)
    }

    /// Closes it, unused. Idempotent.
    func close() {
        connection?.close()
        connection = nil
    }

    public func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        switch event {
        case .connected: state = .connected
        case .endOfStream, .error:
            state = .failed
            close()
        }
    }

    public func connectionDidRead(_ connection: Connection) {}   // reading is not enabled before a probe takes it
    public func connectionDidDrain(_ connection: Connection) {}
}
