import ChainwatchCore
import ChainwatchLock
import Synchronization

/// Verdicts already reached, so a repeat connection to the same server costs a hash and a lookup instead of a
/// parse and a signature check; and the upstreams known to be bad, answered `403` at their next CONNECT.
/// Sharded by key so the loops rarely meet on a lock.
///
/// Bounded by entries and by bytes (`maxBytes`, weighed by `Evidence.retainedBytes`): an entry holds its chain's
/// facts, and a chain of thousands of names makes one of hundreds of kilobytes. Counted alone, a client that sends
/// tunnels to a server presenting such chains, a new one each time, would have filled gigabytes.
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

    /// An upstream whose last verdict blocked (`KnownBadMark`, ChainwatchCore).
    public typealias KnownBad = KnownBadMark

    public static let shardCount = 16
    /// Entries per shard; past it the shard drops expired entries, then arbitrary ones.
    public static let maxEntriesPerShard = 4096
    /// The default `maxBytes`.
    public static let defaultMaxBytes = 128 << 20
    /// Bytes the verdicts and the known-bad marks may hold together: an eighth for the marks, the rest shared by the
    /// verdict shards. Past its share a shard drops expired entries, then arbitrary ones (to 90 %). An entry weighed
    /// over a shard's share is not kept.
    public let maxBytes: Int
    private var shardBytes: Int { (maxBytes - maxBytes / 8) / Self.shardCount }
    /// How long a verdict is reused (also bounded by the leaf's not-after).
    public let ttlMilliseconds: Int64
    /// How long an upstream that was blocked keeps getting `403` without a new handshake.
    public let knownBadMilliseconds: Int64

    private final class Shard: Sendable {
        let table = Lock(WeighedTable<Key, Entry>())
    }
    private let shards: [Shard]
    private let knownBad = Lock(WeighedTable<Authority, KnownBad>())
    public let hits = Atomic<Int>(0)
    public let misses = Atomic<Int>(0)

    public init(ttlMilliseconds: Int64 = 3_600_000, knownBadMilliseconds: Int64 = 300_000, maxBytes: Int = defaultMaxBytes) {
        self.maxBytes = max(0, maxBytes)
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
            if e.expires <= now { table.remove(key); return nil }
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
        let weight = evidence.retainedBytes
        shard(key).table.withLock { table in
            table.insert(entry, for: key, weight: weight, maxEntries: Self.maxEntriesPerShard,
                         maxBytes: shardBytes, live: { $0.expires > now })
        }
    }

    /// Keeps only verdicts of rules still in force (after a reload): a changed rule has a new identity.
    public func retain(rules: Set<RuleIdentity>) {
        for shard in shards { shard.table.withLock { table in table.keep { key, _ in rules.contains(key.rule) } } }
        knownBad.withLock { table in table.keep { _, bad in rules.contains(bad.rule) } }
    }

    /// Past `maxEntriesPerShard` marks or an eighth of `maxBytes`, the expired go, then the soonest to expire.
    public func markBad(_ upstream: Authority, _ bad: KnownBad) {
        let now = bad.expires - knownBadMilliseconds
        let weight = bad.weight   // outside the lock every CONNECT takes: it walks the chain's names
        knownBad.withLock { table in
            table.insert(bad, for: upstream, weight: weight, maxEntries: Self.maxEntriesPerShard, maxBytes: maxBytes / 8,
                         live: { $0.expires > now }, order: { $0.expires < $1.expires })
        }
    }

    public func knownBad(_ upstream: Authority, now: Int64) -> KnownBad? {
        knownBad.withLock { table in
            guard let bad = table[upstream] else { return nil }
            if bad.expires <= now { table.remove(upstream); return nil }
            return bad
        }
    }

    /// Counts a `403` answered for `upstream`'s mark on the mark itself (`/state` shows it).
    public func countRefusal(_ upstream: Authority) {
        knownBad.withLock { table in table.update(upstream) { $0.refusals += 1 } }
    }

    /// The upstreams marked bad and not expired, for the admin `/state`.
    public func knownBadMarks(now: Int64) -> [(upstream: Authority, mark: KnownBad)] {
        knownBad.withLock { table in table.all.filter { $0.value.expires > now }.map { ($0.key, $0.value) } }
            .sorted { ($0.upstream.host, $0.upstream.port) < ($1.upstream.host, $1.upstream.port) }
    }

    /// Removes the known-bad marks of `host` (every port when `port` is nil), or all of them when `host` is nil: a
    /// wrong `403` need not last its five minutes. Returns how many were removed.
    @discardableResult
    public func clearKnownBad(host: String? = nil, port: UInt16? = nil) -> Int {
        knownBad.withLock { table in
            let before = table.count
            table.keep { key, _ in
                guard let host else { return false }
                return key.host != host || (port != nil && key.port != port)
            }
            return before - table.count
        }
    }

    /// Forgets every cached verdict (known-bad marks stay; see `clearKnownBad`). Returns how many were dropped.
    @discardableResult
    public func removeAllVerdicts() -> Int {
        shards.reduce(0) { sum, shard in sum + shard.table.withLock { table in defer { table.keep { _, _ in false } }; return table.count } }
    }

    /// Cached verdicts (expired ones included until evicted) and known-bad marks held.
    public var sizes: (verdicts: Int, knownBad: Int) {
        (shards.reduce(0) { $0 + $1.table.withLock { $0.count } }, knownBad.withLock { $0.count })
    }

    /// What the verdicts and the known-bad marks are weighed at now, in bytes (see `maxBytes`).
    public var bytes: (verdicts: Int, knownBad: Int) {
        (shards.reduce(0) { $0 + $1.table.withLock { $0.bytes } }, knownBad.withLock { $0.bytes })
    }
}

extension Evidence {
    /// About the bytes a cached copy of this evidence keeps alive: the presented and path certificates' facts and
    /// the rendered alert members. An estimate that errs high: Swift shares a path certificate's strings with the
    /// presented one's, and counts here twice.
    var retainedBytes: Int {
        let facts = validation.presented.reduce(0) { $0 + $1.retainedBytes } + validation.path.reduce(0) { $0 + $1.retainedBytes }
        return 512 + facts + (rendered.map { $0.server.count + $0.chain.count } ?? 0)
    }
}

extension CertificateFacts {
    /// The strings' bytes (16 in place, and a heap object of 32 bytes plus the UTF-8 past 15 bytes), the digests and
    /// a fixed part.
    var retainedBytes: Int {
        func size(_ string: String) -> Int { string.utf8.count > 15 ? 48 + string.utf8.count : 16 }
        let names = dnsNames.reduce(0) { $0 + size($1) } + ipAddresses.reduce(0) { $0 + size($1) }
        return 256 + sha256.count + spkiSHA256.count + size(subject) + size(issuer) + size(serialHex)
            + size(signatureAlgorithm) + size(signatureDigest) + names
    }
}


extension KnownBadMark {
    /// What a mark keeps alive, for the cache's byte bound.
    var weight: Int { evidence?.retainedBytes ?? 512 }
}
