/// Writes one JSON object straight to UTF-8 bytes, in the order fields are given, skipping nil values and objects
/// that end up empty. What an alert line needs once per finding: no intermediate tree, no per-field allocation
/// beyond the output. Nested values given whole (an array of objects) are `JSONValue`s.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Per open object: whether it has a member yet (a comma goes before the next).
    private var hasMember: [Bool] = [false]

    public init() {
        bytes.reserveCapacity(2048)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Names are literals of printable ASCII without quotes or backslashes (`JSONWriterNamesTests` checks every one
    /// the sources pass; the `assert` only in debug builds): their bytes
    /// are copied as they are, with no escaping pass (a third of a line's cost when they were `String`s).
    private mutating func key(_ key: StaticString) {
        if hasMember[hasMember.count - 1] { bytes.append(UInt8(ascii: ",")) }
        hasMember[hasMember.count - 1] = true
        bytes.append(UInt8(ascii: "\""))
        let name = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        assert(name.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }, "JSON name needs escaping: \(key)")
        bytes.append(contentsOf: name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        JSONValue.writeString(value, to: &bytes)
    }

    public mutating func field(_ name: StaticString, _ value: Int?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func field(_ name: StaticString, _ value: Bool?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public mutating func field(_ name: StaticString, _ values: [String]?) {
        guard let values else { return }
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.writeString(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    public mutating func field(_ name: StaticString, _ value: JSONValue?) {
        guard let value else { return }
        key(name)
        value.write(to: &bytes)
    }

    /// A nested object; left out when `body` writes nothing into it.
    public mutating func object(_ name: StaticString, _ body: (inout JSONWriter) -> Void) {
        let mark = bytes.count, hadMember = hasMember[hasMember.count - 1]
        key(name)
        bytes.append(UInt8(ascii: "{"))
        hasMember.append(false)
        body(&self)
        let wroteAny = hasMember.removeLast()
        if wroteAny {
            bytes.append(UInt8(ascii: "}"))
        } else {
            bytes.removeSubrange(mark...)
            hasMember[hasMember.count - 1] = hadMember
        }
    }

    /// What `body` writes into an object of its own, as bytes without the braces: members to place with
    /// `members(_:)` into any number of later lines.
    public static func members(_ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var writer = JSONWriter()
        body(&writer)
        return Array(writer.bytes.dropFirst())
    }

    /// Members rendered by `members(_:)`, placed as if written here.
    public mutating func members(_ rendered: [UInt8]) {
        guard !rendered.isEmpty else { return }
        if hasMember[hasMember.count - 1] { bytes.append(UInt8(ascii: ",")) }
        hasMember[hasMember.count - 1] = true
        bytes.append(contentsOf: rendered)
    }

    /// The object as text, closed.
    public var text: String {
        var closed = bytes
        closed.append(UInt8(ascii: "}"))
        return String(decoding: closed, as: UTF8.self)
    }
}
