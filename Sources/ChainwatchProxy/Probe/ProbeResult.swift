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

extension ProbeResult {
    /// About the bytes a cached copy of this result keeps alive: the chain as sent, the stapled response, the probe's
    /// hellos (raw and parsed), the flight's sizes, a fixed part.
    var retainedBytes: Int {
        switch self {
        case .success(let chain):
            1024 + chain.chainDER.reduce(0) { $0 + 32 + $1.count } + (chain.ocspResponse?.count ?? 0)
                + 3 * (chain.clientHello.count + chain.serverHello.count) + 24 * chain.serverMessages.count
                + 16 * chain.serverRecordLengths.count
        case .failure(let reason), .oversized(let reason):
            256 + reason.utf8.count
        }
    }
}
