/// Lets the first of a run of like events through per key and window, and counts the rest: an upstream flagged on
/// every connection writes every alert line (the alert log is the record), but one operator log line per window.
public struct RepeatThrottle: Sendable {
    public let windowMilliseconds: Int64
    public let maxKeys: Int
    private var entries: [String: (since: Int64, suppressed: Int)] = [:]

    public init(windowMilliseconds: Int64 = 10_000, maxKeys: Int = 4096) {
        self.windowMilliseconds = windowMilliseconds
        self.maxKeys = maxKeys
    }

    /// Whether an event with `key` at `now` is let through, and how many like it were held back since the last one
    /// that was (said with this one).
    public mutating func admit(_ key: String, now: Int64) -> (admitted: Bool, suppressed: Int) {
        if let entry = entries[key], now - entry.since < windowMilliseconds {
            entries[key] = (entry.since, entry.suppressed + 1)
            return (false, 0)
        }
        let suppressed = entries[key]?.suppressed ?? 0
        if entries[key] == nil, entries.count >= maxKeys {
            entries = entries.filter { now - $0.value.since < windowMilliseconds }
            if entries.count >= maxKeys { entries.removeAll() }   // bounded, whatever the key spread
        }
        entries[key] = (now, 0)
        return (true, suppressed)
    }
}
