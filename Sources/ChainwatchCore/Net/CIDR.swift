/// An IPv4 or IPv6 network (`10.0.0.0/8`, `::1/128`), for `--allow-client`.
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    /// Network address bytes: 4 for IPv4, 16 for IPv6.
    public var address: [UInt8]
    public var prefixLength: Int

    public var description: String { "\(IPAddressText.format(address))/\(prefixLength)" }

    /// Parses `ADDR/LEN` or a bare address (a host network).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = IPAddressText.parse(String(parts[0])) else { return nil }
        let maxLength = address.count * 8
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].allSatisfy(\.isASCIIDigit), let n = Int(parts[1]), n <= maxLength else { return nil }
            prefixLength = n
        } else {
            prefixLength = maxLength
        }
        self.address = address
    }

    /// Whether `bytes` (4 or 16 address bytes) lies in this network. An IPv4-mapped IPv6 address matches IPv4 networks.
    public func contains(_ bytes: [UInt8]) -> Bool {
        var candidate = bytes
        if address.count == 4, bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            candidate = Array(bytes[12...])
        }
        guard candidate.count == address.count else { return false }
        var remaining = prefixLength
        for i in 0..<address.count where remaining > 0 {
            let bits = min(8, remaining)
            let mask: UInt8 = bits == 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if candidate[i] & mask != address[i] & mask { return false }
            remaining -= bits
        }
        return true
    }

    /// Whether every address of the network is a loopback address (127.0.0.0/8, ::1).
    public var isLoopback: Bool {
        address.count == 4 ? (address[0] == 127 && prefixLength >= 8) : (address == Array(repeating: 0, count: 15) + [1] && prefixLength == 128)
    }
}

/// Pure text forms of IP addresses.
public enum IPAddressText {
    /// Parses dotted IPv4 or RFC 4291 IPv6 text (with `::`, and a dotted IPv4 tail) to 4 or 16 bytes.
    public static func parse(_ text: String) -> [UInt8]? {
        if !text.contains(":") {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4 else { return nil }
            var out: [UInt8] = []
            for p in parts {
                guard !p.isEmpty, p.count <= 3, p.allSatisfy(\.isASCIIDigit), let v = UInt8(p) else { return nil }
                out.append(v)
            }
            return out
        }
        var text = Substring(text)
        var tail: [UInt8] = []
        if let lastColon = text.lastIndex(of: ":"), text[text.index(after: lastColon)...].contains(".") {
            guard let v4 = parse(String(text[text.index(after: lastColon)...])) else { return nil }
            tail = v4
            text = text[...lastColon] + "0:0"   // placeholder groups, replaced below
        }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ s: Substring) -> [UInt16]? {
            if s.isEmpty { return [] }
            var out: [UInt16] = []
            for g in s.split(separator: ":", omittingEmptySubsequences: false) {
                guard !g.isEmpty, g.count <= 4, let v = UInt16(g, radix: 16) else { return nil }
                out.append(v)
            }
            return out
        }
        guard let head = groups(halves[0]) else { return nil }
        var all = head
        if halves.count == 2 {
            guard let rest = groups(halves[1]), head.count + rest.count <= 7 else { return nil }
            all += Array(repeating: 0, count: 8 - head.count - rest.count) + rest
        }
        guard all.count == 8 else { return nil }
        var bytes = all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        if !tail.isEmpty { bytes.replaceSubrange(12..<16, with: tail) }
        return bytes
    }

    /// Formats 4 or 16 address bytes (IPv6 without `::` compression beyond the longest zero run).
    public static func format(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 16, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
        var best = (start: -1, length: 0), i = 0
        while i < 8 {
            var j = i
            while j < 8, groups[j] == 0 { j += 1 }
            if j - i > best.length, j - i > 1 { best = (i, j - i) }
            i = j == i ? i + 1 : j
        }
        func hex(_ r: ArraySlice<UInt16>) -> String { r.map { String($0, radix: 16) }.joined(separator: ":") }
        if best.start < 0 { return hex(groups[...]) }
        return hex(groups[..<best.start]) + "::" + hex(groups[(best.start + best.length)...])
    }
}

extension Substring {
    func components(separatedBy separator: String) -> [Substring] {
        var result: [Substring] = []
        var rest = self[...]
        let sep = Array(separator)
        while true {
            var found: Substring.Index?
            var i = rest.startIndex
            while i < rest.endIndex {
                if rest[i...].starts(with: sep) { found = i; break }
                i = rest.index(after: i)
            }
            guard let f = found else { result.append(rest); return result }
            result.append(rest[..<f])
            rest = rest[rest.index(f, offsetBy: sep.count)...]
        }
    }
}
