import CLibevent
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import Foundation
import Synchronization

/// Everything a client session needs to know about one run. Immutable; shared by worker threads.
struct ClientSettings: @unchecked Sendable {
    /// The proxy sessions connect to (unused with `--direct`: sessions then connect to their upstream).
    var firstHop: Endpoint
    /// True when sessions go through a proxy (send CONNECT and wait for 200 first).
    var viaProxy: Bool
    /// The proxy is a SOCKS 5 listener: sessions greet it and send a SOCKS CONNECT instead (`--via socks`).
    var socks = false
    /// Sessions connect to their upstream from this local address (`--via transparent`: the bench's nftables rule
    /// redirects that address's connections to the proxy's transparent listener); nil: the kernel picks.
    var sourceAddress: String?
    /// The HTTPS upstream (handshake sessions) and the raw upstream (bulk and idle sessions).
    var tlsUpstream: Endpoint
    var rawUpstream: Endpoint
    var tls: TLSContext?
    var sni: String?
    /// Each session sends a server name of its own (`--fresh-names`).
    var freshNames = false
    var path = "/body.bin"
    /// The body length every response must have; nil: whatever Content-Length says.
    var expectedBodyBytes: Int?
    /// Check every body byte against the pattern (only when the bench started the upstream).
    var verifyBody = true
    var bulkBytes = 64 << 20
    var upload = false
    var resume = false
    /// A session making no progress for this long fails.
    var timeout = 10.0
    /// The run stops early once this many sessions have failed (all workers together).
    var maxFailures = 10
    /// Bound by time: stop starting sessions after this; nil when bound by count.
    var duration: Double?
    /// How long in-flight handshake sessions may finish after the deadline before they are cut off.
    var grace = 5.0
    /// Open loop: new primary sessions per second for this worker (arrivals on a schedule, whatever the answers'
    /// pace); nil: closed loop (each lane starts its next session when the last one ends). Latency then counts
    /// from the scheduled arrival, so time spent waiting for a free lane is not hidden (no coordinated omission).
    var rate: Double?
}

/// Counters shared by the workers of one run.
final class RunShared: Sendable {
    /// Sessions of the primary kind still to start (Int.max: bound by time only).
    let budget: Atomic<Int>
    let failures = Atomic<Int>(0)
    /// Sessions that took a fresh server name (`--fresh-names`), over every run of this process: a later run (the
    /// other TLS version, through the same proxy) must not offer the names an earlier one did.
    static let freshNames = Atomic<Int>(0)
    /// Idle tunnels established and holding.
    let established = Atomic<Int>(0)

    init(budget: Int) { self.budget = Atomic(budget) }

    func take() -> Bool {
        while true {
            let now = budget.load(ordering: .relaxed)
            if now <= 0 { return false }
            if budget.compareExchange(expected: now, desired: now - 1, ordering: .relaxed).exchanged { return true }
        }
    }
}
