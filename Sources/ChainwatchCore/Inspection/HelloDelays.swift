/// How long tunnels' clients took to send their hellos: the first after chainwatch's connection for them was
/// established, and the second after the server's HelloRetryRequest when one came. The latest `capacity` tunnels of one
/// hello shape, each kept as a pair, so a spot check made alone waits one tunnel's pair (`ProbeHandshake`).
///
/// Why: an interceptor sees when each connection is established and when its hellos come. A tunnel's upstream
/// connection opens at the `CONNECT`, and its hello comes once the client has read the `200` and begun its handshake
/// (a round trip to the client and then some: 1.6 to 9 ms for curl on loopback, more for a client farther away);
/// its second hello a round trip after the retry. A check sent both at once (0.02 to 0.5 ms on loopback), and
/// adversarial reviews forged every connection whose hello, or second hello, came later than that: every check made
/// alone was spared. Drawn separately, the two delays of a shape with a fast and a slow client made fast-then-slow
/// checks no tunnel ever was (a third review spared those); drawn as one tunnel's pair they are a tunnel's.
public struct HelloDelays: Sendable, Equatable {
    /// One tunnel's delays, in microseconds: its hello's, and its second hello's (nil: no HelloRetryRequest came).
    public struct Sample: Sendable, Equatable {
        public var hello: Int64
        public var retry: Int64?

        public init(hello: Int64, retry: Int64? = nil) {
            self.hello = hello
            self.retry = retry
        }
    }

    public let capacity: Int
    /// The most a delay counts (a client that waited longer sends its hello late for its own reasons; a check's wait is
    /// also bounded by its probe's timeout, `SpotChecker`).
    public static let maxMicroseconds: Int64 = 2_000_000
    private var values: [Sample] = []
    private var next = 0

    public init(capacity: Int = 16) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { values.count }

    /// A tunnel's delays (below 0 counts as 0; above `maxMicroseconds` as that); the oldest goes once `capacity` are
    /// held.
    public mutating func record(_ sample: Sample) {
        let bound = { (value: Int64) in min(max(0, value), Self.maxMicroseconds) }
        let value = Sample(hello: bound(sample.hello), retry: sample.retry.map(bound))
        if values.count < capacity {
            values.append(value)
        } else {
            values[next] = value
            next = (next + 1) % capacity
        }
    }

    /// One held tunnel's delays, each tunnel as likely (`pick(n)` returns an index below `n`), the second hello's
    /// delay filled in with the first's when that tunnel had no retry (a round trip to the client either way: a check
    /// that meets a retry its tunnels did not answers as late as they sent their hellos, not at once); nil when none is
    /// held.
    public func draw(_ pick: (Int) -> Int) -> (hello: Int64, retry: Int64)? {
        guard !values.isEmpty else { return nil }
        let sample = values[min(max(0, pick(values.count)), values.count - 1)]
        return (sample.hello, sample.retry ?? sample.hello)
    }
}
