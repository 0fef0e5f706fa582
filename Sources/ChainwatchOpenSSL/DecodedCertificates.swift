public import ChainwatchCore
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
/// Bounded by count (a `GenerationalCache` of `capacity`) and by size: certificates over `maxBytes` are not kept.
public final class DecodedCertificates: Sendable {
    /// The process's cache: `PathValidator` reads it, `TLSClient` fills it with what its handshake decoded.
    public static let shared = DecodedCertificates()

    public let capacity: Int
    public let maxBytes: Int
    private struct State {
        var certificates: GenerationalCache<ByteKey, Certificate>
        var hits = 0
        var misses = 0
    }
    private let state: Lock<State>

    public init(capacity: Int = 1024, maxBytes: Int = 16 * 1024) {
        self.capacity = max(2, capacity)
        self.maxBytes = maxBytes
        state = Lock(State(certificates: GenerationalCache(capacity: capacity)))
    }

    /// The decoded certificate for exactly these bytes: from the cache, else decoded (and kept when small enough).
    public func certificate(der: [UInt8]) throws(OpenSSLError) -> Certificate {
        let known = state.withLock { s in
            let found = s.certificates.value(for: ByteKey(der))
            if found != nil { s.hits += 1 } else { s.misses += 1 }
            return found
        }
        if let known { return known }
        let decoded = try Certificate(der: der)
        keep(decoded)
        return decoded
    }

    /// Keeps a certificate decoded elsewhere (a handshake's peer certificate), so validating it does not decode it again.
    public func keep(_ certificate: Certificate) {
        keep(der: certificate.der) { certificate }
    }

    /// Keeps the certificate `make` gives for `der` unless one is held already or `der` is over `maxBytes`: `make` (the
    /// facts of a certificate, ~170 000 instructions) runs only for a certificate the cache does not have.
    public func keep(der: [UInt8], _ make: () -> Certificate?) {
        guard der.count <= maxBytes, !state.withLock({ $0.certificates.contains(ByteKey(der)) }), let certificate = make() else {
            return
        }
        state.withLock { $0.certificates.insert(certificate, for: ByteKey(der)) }
    }

    public var count: Int { state.withLock { $0.certificates.count } }
    /// Lookups answered from the cache, and lookups that had to decode.
    public var hitsAndMisses: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
}
