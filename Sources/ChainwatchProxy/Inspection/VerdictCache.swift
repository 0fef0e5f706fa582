import ChainwatchCore
import ChainwatchLock
import Synchronization

/// Verdicts already reached, so a repeat connection to the same server costs a hash and a lookup instead of a
/// parse and a signature check; and the upstreams known to be bad, answered `403` at their next CONNECT.
/// Sharded by key so the loops rarely meet on a lock.
public final class VerdictCache: Sendable {
    /// A verdict is reusable for the same certificates, judged by the same rule for the same name asked for in the
    /// same way (the CONNECT host is part of it: the SNI-mismatch check compares it with the SNI).
    public struct Key: Hashable, Sendable {
        /// SHA-256 over the DER certificates exactly as presented (the Certificate message's contents).
        public var chainHash: [UInt8]
        public var rule: RuleIdentity
        public var host: String
        public var connectHost: String
        /// The OS trust store's read the verdict was judged against (`PolicySnapshot.anchorsGeneration`).
        public var anchors: Int
        public init(chainHash: [UInt8], rule: RuleIdentity, host: String, connectHost: String, anchors: Int = 0) {
            self.chainHash = chainHash; self.rule = rule; self.host = host; self.connectHost = connectHost
            self.anchors = anchors
        }
    }

    public struct Entry: Sendable {
        public var verdict: Verdict
        public var evidence: Evidence
        /// Milliseconds since the epoch after which the entry is not used.
        public var expires: Int64
        /// For a chain that missed an issuer: the intermediate pool's generation when it was judged. The entry is
        /// not used once the pool has learned more (the chain may validate now).
        public var poolGeneration: Int?
    }

    /// An upstream whose last verdict blocked.
    public struct KnownBad: Sendable {
        public var finding: Finding
        public var ruleName: String
        public var rule: RuleIdentity
        public var evidence: Evidence?
        public var expires: Int64
        /// The OS trust store's read the finding was judged against (`PolicySnapshot.anchorsGeneration`).
        public var anchors: Int = 0
    }

    public static let shardCount = 16
    /// Entries per shard; past it the shard drops expired entries, then arbitrary ones.
    public static let maxEntriesPerShard = 4096
    /// How long a verdict is reused (also bounded by the leaf's not-after).
    public let ttlMilliseconds: Int64
    /// How long an upstream that was blocked keeps getting `403` without a new handshake.
    public let knownBadMilliseconds: Int64

    private final class Shard: Sendable {
        let table = Lock<[Key: Entry]>([:])
    }
    private let shards: [Shard]
    private let knownBad = Lock<[Authority: KnownBad]>([:])
    public let hits = Atomic<Int>(0)
    public let misses = Atomic<Int>(0)

    public init(ttlMilliseconds: Int64 = 3_600_000, knownBadMilliseconds: Int64 = 300_000) {
        self.ttlMilliseconds = ttlMilliseconds
        self.knownBadMilliseconds = knownBadMilliseconds
        shards = (0..<Self.shardCount).map { _ in Shard() }
    }

    private func shard(_ key: Key) -> Shard {
        shards[Int(key.chainHash.first ?? 0) % Self.shardCount]
    }

    public func verdict(for key: Key, now: Int64) -> Entry? {
        let entry = shard(key).table.withLock { table -> Entry? in
            guard let e = table[key] else { return nil }
            if e.expires <= now { table[key] = nil; return nil }
            return e
        }
        if entry == nil { misses.add(1, ordering: .relaxed) } else { hits.add(1, ordering: .relaxed) }
        return entry
    }

    /// - Parameter poolGeneration: see `Entry.poolGeneration`.
    public func store(_ verdict: Verdict, evidence: Evidence, for key: Key, now: Int64, poolGeneration: Int? = nil) {
        var expires = now + ttlMilliseconds
        if let leaf = evidence.leaf { expires = min(expires, max(now, leaf.notAfter.seconds * 1000)) }
        let entry = Entry(verdict: verdict, evidence: evidence, expires: expires, poolGeneration: poolGeneration)
        shard(key).table.withLock { table in
            if table.count >= Self.maxEntriesPerShard {
                table = table.filter { $0.value.expires > now }
                if table.count >= Self.maxEntriesPerShard { table.removeValue(forKey: table.keys.first!) }
            }
            table[key] = entry
        }
    }

    /// Keeps only verdicts of rules still in force (after a reload): a changed rule has a new identity.
    public func retain(rules: Set<RuleIdentity>) {
        for shard in shards { shard.table.withLock { table in table = table.filter { rules.contains($0.key.rule) } } }
        knownBad.withLock { table in table = table.filter { rules.contains($0.value.rule) } }
    }

    public func markBad(_ upstream: Authority, _ bad: KnownBad) {
        knownBad.withLock { table in
            if table.count >= Self.maxEntriesPerShard { table.removeAll() }
            table[upstream] = bad
        }
    }

    public func knownBad(_ upstream: Authority, now: Int64) -> KnownBad? {
        knownBad.withLock { table in
            guard let bad = table[upstream] else { return nil }
            if bad.expires <= now { table[upstream] = nil; return nil }
            return bad
        }
    }

    /// The upstreams marked bad and not expired, for the admin `/state`.
    public func knownBadMarks(now: Int64) -> [(upstream: Authority, mark: KnownBad)] {
        knownBad.withLock { table in table.filter { $0.value.expires > now }.map { ($0.key, $0.value) } }
            .sorted { ($0.upstream.host, $0.upstream.port) < ($1.upstream.host, $1.upstream.port) }
    }

    /// Removes the known-bad marks of `host` (every port when `port` is nil), or all of them when `host` is nil: a
    /// wrong `403` need not last its five minutes. Returns how many were removed.
    @discardableResult
    public func clearKnownBad(host: String? = nil, port: UInt16? = nil) -> Int {
        knownBad.withLock { table in
            let before = table.count
            table = table.filter { entry in
                guard let host else { return false }
                return entry.key.host != host || (port != nil && entry.key.port != port)
            }
            return before - table.count
        }
    }

    /// Forgets every cached verdict (known-bad marks stay; see `clearKnownBad`). Returns how many were dropped.
    @discardableResult
    public func removeAllVerdicts() -> Int {
        shards.reduce(0) { sum, shard in sum + shard.table.withLock { table in defer { table.removeAll() }; return table.count } }
    }

    /// Cached verdicts (expired ones included until evicted) and known-bad marks held.
    public var sizes: (verdicts: Int, knownBad: Int) {
        (shards.reduce(0) { $0 + $1.table.withLock { $0.count } }, knownBad.withLock { $0.count })
    }

}
