/// A JSON value with ordered object keys, serialised on one line. Enough for alert lines; no Foundation.
public indirect enum JSONValue: Sendable, Equatable {
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
        var out = ""
        write(to: &out)
        return out
    }

    public func write(to out: inout String) {
        switch self {
        case .string(let s): Self.writeString(s, to: &out)
        case .int(let n): out += String(n)
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out += "," }
                Self.writeString(key, to: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Builds nested objects from dotted ECS names (`tls.server.hash.sha256`) in insertion order, skipping nil values.
public struct JSONObjectBuilder: Sendable {
    private var root: [(String, JSONValue)] = []
    public init() {}

    public mutating func set(_ dottedKey: String, _ value: JSONValue?) {
        guard let value else { return }
        let path = dottedKey.split(separator: ".").map(String.init)
        Self.insert(path[...], value, into: &root)
    }

    public mutating func set(_ dottedKey: String, _ value: String?) { set(dottedKey, value.map(JSONValue.string)) }
    public mutating func set(_ dottedKey: String, _ value: Int?) { set(dottedKey, value.map { JSONValue.int(Int64($0)) }) }
    public mutating func set(_ dottedKey: String, _ values: [String]?) { set(dottedKey, values.map { .array($0.map(JSONValue.string)) }) }

    private static func insert(_ path: ArraySlice<String>, _ value: JSONValue, into members: inout [(String, JSONValue)]) {
        let key = path.first!
        if path.count == 1 {
            if let i = members.firstIndex(where: { $0.0 == key }) { members[i].1 = value } else { members.append((key, value)) }
            return
        }
        var child: [(String, JSONValue)] = []
        let index = members.firstIndex { $0.0 == key }
        if let index, case .object(let existing) = members[index].1 { child = existing }
        insert(path.dropFirst(), value, into: &child)
        if let index { members[index].1 = .object(child) } else { members.append((key, .object(child))) }
    }

    public var value: JSONValue { .object(root) }
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
