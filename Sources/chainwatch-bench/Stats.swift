import Histogram

/// The kinds of client sessions a run is made of.
enum SessionKind: String, Sendable, Codable {
    /// CONNECT, TLS handshake, one GET with a known body, close.
    case handshake
    /// CONNECT, then a raw byte stream of known content through the tunnel, verified byte by byte.
    case bulk
    /// CONNECT, a ping, hold the tunnel open until the run ends, a second ping, close.
    case idle
}

/// What the sessions of one kind did in one run. Each worker thread keeps its own; merged at the end.
struct KindStats: Sendable {
    static let maxDistinctFailures = 20

    var started = 0
    var completed = 0
    var failed = 0
    /// Sessions still running when the run's bound ended them; their verified bytes still count.
    var cutOff = 0
    /// Verified payload bytes (response bodies, bulk streams).
    var bytes = 0
    /// TLS handshakes that resumed a session (only with `--resume`).
    var resumed = 0
    /// Whole session, from connect() to the last verified byte, in microseconds.
    var latency = KindStats.histogram()
    /// From connect() to the proxy's `200` (or to TCP connected with `--direct`), in microseconds.
    var connect200 = KindStats.histogram()
    /// TLS handshake alone (after the 200), in microseconds.
    var tlsHandshake = KindStats.histogram()
    /// Distinct failure messages and how often each happened (at most `maxDistinctFailures`).
    var failures: [String: Int] = [:]

    static func histogram() -> Histogram<UInt64> {
        Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    mutating func recordFailure(_ message: String) {
        failed += 1
        if failures[message] != nil || failures.count < Self.maxDistinctFailures {
            failures[message, default: 0] += 1
        } else {
            failures["(other failures)", default: 0] += 1
        }
    }

    mutating func merge(_ other: KindStats) {
        started += other.started; completed += other.completed; failed += other.failed
        cutOff += other.cutOff; bytes += other.bytes; resumed += other.resumed
        latency.add(other.latency); connect200.add(other.connect200); tlsHandshake.add(other.tlsHandshake)
        for (message, count) in other.failures { failures[message, default: 0] += count }
    }

    /// Every started session ended exactly one way.
    var countsAddUp: Bool { started == completed + failed + cutOff }
}
