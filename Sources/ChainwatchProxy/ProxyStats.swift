import ChainwatchLock
import Synchronization

/// Process-wide counters, updated with atomics from every loop; `/metrics` reads them.
public final class ProxyStats: Sendable {
    public let openConnections = Atomic<Int>(0)
    public let acceptedConnections = Atomic<Int>(0)
    public let tunnelsOpened = Atomic<Int>(0)
    public let refused = Atomic<Int>(0)
    /// Tunnel and plain-HTTP bytes moved through the proxy's buffers (evbuffer chains: moved, not copied byte by
    /// byte, but through user space).
    public let bytesCopied = Atomic<Int>(0)
    /// Bytes moved by splice(2), socket to pipe to socket inside the kernel.
    public let bytesSpliced = Atomic<Int>(0)
    /// Counts kept per label value: how connections ended, and the statuses of the proxy's own answers.
    private let labelled = Lock<[Counted: Int]>([:])

    public enum Counted: Hashable, Sendable {
        /// A client connection closed: `tunnel` (CONNECT relayed), `blocked` (its verdict closed it), `http` (plain
        /// HTTP served), `refused` (the proxy answered with an error), `dropped` (it left before its request was
        /// complete).
        case closed(outcome: String)
        /// An answer of the proxy's own (`403`, `502`, ...).
        case response(status: Int)
    }

    public init() {}

    public func count(_ what: Counted) { labelled.withLock { $0[what, default: 0] += 1 } }

    /// Every labelled count so far.
    public var counts: [Counted: Int] { labelled.withLock { $0 } }
}
