import Testing
@testable import ChainwatchCore

/// The text exposition format, line by line (the e2e tests parse a whole `/metrics` with prometheus_client).
@Suite struct PrometheusTextTests {
    @Test func familiesSamplesAndEscapedLabels() {
        var m = PrometheusText()
        m.family("chainwatch_x_total", .counter, "Things, with a \\ and a\nnewline.")
        m.sample("chainwatch_x_total", ["host": "a\"b\\c\nd", "port": "443"], 3)
        m.sample("chainwatch_x_total", [:], 0.25)
        #expect(m.text == """
            # HELP chainwatch_x_total Things, with a \\\\ and a\\nnewline.
            # TYPE chainwatch_x_total counter
            chainwatch_x_total{host="a\\"b\\\\c\\nd",port="443"} 3
            chainwatch_x_total 0.25

            """)
    }

    @Test func histogramBucketsAreCumulative() {
        var h = Histogram(bounds: [0.01, 0.1, 1])
        for v in [0.005, 0.01, 0.05, 0.5, 3, 7] { h.observe(v) }
        #expect(h.counts == [2, 1, 1, 2])
        var m = PrometheusText()
        m.histogram("probe_seconds", "Probe time.", bounds: h.bounds, counts: h.counts, sum: h.sum)
        let lines = m.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("probe_seconds_bucket{le=\"0.01\"} 2"))
        #expect(lines.contains("probe_seconds_bucket{le=\"0.1\"} 3"))
        #expect(lines.contains("probe_seconds_bucket{le=\"1\"} 4"))
        #expect(lines.contains("probe_seconds_bucket{le=\"+Inf\"} 6"))
        #expect(lines.contains("probe_seconds_count 6"))
        #expect(lines.contains("probe_seconds_sum 10.565"))
        #expect(lines[1] == "# TYPE probe_seconds histogram")
    }

    @Test func valuesAreFormattedAsPrometheusReadsThem() {
        #expect(PrometheusText.format(3) == "3")
        #expect(PrometheusText.format(1e20) == "1e+20")
        #expect(PrometheusText.format(.infinity) == "+Inf")
        #expect(PrometheusText.format(.nan) == "NaN")
    }

    /// `detached()` copies the counts into storage of their own (a plain copy shares it until one side writes):
    /// what a reader takes out of a lock that observers write under.
    @Test func aDetachedHistogramSharesNoStorage() {
        var h = Histogram(bounds: [1, 2])
        h.observe(1.5)
        let plain = h, detached = h.detached()
        let base = { (x: Histogram) in x.counts.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
        #expect(base(plain) == base(h))
        #expect(base(detached) != base(h))
        #expect(detached.counts == h.counts && detached.sum == h.sum && detached.bounds == h.bounds)
    }
}
