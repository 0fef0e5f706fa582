import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Foundation
import Logging
import Synchronization

/// The proxy: N worker loops on their own threads, each with a SO_REUSEPORT listener.
/// `run()` blocks the calling thread (the control thread: signals) until shutdown.
public final class ProxyServer: @unchecked Sendable {
    public let configuration: ProxyConfiguration
    public let stats = ProxyStats()
    public let inspector: Inspector
    /// Bytes all tunnels may hold until their verdicts (`configuration.heldMemory`).
    public let heldBudget: HeldBytesBudget
    private let logger: Logger
    private var workers: [Worker] = []
    private var threads: [Thread] = []
    /// Whether the server is draining (after SIGTERM): `/readyz` says not ready.
    public let draining = Atomic<Bool>(false)

    public init(configuration: ProxyConfiguration, inspector: Inspector, logger: Logger) {
        self.configuration = configuration
        self.inspector = inspector
        heldBudget = HeldBytesBudget(capacity: configuration.heldMemory)
        self.logger = logger
    }

    /// Binds every loop's listener (so errors surface before `run`), then starts the loops' threads.
    public func start() throws {
        try configuration.validate()
        signal(SIGPIPE, SIG_IGN)
        try Listener.checkUnused(configuration.listen)
        for address in configuration.socks + configuration.transparent { try Listener.checkUnused(address) }
        OutboundPorts.tracking = !configuration.transparent.isEmpty
        for index in 0..<max(1, configuration.threads) {
            workers.append(try Worker(index: index, configuration: configuration, stats: stats, inspector: inspector,
                                  heldBudget: heldBudget, logger: logger))
        }
        let finished = DispatchGroup()
        self.finished = finished
        for worker in workers {
            finished.enter()
            let thread = Thread { [worker] in
                worker.threadID.store(UInt(pthread_self()), ordering: .relaxed)
                worker.loop.run()
                finished.leave()
            }
            thread.name = "chainwatch-loop-\(worker.loop.index)"
            thread.stackSize = 1 << 20
            threads.append(thread)
            thread.start()
        }
        let socks = (configuration.socks.isEmpty ? "" : ", SOCKS 5 on \(configuration.socks.map(\.description).joined(separator: ", "))")
            + (configuration.transparent.isEmpty ? "" : ", transparent on \(configuration.transparent.map(\.description).joined(separator: ", "))")
        logger.notice("listening on \(configuration.listen)\(socks) with \(workers.count) loop(s)")
    }
    private var finished: DispatchGroup?

    /// Loops that have not beaten for `stuckMilliseconds` (stuck in one callback), named for a message.
    public var stuckLoops: [String] {
        loopHealth.filter { $0.silentMilliseconds > Self.stuckMilliseconds }
            .map { "loop \($0.index) silent for \($0.silentMilliseconds / 1000) s" }
    }
    /// A loop beats every second; one silent this long is stuck.
    public static let stuckMilliseconds: Int64 = 5_000

    /// Per loop: seconds since its last heartbeat (a loop stuck in one callback stops beating) and the CPU seconds
    /// its thread has used. For the admin listener; safe from any thread.
    public var loopHealth: [(index: Int, silentMilliseconds: Int64, cpuSeconds: Double?)] {
        let now = MonotonicClock.milliseconds()
        return workers.map { ($0.loop.index, now - $0.heartbeat.load(ordering: .relaxed), $0.cpuSeconds) }
    }

    /// Blocks until SIGTERM or SIGINT, then drains: stop accepting, give tunnels the grace period, stop.
    /// `extra` signals run their action on this (control) thread; `every` runs once a second (e.g. `--watch`).
    /// `onDrain` runs when SIGTERM or SIGINT arrives, before the drain.
    public func runUntilSignalled(onSignal extra: [(Int32, () -> Void)] = [], every tick: (() -> Void)? = nil,
                                  onDrain: @escaping () -> Void = {}) throws {
        let control = try EventLoop(index: -1)
        var watchers: [SignalWatcher] = []
        for sig in [SIGTERM, SIGINT] {
            watchers.append(SignalWatcher(loop: control, signal: sig) { [self] in
                logger.notice("signal \(sig): draining \(stats.openConnections.load(ordering: .relaxed)) connection(s), grace \(configuration.shutdownGraceMilliseconds) ms")
                onDrain()
                control.stop()
            })
        }
        for (sig, action) in extra { watchers.append(SignalWatcher(loop: control, signal: sig, action: action)) }
        let ticker = tick.map { Timer(loop: control, repeating: true, action: $0) }
        ticker?.schedule(milliseconds: 1000)
        control.run()
        ticker?.cancel()
        watchers.removeAll()
        shutdown()
    }

    /// Stops accepting, waits up to the grace period for tunnels to finish, then stops every loop.
    public func shutdown() {
        draining.store(true, ordering: .relaxed)
        for worker in workers { worker.loop.execute { worker.beginDrain() } }
        let deadline = DispatchTime.now() + .milliseconds(configuration.shutdownGraceMilliseconds)
        if finished?.wait(timeout: deadline) == .timedOut {
            logger.warning("grace period over: closing remaining connections")
            // Each closed by its own loop, so it writes its access line (`shutdown`) and its inspection is told; then
            // the loop stops.
            for worker in workers { worker.loop.execute { worker.closeAll() } }
            _ = finished?.wait(timeout: .now() + 2)
        }
        // Validation threads outlive the loops; a job still running when the process exits would use OpenSSL as its
        // exit handler tears it down. The loops are stopped: no verdict could be delivered any more.
        if !inspector.validations.stop(waitingUpTo: 2) {
            logger.warning("a chain validation was still running 2 s after the loops stopped")
        }
        inspector.alerts.close()
        inspector.accessLog?.close()
        let unwritten = inspector.alerts.unwrittenLines + (inspector.accessLog?.unwrittenLines ?? 0)
        if unwritten > 0 {
            logger.error("stopped; \(inspector.alerts.written) alert line(s) written to \(inspector.alerts.path), \(unwritten) alert or access line(s) could not be written to their file and went to standard error")
        } else {
            logger.notice("stopped; \(inspector.alerts.written) alert line(s) written to \(inspector.alerts.path)")
        }
        linesLostToTheirFiles = unwritten
    }

    /// Alert and access lines that `shutdown` could not write to their files (standard error got them): `run` then
    /// exits 1.
    public private(set) var linesLostToTheirFiles = 0
}
