import Foundation

private func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let count = text.count
    if count >= width { return text }
    let space = String(repeating: " ", count: width - count)
    return right ? space + text : text + space
}

private func ms(_ micros: UInt64?) -> String {
    guard let micros else { return "-" }
    return String(format: "%.2f", Double(micros) / 1000)
}

private func number(_ value: Double?, _ digits: Int = 1) -> String {
    guard let value else { return "-" }
    return String(format: "%.\(digits)f", value)
}

/// The human table: one row per run and session kind, then ratios to the direct baseline.
func renderTable(_ report: Report) -> String {
    var out = "\(report.scenario) · \(report.bound) · upstream: \(report.upstream)\n"
    let header = [("run", 28), ("kind", 9), ("done", 7), ("fail", 5), ("cut", 4), ("conn/s", 9), ("MB/s", 9),
                  ("p50 ms", 8), ("p90 ms", 8), ("p99 ms", 8), ("max ms", 8), ("200 p50", 8), ("200 p99", 8),
                  ("cpu s", 7), ("s/1k conn", 9), ("s/GiB", 7), ("RSS KiB", 9), ("KiB/tun", 8)]
    out += header.enumerated().map { pad($0.element.0, $0.element.1, right: $0.offset >= 2) }.joined(separator: " ") + "\n"
    for run in report.runs {
        for kind in run.kinds {
            let p = run.proxy
            let cells = [run.label, kind.kind.rawValue, String(kind.completed), String(kind.failed), String(kind.cutOff),
                         number(kind.perSecond), number(kind.megabytesPerSecond),
                         ms(kind.latencyMicros?.p50), ms(kind.latencyMicros?.p90), ms(kind.latencyMicros?.p99), ms(kind.latencyMicros?.max),
                         ms(kind.connect200Micros?.p50), ms(kind.connect200Micros?.p99),
                         number(p?.cpuSeconds, 2), number(p?.cpuSecondsPer1000Connections, 3), number(p?.cpuSecondsPerGiB, 2),
                         p.map { String($0.rssKiBPeak) } ?? "-", number(p?.rssKiBPerIdleTunnel, 1)]
            out += cells.enumerated().map { pad($0.element, header[$0.offset].1, right: $0.offset >= 2) }.joined(separator: " ") + "\n"
        }
    }
    for run in report.runs where run.target != "direct" {
        guard let base = report.runs.first(where: { $0.target == "direct" && $0.tls == run.tls }) else { continue }
        for kind in run.kinds {
            guard let baseKind = base.kinds.first(where: { $0.kind == kind.kind }) else { continue }
            var parts: [String] = []
            if kind.kind == .handshake, baseKind.perSecond > 0 { parts.append("conn/s \(number(kind.perSecond / baseKind.perSecond, 2))×") }
            if kind.kind == .bulk, baseKind.megabytesPerSecond > 0 { parts.append("MB/s \(number(kind.megabytesPerSecond / baseKind.megabytesPerSecond, 2))×") }
            if let a = kind.latencyMicros, let b = baseKind.latencyMicros, b.p50 > 0, b.p99 > 0 {
                parts.append("p50 \(number(Double(a.p50) / Double(b.p50), 2))×")
                parts.append("p99 \(number(Double(a.p99) / Double(b.p99), 2))×")
            }
            if !parts.isEmpty { out += "ratio \(run.label) / \(base.label) [\(kind.kind.rawValue)]: \(parts.joined(separator: ", "))\n" }
        }
    }
    out += report.ok ? "result: ok\n" : "result: FAILED (\(report.problems.count) problem(s))\n"
    return out
}

private let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]

private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
}

/// An SVG with the latency distributions (percentile curves, log-scaled tail) on the left and the
/// throughput of every run (conn/s for short sessions, MB/s for bulk) on the right.
func renderSVG(_ reports: [Report]) -> String {
    struct Series { var label: String; var points: [(Double, Double)] }
    struct Bar { var label: String; var value: Double; var unit: String }
    var series: [Series] = []
    var bars: [Bar] = []
    for report in reports {
        for run in report.runs {
            for kind in run.kinds {
                let label = "\(report.scenario) \(run.label) \(kind.kind.rawValue)"
                if kind.kind != .idle, !kind.latencyCurve.isEmpty {
                    series.append(Series(label: label, points: kind.latencyCurve.map { ($0[0], $0[1] / 1000) }))
                }
                if kind.kind == .handshake { bars.append(Bar(label: label, value: kind.perSecond, unit: "conn/s")) }
                if kind.kind == .bulk { bars.append(Bar(label: label, value: kind.megabytesPerSecond, unit: "MB/s")) }
            }
        }
    }
    let width = 1100.0, height = 480.0
    let left = (x: 60.0, y: 40.0, w: 440.0, h: 300.0)
    // x: percentile p → -log10(1 - p/100), so 90, 99, 99.9, 99.99 are evenly spaced; max at the right edge.
    func px(_ p: Double) -> Double {
        let v = p >= 100 ? 4.6 : min(-log10(1 - p / 100), 4.3)
        return left.x + v / 4.6 * left.w
    }
    let maxY = max(series.flatMap { $0.points.map(\.1) }.max() ?? 1, 0.001) * 1.05
    func py(_ ms: Double) -> Double { left.y + left.h - ms / maxY * left.h }
    var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height + Double(max(series.count, bars.count)) * 16))" font-family="sans-serif" font-size="11">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(left.x)" y="20" font-size="14">Latency distribution (ms) by percentile</text>
        <rect x="\(left.x)" y="\(left.y)" width="\(left.w)" height="\(left.h)" fill="none" stroke="#999"/>

        """
    for p in [0.0, 50, 90, 99, 99.9, 99.99, 100] {
        let x = px(p)
        svg += "<line x1=\"\(x)\" y1=\"\(left.y)\" x2=\"\(x)\" y2=\"\(left.y + left.h)\" stroke=\"#eee\"/>"
        svg += "<text x=\"\(x)\" y=\"\(left.y + left.h + 14)\" text-anchor=\"middle\">\(p == 100 ? "max" : "p\(p.truncatingRemainder(dividingBy: 1) == 0 ? String(Int(p)) : String(p))")</text>\n"
    }
    for i in 0...4 {
        let v = maxY * Double(i) / 4
        svg += "<text x=\"\(left.x - 4)\" y=\"\(py(v) + 4)\" text-anchor=\"end\">\(String(format: "%.2f", v))</text>\n"
    }
    for (i, s) in series.enumerated() {
        let color = palette[i % palette.count]
        let path = s.points.map { "\(String(format: "%.1f", px($0.0))),\(String(format: "%.1f", py($0.1)))" }.joined(separator: " ")
        svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
        svg += "<rect x=\"\(left.x)\" y=\"\(left.y + left.h + 30 + Double(i) * 16)\" width=\"10\" height=\"10\" fill=\"\(color)\"/>"
        svg += "<text x=\"\(left.x + 16)\" y=\"\(left.y + left.h + 39 + Double(i) * 16)\">\(escape(s.label))</text>\n"
    }
    let right = (x: 600.0, y: 40.0, w: 300.0)
    svg += "<text x=\"\(right.x)\" y=\"20\" font-size=\"14\">Throughput</text>\n"
    for (i, bar) in bars.enumerated() {
        let sameUnit = bars.filter { $0.unit == bar.unit }.map(\.value).max() ?? 1
        let w = sameUnit > 0 ? bar.value / sameUnit * right.w : 0
        let y = right.y + Double(i) * 34
        let color = palette[i % palette.count]
        svg += "<text x=\"\(right.x)\" y=\"\(y + 10)\">\(escape(bar.label))</text>"
        svg += "<rect x=\"\(right.x)\" y=\"\(y + 14)\" width=\"\(String(format: "%.1f", w))\" height=\"12\" fill=\"\(color)\"/>"
        svg += "<text x=\"\(right.x + w + 6)\" y=\"\(y + 24)\">\(String(format: "%.1f", bar.value)) \(bar.unit)</text>\n"
    }
    svg += "</svg>\n"
    return svg
}
