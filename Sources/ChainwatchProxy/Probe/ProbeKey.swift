import ChainwatchCore
import ChainwatchEventLoop

/// What a probe repeats from the tunnel it stands in for; equal keys share one probe and one cached result.
public struct ProbeKey: Hashable, Sendable, CustomStringConvertible {
    /// The upstream IP and port the tunnel connected to. Never re-resolved: probing another address would hide
    /// DNS spoofing.
    public var address: SocketAddress
    /// The client's SNI, sent as is (nil or an IP literal: no SNI).
    public var serverName: String?
    /// The client's ALPN offer, in its order (empty: no ALPN extension).
    public var alpn: [String]
    /// The highest version to offer: TLS 1.2 when the client offered nothing newer; nil: the prober's maximum.
    public var maxVersion: TLSVersion?

    public init(address: SocketAddress, serverName: String?, alpn: [String] = [], maxVersion: TLSVersion? = nil) {
        self.address = address
        self.serverName = serverName
        self.alpn = alpn
        self.maxVersion = maxVersion
    }

    /// `127.0.0.1:443 sni=example.com alpn=h2,http/1.1 max=TLSv1.2`, for logs.
    public var description: String {
        var text = "\(address) sni=\(serverName ?? "-")"
        if !alpn.isEmpty { text += " alpn=\(alpn.joined(separator: ","))" }
        if let maxVersion { text += " max=\(maxVersion)" }
        return text
    }
}
