/// A point in time as whole seconds since 1970-01-01T00:00:00Z. The core never reads a clock: time is a parameter.
public struct UnixTime: Sendable, Hashable, Comparable, Codable {
    public var seconds: Int64
    public init(seconds: Int64) { self.seconds = seconds }
    public static func < (a: UnixTime, b: UnixTime) -> Bool { a.seconds < b.seconds }

    /// RFC 3339 in UTC, e.g. `2026-11-22T05:00:00Z`.
    public var rfc3339: String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secs = seconds - days * 86_400
        // Civil-from-days (Howard Hinnant).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        guard (0...9999).contains(y) else {
            func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
            return "\(y)-\(two(m))-\(two(d))T\(two(secs / 3600)):\(two(secs % 3600 / 60)):\(two(secs % 60))Z"
        }
        // Four-digit years, the only ones a certificate or a clock shows: digits straight into 20 bytes (four of
        // these per alert line; string interpolation cost ten times as much).
        return String(unsafeUninitializedCapacity: 20) { out in
            func put(_ value: Int64, _ width: Int, at index: Int) {
                var v = value
                for k in stride(from: index + width - 1, through: index, by: -1) {
                    out[k] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: v % 10)
                    v /= 10
                }
            }
            put(y, 4, at: 0); out[4] = UInt8(ascii: "-"); put(m, 2, at: 5); out[7] = UInt8(ascii: "-"); put(d, 2, at: 8)
            out[10] = UInt8(ascii: "T"); put(secs / 3600, 2, at: 11); out[13] = UInt8(ascii: ":")
            put(secs % 3600 / 60, 2, at: 14); out[16] = UInt8(ascii: ":"); put(secs % 60, 2, at: 17); out[19] = UInt8(ascii: "Z")
            return 20
        }
    }
}
