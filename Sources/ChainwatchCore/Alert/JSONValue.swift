/// A JSON value with ordered object keys, serialised on one line. Enough for alert lines; no Foundation.
public enum JSONValue: Sendable, Equatable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case array([JSONValue])
    case object([(String, JSONValue)])
    case null

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): x == y
        case (.int(let x), .int(let y)): x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.null, .null): true
        default: false
        }
    }

    /// Compact JSON text, one line (no raw newlines can appear: they are escaped).
    public var serialized: String {
        var out: [UInt8] = []
        out.reserveCapacity(2048)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON text as UTF-8 (an alert line is written once per finding: bytes, not characters).
    public func write(to out: inout [UInt8]) {
        switch self {
        case .string(let s): Self.writeString(s, to: &out)
        case .int(let n): out.append(contentsOf: String(n).utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A JSON string: `"` and `\` escaped, and every control character (C0, DEL) and U+2028/U+2029 (line breaks
    /// to JavaScript) as `\uXXXX` or its short form. Runs of plain bytes are copied at once.
    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var runStart = 0
            var i = 0
            let count = bytes.count
            while i < count {
                let b = bytes[i]
                // The common case, a byte that is copied as it is: one comparison chain, no table, no allocation.
                if b >= 0x20 && b != 0x22 && b != 0x5C && b < 0x7F { i += 1; continue }
                if b >= 0x80 && !(b == 0xE2 && i + 2 < count && bytes[i + 1] == 0x80 && (bytes[i + 2] | 1) == 0xA9) {
                    i += 1
                    continue
                }
                if i > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
                var width = 1
                switch b {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0xE2:   // U+2028 / U+2029: line breaks to JavaScript
                    Self.appendUnicodeEscape(bytes[i + 2] == 0xA8 ? 0x2028 : 0x2029, to: &out)
                    width = 3
                default: Self.appendUnicodeEscape(UInt32(b), to: &out)   // C0 controls and DEL
                }
                i += width
                runStart = i
            }
            if count > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<count])) }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func appendUnicodeEscape(_ value: UInt32, to out: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        out.append(contentsOf: [0x5C, UInt8(ascii: "u")])
        for shift in [12, 8, 4, 0] as [UInt32] { out.append(digits.utf8Start[Int(value >> shift & 0xF)]) }
    }
}

/// Hex and base64 text for hashes.
public enum HashText {
    public static func hex(_ bytes: [UInt8], uppercase: Bool = true) -> String {
        let digits = Array((uppercase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }

    public static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out = [UInt8]()
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [table[Int(n >> 18)], table[Int(n >> 12 & 63)], table[Int(n >> 6 & 63)], table[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [table[Int(n >> 18)], table[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [table[Int(n >> 18)], table[Int(n >> 12 & 63)], table[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
