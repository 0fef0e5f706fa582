/// What one client connection knows about itself: who it is, where it asked to go, and what its handshake said. The
/// one type for these facts: the proxy makes it when the request is read and fills it in as the handshake passes;
/// the evidence a verdict is made from and the alert line carry it as it is.
public struct ConnectionFacts: Sendable, Hashable {
    /// The proxy's number for the connection (`chainwatch.tunnel.id`); 0 where there is none (`pin`, tests).
    public var id: UInt64
    /// `id` as people read it: the loop's number and the tunnel's number on that loop (`1-57`), not the 64-bit
    /// integer the two make (281474976710713). Written as `chainwatch.tunnel_id` and the logs' `tunnel.id`.
    public var tunnelID: String { Self.tunnelID(id) }
    public static func tunnelID(_ id: UInt64) -> String { "\(id >> 48)-\(id & 0xFFFF_FFFF_FFFF)" }
    public var sourceIP: String
    public var sourcePort: UInt16
    /// The host from the CONNECT request (or the absolute-form URL).
    public var connectHost: String
    public var port: UInt16
    /// The upstream address connected to, once connected.
    public var upstreamIP: String?
    /// The ClientHello's server_name, when there was one.
    public var serverName: String?
    /// The negotiated version; nil when unknown (the protocol floor then passes).
    public var protocolVersion: TLSVersion?
    /// The negotiated cipher suite; nil when unknown.
    public var cipher: NegotiatedCipher?
    /// The client's JA4 (`tls.client.ja4`), set when a finding is reported.
    public var clientJA4: String?
    /// The JA4 of chainwatch's own probe (`chainwatch.probe.ja4`), when the evidence came from a probe.
    public var probeJA4: String?
    /// How the client reached chainwatch when not by a CONNECT: `socks5` (a `--socks` listener) or `transparent` (a
    /// connection a firewall redirected; `connectHost` is then its original destination's address).
    public var via: String?

    public init(id: UInt64 = 0, sourceIP: String = "", sourcePort: UInt16 = 0, connectHost: String, port: UInt16,
                upstreamIP: String? = nil, serverName: String? = nil, protocolVersion: TLSVersion? = nil,
                cipher: NegotiatedCipher? = nil) {
        self.id = id; self.sourceIP = sourceIP; self.sourcePort = sourcePort; self.connectHost = connectHost
        self.port = port; self.upstreamIP = upstreamIP; self.serverName = serverName
        self.protocolVersion = protocolVersion; self.cipher = cipher
    }

    /// The name checked against the leaf and used to pick the rule: the SNI, else the CONNECT host.
    public var hostChecked: String { serverName ?? connectHost }
}
