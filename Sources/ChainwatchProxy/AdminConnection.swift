import ChainwatchCore
import ChainwatchEventLoop

/// One connection to the admin listener: executes its `AdminExchange` (reads, the deadline, the answer, the close).
/// Owns its connection and timer; its listener holds it until it closes. Admin loop thread only.
final class AdminConnection: ConnectionDelegate {
    private let connection: Connection
    private var exchange = AdminExchange()
    private lazy var deadline = Timer(loop: loop) { [unowned self] in self.run(self.exchange.handle(.deadlinePassed)) }
    private let loop: EventLoop
    let peer: SocketAddress
    private let serve: (AdminRequest, SocketAddress) -> AdminResponse
    private var onClose: ((AdminConnection) -> Void)?

    /// Takes ownership of `fd` and reads its request; `serve` answers it, `onClose` hears the close (once).
    init(loop: EventLoop, fd: Int32, peer: SocketAddress, serve: @escaping (AdminRequest, SocketAddress) -> AdminResponse,
         onClose: @escaping (AdminConnection) -> Void) throws(EventLoopError) {
        connection = try Connection(loop: loop, fd: fd)
        self.peer = peer
        self.serve = serve
        self.onClose = onClose
        self.loop = loop
    }

    /// Arms the request deadline and starts reading (the first bytes are most likely in: TCP_DEFER_ACCEPT).
    func start() {
        connection.delegate = self
        deadline.schedule(milliseconds: AdminExchange.headDeadlineMilliseconds)
        connection.enableRead()
        connection.readNow()
    }

    /// Sends `bytes` and closes at once: a connection refused at the cap. Reads what the client sent first, so that
    /// the close is a FIN after the answer, not a reset.
    static func refuse(loop: EventLoop, fd: Int32, with bytes: [UInt8]) {
        guard let connection = try? Connection(loop: loop, fd: fd) else { return }
        connection.readNow()
        connection.write(bytes)
        connection.close()
    }

    func connectionDidRead(_ connection: Connection) {
        let input = connection.input
        let wanted = min(input.count, exchange.wantedBytes)
        let bytes = wanted > 0 ? input.peek(max: wanted) : []
        input.drain(input.count)
        if !bytes.isEmpty { run(exchange.handle(.received(bytes))) }
    }

    func connectionDidDrain(_ connection: Connection) { run(exchange.handle(.outputDrained)) }

    func connection(_ connection: Connection, didReceive event: ConnectionEvent) {
        switch event {
        case .endOfStream: run(exchange.handle(.endOfStream))
        case .error: run(exchange.handle(.failed))
        case .connected: break   // accepted, never connecting
        }
    }

    private func run(_ actions: [AdminExchange.Action]) {
        for action in actions {
            switch action {
            case .serve(let request): run(exchange.answered(serve(request, peer)))
            case .write(let bytes):
                connection.write(bytes)
                if connection.output.count == 0 { run(exchange.handle(.outputDrained)) }   // all taken at once
            case .rearm(let milliseconds): deadline.schedule(milliseconds: milliseconds)
            case .shutdownWrite: connection.shutdownWrite()
            case .close: close()
            }
        }
    }

    /// Closes the socket and cancels the deadline. Idempotent.
    func close() {
        deadline.cancel()
        connection.close()
        onClose?(self)
        onClose = nil
    }
}
