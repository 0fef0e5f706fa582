/// Which resolved addresses a CONNECT or plain-HTTP request may reach. Checked on the addresses the proxy is about to
/// connect to (after DNS, so a name that resolves to a forbidden address, `localhost` or a rebinding one, is caught
/// as a literal is), IPv4-mapped IPv6 as IPv4.
///
/// Refused by default: link-local (169.254.0.0/16, where cloud metadata services answer, and fe80::/10), other
/// metadata addresses, unspecified, multicast and broadcast; loopback too when the proxy serves other machines (it
/// listens on a non-loopback address: those clients must not reach its host's own services; a loopback listener's
/// clients are on the host already). `--allow-destination` exempts networks from these, `--deny-destination` adds
/// some. Never allowed: the proxy itself (a CONNECT to its own port nests a tunnel per request, each a full copy), nor
/// its admin listener (a web page would drive it through the proxy).
///
/// A name the resolver (DNS or the system hosts file) maps to a loopback address is refused too, whatever the
/// listener, as squid's `to_localhost` is: a page whose name rebinds to 127.0.0.1 would reach the host's
/// loopback-only services through the proxy, where a browser's own private-network protections never see the
/// address. Loopback literals, `localhost` (and `*.localhost`), names the operator maps with `--hosts`, and networks
/// `--allow-destination` names stay allowed.
public struct DestinationPolicy: Sendable {
    public struct Range: Sendable {
        public var network: CIDR
        public var why: String
        public init(_ network: String, _ why: String) { self.network = CIDR(network)!; self.why = why }
        public init(network: CIDR, why: String) { self.network = network; self.why = why }
    }

    public static let defaultDenied: [Range] = [
        Range("169.254.0.0/16", "link-local (where cloud metadata services answer)"),
        Range("fe80::/10", "link-local"),
        Range("100.100.100.200/32", "a cloud metadata service"),
        Range("fd00:ec2::254/128", "a cloud metadata service"),
        Range("0.0.0.0/8", "unspecified"),
        Range("::/128", "unspecified"),
        Range("224.0.0.0/4", "multicast"),
        Range("255.255.255.255/32", "broadcast"),
        Range("ff00::/8", "multicast"),
    ]
    public static let loopback: [Range] = [Range("127.0.0.0/8", "loopback"), Range("::1/128", "loopback")]

    public var denied: [Range]
    public var allowed: [CIDR]
    /// The proxy's listening address (4 or 16 bytes) and port.
    public var ownAddress: [UInt8]
    public var ownPort: UInt16
    /// For a wildcard listener: the host's interface addresses, each of them the proxy too.
    public var localAddresses: [[UInt8]]
    /// Other listeners of the proxy's own: address bytes, port, and what it is (`admin`, `SOCKS`, `transparent`).
    public var otherOwn: [(address: [UInt8], port: UInt16, what: String)]
    /// Names the operator mapped (`--hosts`), lowercased without a trailing dot: they may resolve to loopback.
    public var operatorNames: Set<String>

    /// - Parameters:
    ///   - listen: the proxy's own address and port; a loopback one leaves loopback destinations allowed.
    ///   - deny: networks refused beyond the defaults; `allow`: networks exempted from them (not from the proxy itself).
    ///   - localAddresses: the host's addresses, where a wildcard listener also answers.
    ///   - otherOwn: the proxy's other listeners (admin, SOCKS, transparent), never a destination either.
    ///   - operatorNames: the names of the operator's `--hosts` file.
    public init(listenAddress: [UInt8], listenPort: UInt16, deny: [CIDR] = [], allow: [CIDR] = [],
                localAddresses: [[UInt8]] = [], otherOwn: [(address: [UInt8], port: UInt16, what: String)] = [],
                operatorNames: Set<String> = []) {
        self.otherOwn = otherOwn
        self.operatorNames = Set(operatorNames.map(Self.nameKey))
        let listensOnLoopback = Self.loopback.contains { $0.network.contains(listenAddress) }
        denied = Self.defaultDenied + (listensOnLoopback ? [] : Self.loopback)
            + deny.map { Range(network: $0, why: "denied by --deny-destination") }
        allowed = allow
        ownAddress = listenAddress
        ownPort = listenPort
        self.localAddresses = localAddresses.map(Self.unmapped)
    }

    /// Why `address`:`port` may not be reached; nil when it may.
    /// - Parameter name: the host name `address` was resolved from; nil for a literal.
    public func refusal(address: [UInt8], port: UInt16, name: String? = nil) -> String? {
        if port == ownPort, isOwn(address) { return "the proxy itself" }
        if let listener = otherOwn.first(where: { $0.port == port && (Self.unmapped($0.address) == Self.unmapped(address) || isOwnWildcard($0.address, address)) }) {
            return "the proxy's \(listener.what) listener"
        }
        let isAllowed = allowed.contains(where: { $0.contains(address) })
        if let name, !isAllowed, Self.loopback.contains(where: { $0.network.contains(address) }), !mayResolveToLoopback(name) {
            return "a name the resolver maps to loopback (DNS rebinding; map it with --hosts, or use the address)"
        }
        guard let range = denied.first(where: { $0.network.contains(address) }) else { return nil }
        if isAllowed { return nil }
        return range.why
    }

    /// Whether `name` may resolve to loopback: `localhost`, `*.localhost` (RFC 6761), a literal, an operator's name.
    private func mayResolveToLoopback(_ name: String) -> Bool {
        let key = Self.nameKey(name)
        if key == "localhost" || key.hasSuffix(".localhost") { return true }
        if HostName.ipAddressBytes(name) != nil { return true }
        return operatorNames.contains(key)
    }

    /// A listener on a wildcard address answers on loopback and every local address.
    private func isOwnWildcard(_ listener: [UInt8], _ address: [UInt8]) -> Bool {
        guard listener.allSatisfy({ $0 == 0 }) else { return false }
        let v4 = Self.unmapped(address)
        return localAddresses.contains(v4) || Self.loopback.contains { $0.network.contains(address) }
    }

    static func nameKey(_ name: String) -> String {
        var key = name.lowercased()
        while key.hasSuffix(".") { key.removeLast() }
        return key
    }

    /// Whether `address` is where the proxy listens: its own address, or, for a wildcard listener, any loopback,
    /// unspecified or local address (one of the host's interfaces, as they were at start).
    private func isOwn(_ address: [UInt8]) -> Bool {
        let v4 = Self.unmapped(address), own = Self.unmapped(ownAddress)
        if v4 == own { return true }
        guard own.allSatisfy({ $0 == 0 }) else { return false }
        if localAddresses.contains(v4) { return true }
        return (Self.loopback + Self.defaultDenied.filter { $0.why == "unspecified" }).contains { $0.network.contains(address) }
    }

    /// IPv4-mapped IPv6 as its 4 IPv4 bytes; anything else as is.
    public static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12...]) }
        return bytes
    }
}
