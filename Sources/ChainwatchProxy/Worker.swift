import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Glibc
import Logging
import Synchronization

/// One event loop with its own listener and the tunnels accepted on it. Everything here runs on the loop's thread;
/// other threads reach it only through `loop.execute`, hence the unchecked Sendable.
final class Worker: @unchecked Sendable {
    let loop: EventLoop
    let configuration: ProxyConfiguration
    /// `configuration.destinationPolicy`, built once.
    let destinations: DestinationPolicy
    let stats: ProxyStats
    let inspector: Inspector
    /// The process's budget for bytes held until verdicts, shared by every loop.
    let heldBudget: HeldBytesBudget
    /// This loop's spot-check timers (`SpotChecker`).
    let spotChecks: SpotCheckTimers
    /// This loop's spare connections (`SpareLedger`): one open per upstream address, none for a client whose last one
    /// to that address went unused.
    var spares = SpareLedger()
    let logger: Logger
    private var listener: Listener?
    /// `--socks` listeners (their clients speak SOCKS 5 before the tunnel) and `--transparent` ones.
    private var socksListeners: [Listener] = []
    private var transparentListeners: [Listener] = []
    private var tunnels: [UInt64: ProxyConnection] = [:]
    private var nextID: UInt64
    private var draining = false
    /// The loop's time at its last heartbeat (every second): a loop stuck in one callback stops beating, which
    /// `/healthz` reports. Read from the admin thread.
    let heartbeat = Atomic<Int64>(0)
    private var beat: Timer?
    /// The loop thread's pthread id, for its CPU time (`pthread_getcpuclockid`); 0 until the thread runs.
    let threadID = Atomic<UInt>(0)

    init(index: Int, configuration: ProxyConfiguration, stats: ProxyStats, inspector: Inspector, heldBudget: HeldBytesBudget,
         logger: Logger) throws {
        loop = try EventLoop(index: index, hostsFile: configuration.hostsFile)
        self.configuration = configuration
        destinations = configuration.destinationPolicy
        self.stats = stats
        self.inspector = inspector
        self.heldBudget = heldBudget
        spotChecks = SpotCheckTimers(loop: loop)
        var logger = logger
        logger[metadataKey: "loop"] = "\(index)"
        self.logger = logger
        nextID = UInt64(index) << 48
        listener = try Listener(loop: loop, address: configuration.listen, log: { [logger] in logger.error("\($0)") }) { [unowned self] fd, peer in
            self.accept(fd: fd, peer: peer, dialect: .http)
        }
        socksListeners = try configuration.socks.map { address in
            try Listener(loop: loop, address: address, log: { [logger] in logger.error("\($0)") }) { [unowned self] fd, peer in
                self.accept(fd: fd, peer: peer, dialect: .socks5)
            }
        }
        transparentListeners = try configuration.transparent.map { address in
            try Listener(loop: loop, address: address, transparent: true, log: { [logger] in logger.error("\($0)") }) { [unowned self] fd, peer in
                self.acceptRedirected(fd: fd, peer: peer)
            }
        }
        heartbeat.store(MonotonicClock.milliseconds(), ordering: .relaxed)
        beat = Timer(loop: loop, repeating: true) { [unowned self] in
            heartbeat.store(MonotonicClock.milliseconds(), ordering: .relaxed)
        }
        beat?.schedule(milliseconds: 1000)
    }

    /// Seconds of CPU the loop's thread has used; nil before it runs.
    var cpuSeconds: Double? {
        let thread = threadID.load(ordering: .relaxed)
        guard thread != 0 else { return nil }
        var clock = clockid_t()
        guard pthread_getcpuclockid(pthread_t(thread), &clock) == 0 else { return nil }
        var time = timespec()
        guard clock_gettime(clock, &time) == 0 else { return nil }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private func accept(fd: Int32, peer: SocketAddress, dialect: ConnectionMachine.Dialect) {
        stats.acceptedConnections.add(1, ordering: .relaxed)
        guard configuration.admits(client: peer) else {
            logger.warning("refused client \(peer.ip): not in --allow-client")
            Glibc.close(fd)
            return
        }
        let open = stats.openConnections.add(1, ordering: .relaxed).newValue
        let connection: Connection
        do {
            connection = try Connection(loop: loop, fd: fd)
        } catch {
            stats.openConnections.subtract(1, ordering: .relaxed)
            logger.error("\(error)")
            return
        }
        nextID += 1
        let tunnel = ProxyConnection(id: nextID, worker: self, client: connection, clientAddress: peer, dialect: dialect)
        tunnels[tunnel.id] = tunnel
        // Probe handshakes hold sockets too: a client that opens and drops tunnels leaves each one's probe running
        // (1 500 probes were in flight under --max-connections 50), so they count against the limit.
        if open + inspector.prober.inFlight > configuration.maxConnections {
            // Before start(): its request (already here, see Listener) must not be parsed, let alone connected to.
            tunnel.refuseAtOnce(status: 503, reason: "connection limit reached (\(configuration.maxConnections))")
        } else {
            tunnel.start()
        }
    }

    /// A connection a firewall redirected: its tunnel goes to the original destination. One of chainwatch's own
    /// (its traffic not exempted from the redirect) is reset: followed, each tunnel would open another through itself.
    private func acceptRedirected(fd: Int32, peer: SocketAddress) {
        guard let original = SocketAddress.originalDestination(of: fd) else {
            logger.warning("transparent: no original destination for the connection from \(peer); closed")
            Glibc.close(fd)
            return
        }
        if OutboundPorts.isOwn(peer.port), SocketAddress.localAddresses().contains(DestinationPolicy.unmapped(peer.addressBytes)) {
            stats.acceptedConnections.add(1, ordering: .relaxed)
            logger.error("transparent: reset a connection to \(original) from \(peer), chainwatch's own: its traffic must be exempt from the redirect (deploy/README.md, Gateway)")
            var reset = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
            Glibc.close(fd)
            return
        }
        // A dual-stack listener reports an IPv4 destination in IPv6's mapped form: named as the IPv4 address it is.
        let bytes = DestinationPolicy.unmapped(original.addressBytes)
        let host = bytes.count == 4 ? bytes.map(String.init).joined(separator: ".") : original.ip
        accept(fd: fd, peer: peer, dialect: .transparent(Authority(host: host, port: original.port)))
    }

    func connectionClosed(_ tunnel: ProxyConnection) {
        guard tunnels.removeValue(forKey: tunnel.id) != nil else { return }
        stats.openConnections.subtract(1, ordering: .relaxed)
        if draining && tunnels.isEmpty { loop.stop() }
    }

    /// The grace period is over: closes every connection still open (each writes its access line, `shutdown`), then
    /// stops the loop.
    func closeAll() {
        spotChecks.cancelAll()
        for tunnel in Array(tunnels.values) { tunnel.closeAtShutdown() }
        loop.stop()
    }

    /// Stops accepting; the loop ends when its last tunnel closes (or when the server's grace period ends).
    func beginDrain() {
        draining = true
        spotChecks.cancelAll()
        beat?.cancel()
        beat = nil
        listener?.close()
        listener = nil
        for other in socksListeners + transparentListeners { other.close() }
        socksListeners = []
        transparentListeners = []
        if tunnels.isEmpty { loop.stop() }
    }

}
