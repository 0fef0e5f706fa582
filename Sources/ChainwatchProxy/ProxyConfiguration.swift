import ChainwatchCore
import ChainwatchEventLoop

/// Everything `chainwatch run` was told, checked. Immutable; shared by all loops.
public struct ProxyConfiguration: Sendable {
    public var listen: SocketAddress
    /// SOCKS 5 listeners (`--socks`), beside `listen`: each tunnel inspected as a CONNECT's.
    public var socks: [SocketAddress] = []
    /// The users `--socks` listeners admit by username and password (`--socks-credentials`; nil: no authentication,
    /// loopback listeners only).
    public var socksCredentials: Socks5.Credentials?
    /// Listeners for connections a firewall redirects (`--transparent`): each goes to its original destination.
    public var transparent: [SocketAddress] = []
    public var threads: Int
    public var hostsFile: String?
    /// Networks whose clients may connect; empty: loopback only.
    public var allowedClients: [CIDR]
    /// Ports CONNECT and plain HTTP may reach; empty: any.
    public var allowedPorts: Set<UInt16>
    /// Networks refused beyond `DestinationPolicy`'s defaults (`--deny-destination`).
    public var deniedDestinations: [CIDR] = []
    /// Networks exempted from those defaults (`--allow-destination`).
    public var allowedDestinations: [CIDR] = []
    /// The admin listener's address, never a destination (nil: none).
    public var adminAddress: SocketAddress?
    public var maxConnections: Int
    public var requestTimeoutMilliseconds = 10_000
    public var connectTimeoutMilliseconds = 10_000
    public var idleTimeoutMilliseconds = 300_000
    public var halfClosedTimeoutMilliseconds = 30_000
    public var shutdownGraceMilliseconds = 10_000
    /// Bytes buffered for one direction of a tunnel before the sending side is paused.
    public var maxBufferedPerDirection = 256 * 1024
    /// Bytes all tunnels together may hold until their verdicts (`--held-memory`, `HeldBytesBudget`).
    public var heldMemory = HeldBytesBudget.defaultCapacity
    /// Bulk tunnel bytes move by splice(2) once the verdict is in (`--no-splice`: copy them through user space).
    public var spliceBulk = true
    /// A spare connection beside a tunnel's at its CONNECT, for a first contact's probe under alert (`SpareConnection`;
    /// `--no-spare-connections`: none).
    public var spareConnections = true

    public init(listen: SocketAddress, threads: Int, hostsFile: String? = nil, allowedClients: [CIDR] = [],
                allowedPorts: Set<UInt16> = [], maxConnections: Int = 10_000) {
        self.listen = listen; self.threads = threads; self.hostsFile = hostsFile
        self.allowedClients = allowedClients; self.allowedPorts = allowedPorts; self.maxConnections = maxConnections
    }

    /// What each connection's machine runs with.
    var connectionLimits: ConnectionLimits {
        var limits = ConnectionLimits()
        limits.requestTimeoutMilliseconds = requestTimeoutMilliseconds
        limits.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        limits.idleTimeoutMilliseconds = idleTimeoutMilliseconds
        limits.halfClosedTimeoutMilliseconds = halfClosedTimeoutMilliseconds
        limits.maxBufferedPerDirection = maxBufferedPerDirection
        limits.spliceBulk = spliceBulk
        limits.allowedPorts = allowedPorts
        limits.socksCredentials = socksCredentials
        return limits
    }

    /// Which resolved addresses requests may reach (built once per worker).
    /// A wildcard listener answers on every interface: each one's address is the proxy too (read now: call once).
    public var destinationPolicy: DestinationPolicy {
        let wildcard = ([listen] + socks + transparent + (adminAddress.map { [$0] } ?? [])).contains { $0.addressBytes.allSatisfy { $0 == 0 } }
        let own = socks.map { ($0.addressBytes, $0.port, "SOCKS") } + transparent.map { ($0.addressBytes, $0.port, "transparent") }
            + (adminAddress.map { [($0.addressBytes, $0.port, "admin")] } ?? [])
        let operatorNames = hostsFile.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }.map { HostsFile(text: $0).names } ?? []
        return DestinationPolicy(listenAddress: listen.addressBytes, listenPort: listen.port, deny: deniedDestinations,
                                 allow: allowedDestinations, localAddresses: wildcard ? SocketAddress.localAddresses() : [],
                                 otherOwn: own, operatorNames: operatorNames)
    }

    /// Parsed once, not per accepted connection.
    static let loopback = [CIDR("127.0.0.0/8")!, CIDR("::1/128")!]

    /// Whether a client address may use the proxy.
    public func admits(client: SocketAddress) -> Bool {
        let bytes = client.addressBytes
        if allowedClients.isEmpty {
            return Self.loopback.contains { $0.contains(bytes) }
        }
        return allowedClients.contains { $0.contains(bytes) }
    }

    public enum ConfigurationError: Error, CustomStringConvertible {
        case nonLoopbackWithoutAllowList(String)
        case socksNotOnLoopback(String)
        public var description: String {
            switch self {
            case .nonLoopbackWithoutAllowList(let address):
                "refusing to listen on \(address) without --allow-client: name the client networks allowed to use the proxy (e.g. --allow-client 10.0.0.0/8)"
            case .socksNotOnLoopback(let address):
                "--socks \(address): a SOCKS listener on a non-loopback address needs --socks-credentials (username/password, RFC 1929): without it, anyone who reaches the port could use it"
            }
        }
    }

    /// Refuses an open proxy: a non-loopback listen address needs an explicit client allow-list, and a SOCKS listener
    /// there credentials as well.
    public func validate() throws(ConfigurationError) {
        for address in [listen] + transparent where allowedClients.isEmpty && !Self.loopback.contains(where: { $0.contains(address.addressBytes) }) {
            throw .nonLoopbackWithoutAllowList(address.description)
        }
        for address in socks where !Self.loopback.contains(where: { $0.contains(address.addressBytes) }) {
            if socksCredentials == nil { throw .socksNotOnLoopback(address.description) }
            if allowedClients.isEmpty { throw .nonLoopbackWithoutAllowList(address.description) }
        }
    }
}
