import Histogram

/// Latency percentiles in microseconds.
struct LatencySummary: Codable, Sendable {
    var count: UInt64
    var p50: UInt64
    var p90: UInt64
    var p99: UInt64
    var max: UInt64
    var mean: Double

    init?(_ histogram: Histogram<UInt64>) {
        guard histogram.totalCount > 0 else { return nil }
        count = histogram.totalCount
        p50 = histogram.valueAtPercentile(50)
        p90 = histogram.valueAtPercentile(90)
        p99 = histogram.valueAtPercentile(99)
        max = histogram.max
        mean = (histogram.mean * 10).rounded() / 10
    }
}

/// One kind of session in one run, as reported.
struct KindResult: Codable, Sendable {
    var kind: SessionKind
    var started: Int
    var completed: Int
    var failed: Int
    var cutOff: Int
    /// started == completed + failed + cutOff.
    var countsAddUp: Bool
    var verifiedBytes: Int
    var resumed: Int
    /// Completed sessions per second.
    var perSecond: Double
    /// Verified payload megabytes (10^6 bytes) per second.
    var megabytesPerSecond: Double
    var latencyMicros: LatencySummary?
    var connect200Micros: LatencySummary?
    var tlsHandshakeMicros: LatencySummary?
    /// (percentile, microseconds) points of the latency distribution, for plots.
    var latencyCurve: [[Double]]
    var failures: [String: Int]

    init(kind: SessionKind, stats: KindStats, seconds: Double) {
        self.kind = kind
        started = stats.started; completed = stats.completed; failed = stats.failed; cutOff = stats.cutOff
        countsAddUp = stats.countsAddUp
        verifiedBytes = stats.bytes
        resumed = stats.resumed
        perSecond = seconds > 0 ? (Double(stats.completed) / seconds * 10).rounded() / 10 : 0
        megabytesPerSecond = seconds > 0 ? (Double(stats.bytes) / 1e6 / seconds * 10).rounded() / 10 : 0
        latencyMicros = LatencySummary(stats.latency)
        connect200Micros = LatencySummary(stats.connect200)
        tlsHandshakeMicros = LatencySummary(stats.tlsHandshake)
        latencyCurve = stats.latency.totalCount == 0 ? [] : [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100].map {
            [$0, Double(stats.latency.valueAtPercentile($0))]
        }
        failures = stats.failures
    }
}

/// What the measured proxy (and its child processes) used during one run, from /proc.
struct ProxyUsage: Codable, Sendable {
    var pid: Int32
    var processes: Int
    var cpuSeconds: Double
    var cpuSecondsPer1000Connections: Double?
    var cpuSecondsPerGiB: Double?
    var rssKiBBefore: Int
    var rssKiBAfter: Int
    var rssKiBPeak: Int
    /// Idle runs: RSS while all tunnels were held, and (that − before) / tunnels.
    var rssKiBHolding: Int?
    var rssKiBPerIdleTunnel: Double?
}

/// One run: one target (direct or a proxy), one TLS version, one policy.
struct RunResult: Codable, Sendable {
    var label: String
    var scenario: String
    /// "direct" or the proxy's name.
    var target: String
    var tls: String?
    var policy: String?
    var concurrency: Int
    var elapsedSeconds: Double
    var kinds: [KindResult]
    var proxy: ProxyUsage?
    /// Idle runs: tunnels that were open at the same time.
    var idleTunnelsHeld: Int?
    /// Lines the started chainwatch wrote to its alert log during this run (nil when the bench did not start it with
    /// its own `--alert-log`): one per completed session under `flagged`, none under `alert` or `block`.
    var alertLines: Int? = nil
    /// `--via transparent`: connections the bench's redirect rule sent to the transparent listener during this run
    /// (its nftables counter); every session's connection must be one, or some went to the upstream straight.
    var redirected: Int? = nil
    /// TLS connections the builtin upstream accepted during this run (nil with another upstream): one per session,
    /// and what the proxy added (probes, spot checks, spare connections).
    var upstreamConnections: Int? = nil
    var ok: Bool
}

/// The whole report of one bench invocation.
struct Report: Codable, Sendable {
    var tool = "chainwatch-bench"
    var scenario: String
    var bound: String
    var upstream: String
    var runs: [RunResult]
    var ok: Bool
    var problems: [String]
}
