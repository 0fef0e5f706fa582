import ChainwatchCore
import ChainwatchEventLoop

/// What a probe repeats from the tunnel it stands in for; equal keys share one probe and one cached result.
public struct ProbeKey: Hashable, Sendable, CustomStringConvertible {
    /// The upstream IP and port the tunnel connected to. Never re-resolved: probing another address would hide
    /// DNS spoofing.
    public var address: SocketAddress
    /// The client's offer, repeated by the probe's ClientHello as far as OpenSSL allows (see `TLSClient`).
    /// A client that offered at most TLS 1.2 has an offer whose versions stop there.
    public var offer: ClientOffer

    public init(address: SocketAddress, offer: ClientOffer) {
        self.address = address
        self.offer = offer
    }

    /// `127.0.0.1:443 sni=example.com alpn=h2,http/1.1 max=TLSv1.2 suites=0 groups=0 shares=0`, for logs.
    public var description: String { "\(address) \(offer)" }
}
