/// How long tunnels' clients took to send their hello after chainwatch's connection for them was established: the
/// latest `capacity` of them for one hello shape, so a spot check made alone waits one of them between its own
/// connection and its hello (`ProbeHandshake`).
///
/// Why: an interceptor sees when each connection is established and when its hello comes. A tunnel's upstream
/// connection opens at the `CONNECT`, and its hello comes once the client has read the `200` and begun its handshake
/// (a round trip to the client and then some: 1.6 to 9 ms for curl on loopback, more for a client farther away),
/// while a check sent its hello as soon as it was connected (0.2 to 0.5 ms on loopback). An adversarial review forged
/// every connection whose hello came 1 ms or more after it was established and spared the rest: every check made
/// alone was spared, and the forged pages went unseen. A check that waits a delay drawn from the tunnels' own is not
/// told by it.
public struct HelloDelays: Sendable, Equatable {
    public let capacity: Int
    /// The most a delay counts (a client that waited longer sends its hello late for its own reasons; a check's wait is
    /// also bounded by its probe's timeout, `SpotChecker`).
    public static let maxMicroseconds: Int64 = 2_000_000
    private var values: [Int64] = []
    private var next = 0

    public init(capacity: Int = 16) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { values.count }

    /// A tunnel's delay, in microseconds (below 0 counts as 0; above `maxMicroseconds` as that); the oldest goes once
    /// `capacity` are held.
    public mutating func record(_ microseconds: Int64) {
        let value = min(max(0, microseconds), Self.maxMicroseconds)
        if values.count < capacity {
            values.append(value)
        } else {
            values[next] = value
            next = (next + 1) % capacity
        }
    }

    /// One of the held delays, each as likely (`pick(n)` returns an index below `n`); 0 when none is held (the check
    /// sends its hello at once, as before any tunnel was seen).
    public func draw(_ pick: (Int) -> Int) -> Int64 {
        guard !values.isEmpty else { return 0 }
        return values[min(max(0, pick(values.count)), values.count - 1)]
    }
}
