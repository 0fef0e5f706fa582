import ChainwatchOpenSSL

/// What a probe handshake got from the server: the engine's result as is (chain as sent, version, cipher, ALPN,
/// the probe's ClientHello, the final ServerHello, the server's later handshake messages and encrypted record
/// lengths, whether a HelloRetryRequest happened). No application data was exchanged.
public typealias ProbeChain = TLSClientResult

/// The outcome of a probe: the chain, or why there is none (`connect refused`, `timed out after 5000 ms`,
/// `handshake failed: <OpenSSL error>`, `no certificate`), worded for the `probe_failed` alert detail.
public enum ProbeResult: Hashable, Sendable {
    case success(ProbeChain)
    case failure(String)
    /// The server's Certificate message is larger than the probe reads (512 KiB) and there was no room for it
    /// (`LargeHandshakeRoom`): `oversized_handshake`, not `probe_failed`.
    case oversized(String)

    public var chain: ProbeChain? {
        if case .success(let chain) = self { return chain }
        return nil
    }

    public var failureReason: String? {
        switch self {
        case .success: nil
        case .failure(let reason), .oversized(let reason): reason
        }
    }
}
