import Synchronization

/// Process-wide counters, updated with atomics from every loop.
public final class ProxyStats: Sendable {
    public let openConnections = Atomic<Int>(0)
    public let acceptedConnections = Atomic<Int>(0)
    public let tunnelsOpened = Atomic<Int>(0)
    public let refused = Atomic<Int>(0)
    public init() {}
}
