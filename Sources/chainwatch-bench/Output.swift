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
    for run in report.runs {
        guard let lines = run.alertLines else { continue }
        let sessions = run.kinds.reduce(0) { $0 + $1.completed }
        out += "alert lines \(run.label): \(lines) for \(sessions) sessions completed\n"
    }
    for run in report.runs {
        guard let redirected = run.redirected else { continue }
        out += "redirected \(run.label): \(redirected) connections for \(run.kinds.reduce(0) { $0 + $1.started }) sessions started\n"
    }
    for run in report.runs {
        guard let upstream = run.upstreamConnections, upstream > 0 else { continue }   // none counted (bulk, idle)
        // Handshake sessions only: a mixed run's bulk sessions make no TLS connection upstream (counting them hid
        // the probes' and spares' share).
        let started = run.kinds.filter { $0.kind == .handshake }.reduce(0) { $0 + $1.started }
        let extra = started > 0 ? " (\(number(Double(upstream - started) * 100 / Double(started), 2)) % more)" : ""
        out += "upstream TLS connections \(run.label): \(upstream) for \(started) TLS sessions started\(extra)\n"
    }
    out += report.ok ? "result: ok\n" : "result: FAILED (\(report.problems.count) problem(s))\n"
    return out
}

private let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]

private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
}

/// One metric of the runs, drawn in a panel of its own.
private enum Panel {
    /// Latency by percentile, one curve per run, on a log axis (ms).
    case latency(title: String, curves: [(label: String, points: [(p: Double, ms: Double)])])
    /// One bar per run, all in the panel's unit, from zero.
    case bars(title: String, unit: String, digits: Int, values: [(label: String, value: Double)])

    var itemCount: Int {
        switch self {
        case .latency(_, let curves): curves.count
        case .bars(_, _, _, let values): values.count
        }
    }
}

/// The pictures' panels: per session kind its latency distribution, then throughput, proxy CPU per connection and
/// per GiB, and memory per idle tunnel, each only when some run measured it. A panel holds one metric, so no two
/// units share an axis.
private func panels(_ reports: [Report]) -> [Panel] {
    var curves: [SessionKind: [(label: String, points: [(p: Double, ms: Double)])]] = [:]
    var connPerSecond: [(String, Double)] = [], megabytes: [(String, Double)] = []
    var cpuPerConnection: [(String, Double)] = [], cpuPerGiB: [(String, Double)] = [], perIdleTunnel: [(String, Double)] = []
    for report in reports {
        for run in report.runs {
            let runLabel = reports.count > 1 ? "\(report.scenario) \(run.label)" : run.label
            for kind in run.kinds {
                let label = run.kinds.count > 1 ? "\(runLabel) (\(kind.kind.rawValue))" : runLabel
                if kind.kind != .idle, !kind.latencyCurve.isEmpty {
                    curves[kind.kind, default: []].append((label, kind.latencyCurve.map { (p: $0[0], ms: $0[1] / 1000) }))
                }
                if kind.kind == .handshake { connPerSecond.append((label, kind.perSecond)) }
                if kind.kind == .bulk { megabytes.append((label, kind.megabytesPerSecond)) }
            }
            guard let proxy = run.proxy else { continue }
            if let v = proxy.cpuSecondsPer1000Connections { cpuPerConnection.append((runLabel, v * 1000)) }
            if let v = proxy.cpuSecondsPerGiB { cpuPerGiB.append((runLabel, v)) }
            if let v = proxy.rssKiBPerIdleTunnel { perIdleTunnel.append((runLabel, v)) }
        }
    }
    var out: [Panel] = []
    for kind in [SessionKind.handshake, .bulk] {
        if let c = curves[kind] {
            let what = kind == .handshake ? "Session latency (connect to body read)" : "Transfer latency"
            out.append(.latency(title: "\(what), ms by percentile", curves: c))
        }
    }
    let bars: [(String, String, Int, [(String, Double)])] = [
        ("Connections per second", "conn/s", 0, connPerSecond),
        ("Bulk throughput", "MB/s", 0, megabytes),
        ("Proxy CPU per connection", "µs", 0, cpuPerConnection),
        ("Proxy CPU per GiB relayed", "s", 2, cpuPerGiB),
        ("Proxy memory per idle tunnel", "KiB", 1, perIdleTunnel),
    ]
    for (title, unit, digits, values) in bars where !values.isEmpty {
        out.append(.bars(title: title, unit: unit, digits: digits, values: values.map { (label: $0.0, value: $0.1) }))
    }
    return out
}

/// What a panel's label is coloured by: the run's target and policy (`direct`, `tinyproxy`, `chainwatch block`), so
/// one proxy keeps one colour in every panel, whatever scenario, TLS version or session kind the label also names.
func colourKeys(_ reports: [Report]) -> [String: String] {
    var keys: [String: String] = [:]
    for report in reports {
        for run in report.runs {
            let runLabel = reports.count > 1 ? "\(report.scenario) \(run.label)" : run.label
            let key = run.target + (run.policy.map { " \($0)" } ?? "")
            keys[runLabel] = key
            for kind in run.kinds { keys["\(runLabel) (\(kind.kind.rawValue))"] = key }
        }
    }
    return keys
}

/// An SVG of the reports: one panel per metric (see `panels`), two columns. A proxy keeps one colour across panels.
func renderSVG(_ reports: [Report]) -> String {
    let all = panels(reports)
    let keys = colourKeys(reports)
    var colours: [String: String] = [:]
    func colour(_ label: String) -> String {
        let key = keys[label] ?? label
        if let c = colours[key] { return c }
        let c = palette[colours.count % palette.count]
        colours[key] = c
        return c
    }
    let panelWidth = 540.0, plotHeight = 220.0, column = [20.0, 580.0]
    func height(_ panel: Panel) -> Double {
        switch panel {
        case .latency: 40 + plotHeight + 30 + Double(panel.itemCount) * 16 + 20
        case .bars: 40 + Double(panel.itemCount) * 34 + 20
        }
    }
    var body = "", columnBottom = [0.0, 0.0]
    for panel in all {
        let c = columnBottom[0] <= columnBottom[1] ? 0 : 1
        let origin = (x: column[c], y: columnBottom[c])
        columnBottom[c] += height(panel)
        switch panel {
        case .latency(let title, let curves):
            body += latencyPanel(title, curves, at: origin, width: panelWidth, plotHeight: plotHeight, colour: colour)
        case .bars(let title, let unit, let digits, let values):
            body += barPanel(title, unit: unit, digits: digits, values, at: origin, width: panelWidth, colour: colour)
        }
    }
    if all.isEmpty { body = "<text x=\"20\" y=\"30\" font-size=\"14\">No measurement to draw (no session completed).</text>\n" }
    let totalHeight = max(columnBottom.max() ?? 0, 60)
    return """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(column[1] + panelWidth + 20))" height="\(Int(totalHeight))" font-family="sans-serif" font-size="11">
        <rect width="100%" height="100%" fill="white"/>
        \(body)</svg>

        """
}

private func fmt(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }

/// Percentile curves: x is -log10(1 - p/100), so p90, p99, p99.9, p99.99 are evenly spaced, max at the right edge;
/// y is log10(ms), decades labelled, so a handshake's 1 ms and a tail's 100 ms both read.
private func latencyPanel(_ title: String, _ curves: [(label: String, points: [(p: Double, ms: Double)])],
                          at origin: (x: Double, y: Double), width: Double, plotHeight: Double,
                          colour: (String) -> String) -> String {
    let plot = (x: origin.x + 50, y: origin.y + 40, w: width - 60, h: plotHeight)
    let values = curves.flatMap { $0.points.map(\.ms) }.filter { $0 > 0 }
    let low = floor(log10(values.min() ?? 0.1)), high = max(ceil(log10(values.max() ?? 1)), low + 1)
    func px(_ p: Double) -> Double {
        let v = p >= 100 ? 4.6 : min(-log10(1 - p / 100), 4.3)
        return plot.x + v / 4.6 * plot.w
    }
    func py(_ ms: Double) -> Double { plot.y + plot.h - (log10(max(ms, pow(10, low))) - low) / (high - low) * plot.h }
    var svg = "<text x=\"\(plot.x)\" y=\"\(origin.y + 24)\" font-size=\"14\">\(escape(title)) (log scale)</text>\n"
    svg += "<rect x=\"\(plot.x)\" y=\"\(plot.y)\" width=\"\(plot.w)\" height=\"\(plot.h)\" fill=\"none\" stroke=\"#999\"/>\n"
    for p in [0.0, 50, 90, 99, 99.9, 99.99, 100] {
        let x = fmt(px(p))
        svg += "<line x1=\"\(x)\" y1=\"\(plot.y)\" x2=\"\(x)\" y2=\"\(plot.y + plot.h)\" stroke=\"#eee\"/>"
        svg += "<text x=\"\(x)\" y=\"\(plot.y + plot.h + 14)\" text-anchor=\"middle\">\(p == 100 ? "max" : "p\(p.truncatingRemainder(dividingBy: 1) == 0 ? String(Int(p)) : String(p))")</text>\n"
    }
    for decade in Int(low)...Int(high) {
        for step in [1.0, 2, 5] {
            let v = pow(10, Double(decade)) * step
            guard v <= pow(10, high) * 1.0001 else { continue }
            let y = fmt(py(v))
            svg += "<line x1=\"\(plot.x)\" y1=\"\(y)\" x2=\"\(plot.x + plot.w)\" y2=\"\(y)\" stroke=\"\(step == 1 ? "#ddd" : "#f3f3f3")\"/>"
            if step == 1 {
                let text = decade >= 0 ? String(Int(v)) : String(format: "%.\(-decade)f", v)
                svg += "<text x=\"\(plot.x - 4)\" y=\"\(fmt(py(v) + 4))\" text-anchor=\"end\">\(text)</text>"
            }
            svg += "\n"
        }
    }
    for (i, curve) in curves.enumerated() {
        let c = colour(curve.label)
        let path = curve.points.map { "\(fmt(px($0.p))),\(fmt(py($0.ms)))" }.joined(separator: " ")
        svg += "<polyline fill=\"none\" stroke=\"\(c)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
        let y = plot.y + plot.h + 30 + Double(i) * 16
        svg += "<rect x=\"\(plot.x)\" y=\"\(y)\" width=\"10\" height=\"10\" fill=\"\(c)\"/>"
        svg += "<text x=\"\(plot.x + 16)\" y=\"\(y + 9)\">\(escape(curve.label))</text>\n"
    }
    return svg
}

/// Horizontal bars from zero, one unit for the whole panel, each value written beside its bar.
private func barPanel(_ title: String, unit: String, digits: Int, _ values: [(label: String, value: Double)],
                      at origin: (x: Double, y: Double), width: Double, colour: (String) -> String) -> String {
    let area = (x: origin.x + 50, y: origin.y + 40, w: width - 160)
    let top = max(values.map(\.value).max() ?? 0, 1e-9)
    var svg = "<text x=\"\(area.x)\" y=\"\(origin.y + 24)\" font-size=\"14\">\(escape(title)) (\(escape(unit)))</text>\n"
    for (i, bar) in values.enumerated() {
        let w = max(bar.value, 0) / top * area.w, y = area.y + Double(i) * 34
        svg += "<text x=\"\(area.x)\" y=\"\(y + 10)\">\(escape(bar.label))</text>"
        svg += "<rect x=\"\(area.x)\" y=\"\(y + 14)\" width=\"\(fmt(w))\" height=\"12\" fill=\"\(colour(bar.label))\"/>"
        svg += "<text x=\"\(fmt(area.x + w + 6))\" y=\"\(y + 24)\">\(fmt(bar.value, digits)) \(escape(unit))</text>\n"
    }
    return svg
}

/// Writes the picture as SVG, and as PNG beside it when asked (rasterised by `rsvg-convert`, Debian's
/// librsvg2-bin).
func writePictures(_ reports: [Report], svg: String?, png: String?) throws {
    guard svg != nil || png != nil else { return }
    let text = renderSVG(reports)
    if let svg { try text.write(toFile: svg, atomically: true, encoding: .utf8) }
    guard let png else { return }
    // rsvg-convert reads the SVG from a file, not a pipe: a converter that is missing or fails early
    // would leave the bench writing into a closed pipe (SIGPIPE).
    let scratch = svg == nil ? try TempDirectory() : nil   // private: a fixed name in /tmp could be another user's link
    defer { scratch?.remove() }
    let input = svg ?? scratch!.file("chart.svg")
    if svg == nil { try text.write(toFile: input, atomically: false, encoding: .utf8) }
    do { try runTool("rsvg-convert", ["--format=png", "--output=\(png)", input]) } catch {
        throw BenchError("--png: \(error.description) (rsvg-convert is in librsvg2-bin: apt-get install librsvg2-bin)")
    }
}
