/// A `host:port` pair as named by a CONNECT target or an absolute URI.
public struct Authority: Sendable, Hashable, CustomStringConvertible {
    /// Lowercased host name, or an IP literal without brackets (`::1`).
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) { self.host = host; self.port = port }

    /// `host:port`, with brackets around IPv6 literals.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Parses `host:port`, `[v6]:port`, or `host` alone when a default port is given. ASCII only: a host is letters,
    /// digits, `-`, `.` and `_`, an IPv6 literal hex digits, `:` and `.` in brackets.
    ///
    /// It reads bytes, not `Character`s: every CONNECT is parsed here, and the `Character` walk cost about 44 000
    /// instructions per connection, a fifth of a tunnel's whole inspection with a cached verdict.
    public static func parse(_ text: some StringProtocol, defaultPort: UInt16? = nil) -> Authority? {
        var copy = String(text)
        return copy.withUTF8 { parse(utf8: $0, defaultPort: defaultPort) }
    }

    static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>, defaultPort: UInt16?) -> Authority? {
        let colon = UInt8(ascii: ":")
        var host = bytes[...]
        var rest = bytes[bytes.endIndex...]
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = bytes[(bytes.startIndex + 1)..<close]
            guard !host.isEmpty, host.contains(colon),
                  host.allSatisfy({ isHexDigit($0) || $0 == colon || $0 == UInt8(ascii: ".") }) else { return nil }
            rest = bytes[(close + 1)...]
        } else {
            if let last = bytes.lastIndex(of: colon) {
                host = bytes[..<last]
                rest = bytes[last...]
            }
            guard !host.isEmpty, host.allSatisfy(isHostByte) else { return nil }
        }
        let port: UInt16
        if rest.isEmpty {
            guard let defaultPort else { return nil }
            port = defaultPort
        } else {
            let digits = rest.dropFirst()
            guard rest.first == colon, !digits.isEmpty, digits.count <= 5 else { return nil }
            var value = 0
            for byte in digits {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            guard value > 0, value <= Int(UInt16.max) else { return nil }
            port = UInt16(value)
        }
        var name = Array(host)
        for index in name.indices where name[index] >= UInt8(ascii: "A") && name[index] <= UInt8(ascii: "Z") {
            name[index] += 32
        }
        if name.count > 1, name.last == UInt8(ascii: ".") { name.removeLast() }
        let text = String(decoding: name, as: UTF8.self)
        // A name whose last label is a number is an IPv4 address to browsers and curl (WHATWG URL "ends in a
        // number"), and `inet_aton` reads 0177.0.0.1 as 127.0.0.1, 2130706433 and 127.1 likewise, while a strict
        // parser reads other addresses or none: only the dotted quad is unambiguous, so only it is taken.
        if !name.contains(colon), endsInANumber(name[...]), HostName.ipAddressBytes(text)?.count != 4 { return nil }
        // A DNS name: at most 253 bytes, labels of at most 63 (RFC 1035 §2.3.4). Longer went to the resolver and came
        // back as a 502 echoing all of it (3 000 bytes of host in a review).
        if !name.contains(colon), !fitsDNS(name) { return nil }
        return Authority(host: text, port: port)
    }

    /// At most 253 bytes, no label over 63; one walk, nothing allocated (every CONNECT is parsed here).
    static func fitsDNS(_ name: [UInt8]) -> Bool {
        guard name.count <= 253 else { return false }
        var label = 0
        for byte in name {
            label = byte == UInt8(ascii: ".") ? 0 : label + 1
            if label > 63 { return false }
        }
        return true
    }

    /// Whether the last label of `name` is all digits or a `0x` hex number.
    static func endsInANumber(_ name: ArraySlice<UInt8>) -> Bool {
        let last = name.lastIndex(of: UInt8(ascii: ".")).map { name[($0 + 1)...] } ?? name
        guard !last.isEmpty else { return false }
        if last.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) { return true }
        return last.starts(with: [UInt8(ascii: "0"), UInt8(ascii: "x")]) && last.dropFirst(2).allSatisfy(isHexDigit)
    }

    static func isHexDigit(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }

    static func isHostByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
