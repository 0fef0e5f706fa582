internal import COpenSSL
public import ChainwatchCore
import ChainwatchLock
import Synchronization

/// Intermediates that complete later paths, as browsers keep them: a server that omits its intermediate (no AIA
/// fetching here) validates once another server has sent that intermediate in a valid chain, or when it was loaded
/// at start (`run --intermediates`).
///
/// Only certificates from paths that validated to a rule's anchors are learned. They are offered to path building
/// as untrusted candidates, never as anchors: a learned certificate completes a path only when that path reaches an
/// anchor of the rule being judged, so the pool grants no trust. Bounded: past `capacity` learned certificates the
/// oldest learned one is dropped (loaded ones stay).
public final class IntermediatePool: Sendable {
    public let capacity: Int
    private struct State {
        var generation = 0
        var byDigest: [[UInt8]: Certificate] = [:]
        /// Learned digests, oldest first (loaded ones are not listed: never dropped).
        var learnedOrder: [[UInt8]] = []
    }
    private let state = Lock(State())
    private let completions = Atomic<Int>(0)

    /// - Parameter loaded: known intermediates (kept for the process's life; CAs only, others are ignored).
    public init(capacity: Int = 1024, loaded: [Certificate] = []) {
        self.capacity = capacity
        state.withLock { s in
            for certificate in loaded where certificate.facts.isCA { s.byDigest[certificate.facts.sha256] = certificate }
        }
    }

    public var count: Int { state.withLock { $0.byDigest.count } }
    /// Paths the pool completed: chains that missed an issuer and validated with one of its certificates.
    public var completed: Int { completions.load(ordering: .relaxed) }
    /// The certificate with this SHA-256, if the pool holds it.
    public func certificate(digest: [UInt8]) -> Certificate? { state.withLock { $0.byDigest[digest] } }

    /// Grows by one each time the pool learns a certificate.
    public var generation: Int { state.withLock { $0.generation } }

    /// Validates a presented chain; when it fails only because an issuer is missing, again with the pool's
    /// certificates as candidates. A path that validates teaches the pool its intermediates.
    public func validate(chain: [[UInt8]], store: TrustStore, at time: UnixTime) -> PathValidation {
        validateDecoding(chain: chain, store: store, at: time).validation
    }

    /// `validate`, with the presented certificates as it decoded them (each once, for the retry, the learning and
    /// the caller's OCSP check alike: decoding costs more than a signature check).
    public func validateDecoding(chain: [[UInt8]], store: TrustStore, at time: UnixTime)
        -> (validation: PathValidation, presented: [Certificate])
    {
        let (presented, failure) = PathValidator.decode(chain)
        if let failure { return (failure, presented) }
        var result = PathValidator.validate(decoded: presented, presentedCount: chain.count, store: store, at: time)
        if let error = result.error, Self.missingIssuerCodes.contains(error.opensslCode) {
            let candidates = state.withLock { Array($0.byDigest.values) }
            if !candidates.isEmpty {
                let retried = PathValidator.validate(decoded: presented, presentedCount: chain.count, store: store,
                                                     at: time, extraUntrusted: candidates)
                if retried.error == nil {
                    result = retried
                    completions.add(1, ordering: .relaxed)
                }
            }
        }
        if result.error == nil { learn(from: result, presented: presented) }
        return (result, presented)
    }

    /// The path stops short of an anchor: no issuer among the presented certificates or the store.
    public static let missingIssuerCodes: Set<Int32> = [Int32(X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT),
                                                        Int32(X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)]

    /// Keeps the intermediates of a validated path (neither its leaf nor its anchor) that the server presented.
    private func learn(from validation: PathValidation, presented: [Certificate]) {
        guard validation.path.count > 2 else { return }
        let wanted = Set(validation.path.dropFirst().dropLast().map(\.sha256))
        let known = state.withLock { s in wanted.allSatisfy { s.byDigest[$0] != nil } }
        guard !known else { return }
        for certificate in presented.dropFirst() where wanted.contains(certificate.facts.sha256) {
            state.withLock { s in
                guard s.byDigest[certificate.facts.sha256] == nil else { return }
                s.byDigest[certificate.facts.sha256] = certificate
                s.learnedOrder.append(certificate.facts.sha256)
                s.generation += 1
                if s.learnedOrder.count > capacity { s.byDigest[s.learnedOrder.removeFirst()] = nil }
            }
        }
    }
}
