/// Metrics in the Prometheus text exposition format (version 0.0.4): each family once, with its HELP and TYPE,
/// then its samples. Label values are escaped (backslash, double quote, newline), so a host name or a reason
/// cannot break a line. Pure: the caller passes every value.
public struct PrometheusText: Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }

    public private(set) var text = ""
    private var families: Set<String> = []

    public init() {}

    /// Starts a family. Each name is declared once; counters' names end in `_total` by convention (not checked).
    public mutating func family(_ name: String, _ kind: Kind, _ help: String) {
        precondition(families.insert(name).inserted, "metric family \(name) declared twice")
        text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
    }

    /// One sample of the family just declared (or, for a histogram, of its `_bucket`, `_sum` and `_count`).
    public mutating func sample(_ name: String, _ labels: KeyValuePairs<String, String> = [:], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.key)=\"\(Self.escapeLabel($0.value))\"" }.joined(separator: ",") + "}"
        }
        text += " " + Self.format(value) + "\n"
    }

    public mutating func sample(_ name: String, _ labels: KeyValuePairs<String, String> = [:], _ value: Int) {
        sample(name, labels, Double(value))
    }

    /// A whole histogram family: cumulative `le` buckets (upper bounds ascending, `+Inf` last), sum and count.
    public mutating func histogram(_ name: String, _ help: String, bounds: [Double], counts: [Int], sum: Double) {
        precondition(counts.count == bounds.count + 1, "one count per bound and one for +Inf")
        family(name, .histogram, help)
        var cumulative = 0
        for (i, bound) in bounds.enumerated() {
            cumulative += counts[i]
            sample(name + "_bucket", ["le": Self.format(bound)], cumulative)
        }
        cumulative += counts[bounds.count]
        sample(name + "_bucket", ["le": "+Inf"], cumulative)
        sample(name + "_sum", [:], sum)
        sample(name + "_count", [:], cumulative)
    }

    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func escapeLabel(_ value: String) -> String {
        guard value.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return value }
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func escapeHelp(_ value: String) -> String {
        value.replacing("\\", with: "\\\\").replacing("\n", with: "\\n")
    }
}

/// Observations counted into fixed buckets, for a Prometheus histogram. Pure; the caller locks.
public struct Histogram: Sendable {
    /// Upper bounds, ascending.
    public let bounds: [Double]
    /// One count per bound, then one for everything above the last.
    public private(set) var counts: [Int]
    public private(set) var sum: Double = 0

    public init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count + 1)
    }

    /// A copy whose counts have storage of their own, for a histogram read out of a lock that others observe into
    /// (a copy sharing the storage would be read while an observer, once the copy is gone, writes it in place).
    public func detached() -> Histogram {
        var copy = self
        copy.counts = counts.map { $0 }
        return copy
    }

    public mutating func observe(_ value: Double) {
        counts[bounds.firstIndex { value <= $0 } ?? bounds.count] += 1
        sum += value
    }

    /// Seconds from 1 ms to 10 s: probe handshakes on loopback take a few ms, across the Internet tens to hundreds.
    public static let latencySeconds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
}
