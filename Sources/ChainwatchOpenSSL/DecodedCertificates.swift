import ChainwatchLock

/// Certificates decoded recently, by their DER: each certificate a first contact meets is decoded once, not once by
/// the probe's handshake and again by the validator, and an intermediate that thousands of leaves share is decoded
/// once, not with every leaf.
///
/// Why: OpenSSL 3.0's `d2i_X509` decodes the public key through its decoder framework (`OSSL_DECODER_CTX_new_for_pkey`
/// per certificate), about 1.5 million instructions per certificate here: more than a signature check. A cold TLS 1.3
/// first contact decoded each certificate twice (libssl for the probe, then `PathValidator`), half of its CPU.
///
/// Keyed by the exact DER bytes, so a hit is the same certificate, never a look-alike. A `Certificate` is immutable
/// and OpenSSL's `X509` is safe to verify from several threads, so one decoded certificate serves every loop.
/// Bounded by count and by size: two generations of at most `capacity / 2` entries (a hit moves an entry to the
/// newer one, a full newer generation drops the older), and certificates over `maxBytes` are not kept.
public final class DecodedCertificates: Sendable {
    /// The process's cache: `PathValidator` reads it, `TLSClient` fills it with what its handshake decoded.
    public static let shared = DecodedCertificates()

    public let capacity: Int
    public let maxBytes: Int
    private struct State {
        var newer: [[UInt8]: Certificate] = [:]
        var older: [[UInt8]: Certificate] = [:]
        var hits = 0
        var misses = 0
    }
    private let state = Lock(State())

    public init(capacity: Int = 1024, maxBytes: Int = 16 * 1024) {
        self.capacity = max(2, capacity)
        self.maxBytes = maxBytes
    }

    /// The decoded certificate for exactly these bytes: from the cache, else decoded (and kept when small enough).
    public func certificate(der: [UInt8]) throws(OpenSSLError) -> Certificate {
        if let known = lookUp(der) { return known }
        let decoded = try Certificate(der: der)
        keep(decoded)
        return decoded
    }

    /// Keeps a certificate decoded elsewhere (a handshake's peer certificate), so validating it does not decode it again.
    public func keep(_ certificate: Certificate) {
        guard certificate.der.count <= maxBytes else { return }
        state.withLock { s in
            guard s.newer[certificate.der] == nil else { return }
            s.newer[certificate.der] = certificate
            rotateIfFull(&s)
        }
    }

    public var count: Int { state.withLock { $0.newer.count + $0.older.count } }
    /// Lookups answered from the cache, and lookups that had to decode.
    public var hitsAndMisses: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }

    private func lookUp(_ der: [UInt8]) -> Certificate? {
        state.withLock { s in
            if let known = s.newer[der] { s.hits += 1; return known }
            if let known = s.older.removeValue(forKey: der) {
                s.hits += 1
                s.newer[der] = known
                rotateIfFull(&s)
                return known
            }
            s.misses += 1
            return nil
        }
    }

    private func rotateIfFull(_ s: inout State) {
        guard s.newer.count >= capacity / 2 else { return }
        s.older = s.newer
        s.newer = [:]
    }
}
