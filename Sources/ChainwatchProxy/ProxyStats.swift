import ChainwatchLock
import Synchronization

/// Process-wide counters, updated with atomics from every loop; `/metrics` reads them.
public final class ProxyStats: Sendable {
    public let openConnections = Atomic<Int>(0)
    public let acceptedConnections = Atomic<Int>(0)
    public let tunnelsOpened = Atomic<Int>(0)
    /// Tunnel and plain-HTTP bytes moved through the proxy's buffers (evbuffer chains: moved, not copied byte by
    /// byte, but through user space).
    public let bytesCopied = Atomic<Int>(0)
    /// Bytes moved by splice(2), socket to pipe to socket inside the kernel.
    public let bytesSpliced = Atomic<Int>(0)
    /// Connections closed, one counter per `CloseOutcome`: no lock on the close path.
    private let closedTunnel = Atomic<Int>(0), closedBlocked = Atomic<Int>(0), closedHTTP = Atomic<Int>(0)
    private let closedRefused = Atomic<Int>(0), closedDropped = Atomic<Int>(0)
    /// The statuses of the proxy's own answers (error paths: a lock is fine there).
    private let responseCounts = Lock<[Int: Int]>([:])

    public init() {}

    public func closed(_ outcome: CloseOutcome) {
        switch outcome {
        case .tunnel: closedTunnel.add(1, ordering: .relaxed)
        case .blocked: closedBlocked.add(1, ordering: .relaxed)
        case .http: closedHTTP.add(1, ordering: .relaxed)
        case .refused: closedRefused.add(1, ordering: .relaxed)
        case .dropped: closedDropped.add(1, ordering: .relaxed)
        }
    }

    public func closedCount(_ outcome: CloseOutcome) -> Int {
        switch outcome {
        case .tunnel: closedTunnel.load(ordering: .relaxed)
        case .blocked: closedBlocked.load(ordering: .relaxed)
        case .http: closedHTTP.load(ordering: .relaxed)
        case .refused: closedRefused.load(ordering: .relaxed)
        case .dropped: closedDropped.load(ordering: .relaxed)
        }
    }

    /// An answer of the proxy's own (`403`, `502`, ...).
    public func responded(status: Int) { responseCounts.withLock { $0[status, default: 0] += 1 } }

    /// The proxy's own answers so far, by status: copied under the lock into storage of its own (`Inspector.verdicts`).
    public var responses: [Int: Int] { responseCounts.withLock { Dictionary(uniqueKeysWithValues: $0.map { ($0.key, $0.value) }) } }
}

/// How a client connection ended, for `chainwatch_connections_closed_total`.
public enum CloseOutcome: String, Sendable, CaseIterable {
    /// A CONNECT tunnel was relayed.
    case tunnel
    /// A verdict closed it.
    case blocked
    /// Plain HTTP was served.
    case http
    /// The proxy answered with an error.
    case refused
    /// The client left before its request was complete.
    case dropped
}
