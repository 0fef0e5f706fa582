/// A `host:port` pair as named by a CONNECT target or an absolute URI.
public struct Authority: Sendable, Hashable, CustomStringConvertible {
    /// Lowercased host name, or an IP literal without brackets (`::1`).
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) { self.host = host; self.port = port }

    /// `host:port`, with brackets around IPv6 literals.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Parses `host:port`, `[v6]:port`, or `host` alone when a default port is given.
    public static func parse(_ text: some StringProtocol, defaultPort: UInt16? = nil) -> Authority? {
        var rest = Substring(text)
        let host: Substring
        if rest.first == "[" {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }), host.contains(":") else { return nil }
            rest = rest[rest.index(after: close)...]
        } else {
            let colon = rest.lastIndex(of: ":")
            host = colon.map { rest[..<$0] } ?? rest
            rest = colon.map { rest[$0...] } ?? ""
            guard !host.isEmpty, !host.contains(":"), host.utf8.allSatisfy(isHostByte) else { return nil }
        }
        let port: UInt16
        if rest.isEmpty {
            guard let defaultPort else { return nil }
            port = defaultPort
        } else {
            guard rest.first == ":" else { return nil }
            let digits = rest.dropFirst()
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(\.isASCIIDigit), let p = UInt16(digits), p > 0 else { return nil }
            port = p
        }
        var name = host.lowercased()
        if name.hasSuffix("."), name.count > 1 { name.removeLast() }
        // A name whose last label is a number is an IPv4 address to browsers and curl (WHATWG URL "ends in a
        // number"), and `inet_aton` reads 0177.0.0.1 as 127.0.0.1, 2130706433 and 127.1 likewise, while a strict
        // parser reads other addresses or none: only the dotted quad is unambiguous, so only it is taken.
        if !name.contains(":"), Self.endsInANumber(name), HostName.ipAddressBytes(name)?.count != 4 { return nil }
        return Authority(host: name, port: port)
    }

    /// Whether the last label of `name` is all digits or a `0x` hex number.
    static func endsInANumber(_ name: String) -> Bool {
        guard let last = name.split(separator: ".", omittingEmptySubsequences: false).last, !last.isEmpty else { return false }
        if last.allSatisfy(\.isASCIIDigit) { return true }
        return last.hasPrefix("0x") && last.dropFirst(2).allSatisfy(\.isHexDigit)
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
