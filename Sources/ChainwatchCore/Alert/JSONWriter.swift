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

    private mutating func key(_ key: String) {
        if hasMember[hasMember.count - 1] { bytes.append(UInt8(ascii: ",")) }
        hasMember[hasMember.count - 1] = true
        JSONValue.writeString(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func field(_ name: String, _ value: String?) {
        guard let value else { return }
        key(name)
        JSONValue.writeString(value, to: &bytes)
    }

    public mutating func field(_ name: String, _ value: Int?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func field(_ name: String, _ value: Bool?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public mutating func field(_ name: String, _ values: [String]?) {
        guard let values else { return }
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.writeString(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    public mutating func field(_ name: String, _ value: JSONValue?) {
        guard let value else { return }
        key(name)
        value.write(to: &bytes)
    }

    /// A nested object; left out when `body` writes nothing into it.
    public mutating func object(_ name: String, _ body: (inout JSONWriter) -> Void) {
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

    /// The object as text, closed.
    public var text: String {
        var closed = bytes
        closed.append(UInt8(ascii: "}"))
        return String(decoding: closed, as: UTF8.self)
    }
}
