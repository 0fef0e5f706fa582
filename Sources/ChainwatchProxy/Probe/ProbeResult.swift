import ChainwatchCore

/// What a probe handshake got from the server. No application data was exchanged.
public struct ProbeChain: Hashable, Sendable {
    /// The certificates as the server sent them (DER), leaf first, in the server's order: not a validated path.
    public var chainDER: [[UInt8]]
    /// The version the probe negotiated (may differ from the tunnel's: the probe's offer is not the client's).
    public var version: TLSVersion
    /// The suite the probe negotiated.
    public var cipher: CipherSuite
    /// The protocol the server selected from the key's ALPN offer, if any.
    public var alpn: String?

    public init(chainDER: [[UInt8]], version: TLSVersion, cipher: CipherSuite, alpn: String?) {
        self.chainDER = chainDER
        self.version = version
        self.cipher = cipher
        self.alpn = alpn
    }
}

/// The outcome of a probe: the chain, or why there is none (`connect refused`, `timed out after 5000 ms`,
/// `handshake failed: <OpenSSL error>`, `no certificate`), worded for the `probe_failed` alert detail.
public enum ProbeResult: Hashable, Sendable {
    case success(ProbeChain)
    case failure(String)

    public var chain: ProbeChain? {
        if case .success(let chain) = self { return chain }
        return nil
    }

    public var failureReason: String? {
        if case .failure(let reason) = self { return reason }
        return nil
    }
}
