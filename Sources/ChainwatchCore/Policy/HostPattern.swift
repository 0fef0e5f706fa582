/// One entry of a rule's `match` list: which hosts (and optionally which port) the rule is for.
public struct HostPattern: Sendable, Hashable, CustomStringConvertible {
    /// The shape of the host part.
    public enum Kind: Sendable, Hashable {
        /// `api.example.com`: that host only (also IP literals).
        case exact(String)
        /// `*.example.com`: exactly one label left of `example.com`, as in certificates; not `example.com` itself.
        case wildcard(parent: String)
        /// `.example.com`: `example.com` and every name under it, at any depth.
        case domain(String)
    }

    public var kind: Kind
    /// nil: any port.
    public var port: UInt16?

    public init(_ kind: Kind, port: UInt16? = nil) { self.kind = kind; self.port = port }

    /// The pattern as written in a policy file (normalized).
    public var description: String {
        let host: String
        switch kind {
        case .exact(let h): host = h.contains(":") ? "[\(h)]" : h
        case .wildcard(let parent): host = "*.\(parent)"
        case .domain(let d): host = ".\(d)"
        }
        return port.map { "\(host):\($0)" } ?? host
    }

    /// Why a pattern text is not a valid pattern.
    public enum ParseError: Error, Sendable, Hashable {
        case empty
        case nonASCII
        case badPort(String)
        case misplacedWildcard
        case badLabel(String)
        case tooBroad
    }

    /// Parses `host`, `host:port`, `*.parent`, `.domain`, `[v6]:port`; hosts are normalized (lowercase, no trailing dot).
    public init(parsing text: String) throws(ParseError) {
        var hostPart = Substring(text)
        var port: UInt16? = nil
        if hostPart.isEmpty { throw .empty }
        guard HostName.isASCII(hostPart) else { throw .nonASCII }
        if hostPart.first == "[" {
            guard let close = hostPart.firstIndex(of: "]") else { throw .badLabel(String(hostPart)) }
            let rest = hostPart[hostPart.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == ":" else { throw .badPort(String(rest)) }
                port = try Self.parsePort(rest.dropFirst())
            }
            hostPart = hostPart[hostPart.startIndex...close]
        } else if let colon = hostPart.lastIndex(of: ":") {
            if hostPart[..<colon].contains(":") {
                // A bare IPv6 literal without brackets: no port possible.
                guard HostName.ipAddressBytes(hostPart) != nil else { throw .badLabel(String(hostPart)) }
            } else {
                port = try Self.parsePort(hostPart[hostPart.index(after: colon)...])
                hostPart = hostPart[..<colon]
            }
        }
        if HostName.ipAddressBytes(hostPart) != nil {
            self.init(.exact(HostName.normalize(hostPart)), port: port)
            return
        }
        let host = HostName.normalize(hostPart)
        if host.isEmpty || host == "." { throw .empty }
        let kind: Kind
        let body: Substring
        if host.hasPrefix("*.") {
            body = host.dropFirst(2); kind = .wildcard(parent: String(body))
        } else if host.hasPrefix(".") {
            body = host.dropFirst(); kind = .domain(String(body))
        } else {
            body = Substring(host); kind = .exact(host)
        }
        if body.contains("*") { throw .misplacedWildcard }
        let labels = body.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels where !HostName.isValidLabel(label) { throw .badLabel(String(label)) }
        if case .wildcard = kind, labels.count < 2 { throw .tooBroad }
        self.init(kind, port: port)
    }

    static func parsePort(_ text: Substring) throws(ParseError) -> UInt16 {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let p = Int(text), p >= 1, p <= 65_535 else {
            throw .badPort(String(text))
        }
        return UInt16(p)
    }

    /// Whether this pattern covers `host` (already normalized) on `port`.
    public func matches(host: String, port: UInt16) -> Bool {
        if let own = self.port, own != port { return false }
        switch kind {
        case .exact(let h):
            return h == host
        case .wildcard(let parent):
            guard host.hasSuffix("." + parent) else { return false }
            let first = host.dropLast(parent.utf8.count + 1)
            return !first.isEmpty && !first.contains(".")
        case .domain(let d):
            return host == d || host.hasSuffix("." + d)
        }
    }

    /// Orders matches: larger is more specific. exact+port > exact > wildcard+port > wildcard > domain (longer first, port first).
    public var specificity: Int {
        let portBonus = port == nil ? 0 : 1
        switch kind {
        case .exact: return 3_000_000 + portBonus * 1_000_000
        case .wildcard: return 1_000_000 + portBonus * 500_000 + 1 // one tier, always above any domain
        case .domain(let d): return d.utf8.count * 2 + portBonus
        }
    }
}
