/// Host name helpers shared by rule matching and the hostname check. Pure and ASCII-only:
/// non-ASCII names must be written as A-labels (`xn--…`), which is what SNI and certificates carry.
public enum HostName {
    /// Lowercases ASCII letters, removes one trailing dot and IPv6 brackets: the form rules and checks compare.
    public static func normalize(_ host: some StringProtocol) -> String {
        var bytes = Array(host.utf8)
        if bytes.first == UInt8(ascii: "["), bytes.last == UInt8(ascii: "]") {
            bytes = Array(bytes.dropFirst().dropLast())
        }
        if bytes.count > 1, bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
        for i in bytes.indices where bytes[i] >= UInt8(ascii: "A") && bytes[i] <= UInt8(ascii: "Z") {
            bytes[i] += 32
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether every character is ASCII.
    public static func isASCII(_ text: some StringProtocol) -> Bool { text.utf8.allSatisfy { $0 < 0x80 } }

    /// Whether `label` is a valid LDH label (letters, digits, hyphens; underscores tolerated as in real DNS names).
    public static func isValidLabel(_ label: Substring) -> Bool {
        guard !label.isEmpty, label.utf8.count <= 63 else { return false }
        guard label.first != "-", label.last != "-" else { return false }
        return label.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
        }
    }

    /// Parses an IPv4 (`192.0.2.1`) or IPv6 (`2001:db8::1`, `[::1]`, `::ffff:192.0.2.1`) literal into its bytes
    /// (4 or 16); nil when `text` is not an IP literal.
    public static func ipAddressBytes(_ text: some StringProtocol) -> [UInt8]? {
        var s = Substring(text)
        if s.first == "[", s.last == "]" { s = s.dropFirst().dropLast() }
        if let v4 = ipv4Bytes(s) { return v4 }
        return ipv6Bytes(s)
    }

    /// Four dotted decimal parts, each 1 to 3 digits and at most 255, none with a leading zero (no octal-looking
    /// forms). Read over the UTF-8 bytes: every CONNECT and every destination check asks, for names too.
    static func ipv4Bytes(_ s: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(4)
        var value = 0, digits = 0, leadingZero = false
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if digits == 0 { leadingZero = byte == UInt8(ascii: "0") } else if leadingZero { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                guard digits <= 3, value <= 255 else { return nil }
            case UInt8(ascii: "."):
                guard digits > 0, out.count < 3 else { return nil }
                out.append(UInt8(value))
                value = 0
                digits = 0
            default:
                return nil
            }
        }
        guard digits > 0, out.count == 3 else { return nil }
        out.append(UInt8(value))
        return out
    }

    static func ipv6Bytes(_ s: Substring) -> [UInt8]? {
        guard s.contains(":") else { return nil }
        var head: [UInt16] = [], tail: [UInt16] = []
        var sawGap = false
        let halves: [Substring]
        if let gap = s.firstRange(of: "::") {
            sawGap = true
            halves = [s[s.startIndex..<gap.lowerBound], s[gap.upperBound...]]
            if halves[1].contains("::") { return nil }
        } else {
            halves = [s]
        }
        var v4Tail: [UInt8]? = nil
        func groups(_ part: Substring, isLast: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, piece) in pieces.enumerated() {
                if isLast, i == pieces.count - 1, piece.contains(".") {
                    guard let v4 = ipv4Bytes(piece) else { return nil }
                    v4Tail = v4
                    continue
                }
                guard !piece.isEmpty, piece.utf8.count <= 4, let v = UInt16(piece, radix: 16) else { return nil }
                out.append(v)
            }
            return out
        }
        if sawGap {
            guard let h = groups(halves[0], isLast: false), let t = groups(halves[1], isLast: true) else { return nil }
            head = h; tail = t
        } else {
            guard let h = groups(halves[0], isLast: true) else { return nil }
            head = h
        }
        let v4Groups = v4Tail == nil ? 0 : 2
        let used = head.count + tail.count + v4Groups
        if sawGap ? used > 7 : used != 8 { return nil }
        var words = head + [UInt16](repeating: 0, count: 8 - used) + tail
        if !sawGap { words = head }
        var bytes: [UInt8] = []
        for w in words { bytes.append(UInt8(w >> 8)); bytes.append(UInt8(w & 0xFF)) }
        if let v4Tail { bytes += v4Tail }
        return bytes.count == 16 ? bytes : nil
    }
}
