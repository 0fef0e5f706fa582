import ChainwatchCore
@testable import ChainwatchProxy
import Testing

/// The table under the verdict cache, the known-bad marks and the probe cache: bounded by count and by the sum of
/// its entries' weights, which it keeps exact through replacements, removals and evictions.
struct WeighedTableTests {
    /// An entry's expiry stands for "live", its value for the eviction order.
    typealias Table = WeighedTable<String, Int>

    @Test func theWeightsAreSummedThroughReplacementsAndRemovals() {
        var table = Table()
        table.insert(1, for: "a", weight: 100, maxEntries: 10, maxBytes: 1_000, live: { _ in true })
        table.insert(2, for: "b", weight: 200, maxEntries: 10, maxBytes: 1_000, live: { _ in true })
        #expect(table.bytes == 300 && table.count == 2)
        table.insert(3, for: "a", weight: 50, maxEntries: 10, maxBytes: 1_000, live: { _ in true })   // replaced
        #expect(table.bytes == 250 && table["a"] == 3)
        table.remove("b")
        table.remove("missing")
        #expect(table.bytes == 50 && table.count == 1)
        table.keep { _, _ in false }
        #expect(table.bytes == 0 && table.count == 0)
    }

    @Test func pastItsBytesTheDeadGoFirstThenTheFirstInOrderDownToNinetyPercent() {
        var table = Table()
        // Values 0...9, weight 100 each: 1 000 bytes, the bound. Odd values are dead.
        for v in 0..<10 { table.insert(v, for: "k\(v)", weight: 100, maxEntries: 100, maxBytes: 1_000, live: { _ in true }) }
        #expect(table.bytes == 1_000)
        table.insert(10, for: "k10", weight: 100, maxEntries: 100, maxBytes: 1_000, live: { $0 % 2 == 0 }, order: { $0 < $1 })
        // The five dead went; 600 bytes with the new one, within 90 % (900): nothing live was evicted.
        #expect(table.bytes == 600)
        #expect((0...10).filter { table["k\($0)"] != nil } == [0, 2, 4, 6, 8, 10])
        for v in 11..<15 { table.insert(v, for: "k\(v)", weight: 100, maxEntries: 100, maxBytes: 1_000, live: { _ in true }) }
        #expect(table.bytes == 1_000)
        table.insert(15, for: "k15", weight: 300, maxEntries: 100, maxBytes: 1_000, live: { _ in true }, order: { $0 < $1 })
        // Live all: the smallest values go until the rest and the new one fill at most 900 bytes.
        #expect(table.bytes <= 900 && table["k15"] == 15)
        #expect(table["k0"] == nil && table["k2"] == nil && table["k4"] == nil && table["k14"] == 14)
    }

    @Test func whenTheDeadAloneMakeRoomTheTableStillGoesDownToNinetyPercent() {
        var table = Table()
        for v in 0..<10 { table.insert(v, for: "k\(v)", weight: 100, maxEntries: 100, maxBytes: 1_000, live: { _ in true }) }
        // One dead entry would make room for the new one; the table goes to 800 before it (900 with it), so the next
        // insert does not pass over the whole table again.
        table.insert(10, for: "k10", weight: 100, maxEntries: 100, maxBytes: 1_000, live: { $0 != 9 }, order: { $0 < $1 })
        #expect(table.bytes == 900 && table["k9"] == nil && table["k0"] == nil && table["k1"] != nil && table["k10"] == 10)
        table.insert(11, for: "k11", weight: 100, maxEntries: 100, maxBytes: 1_000, live: { _ in false }, order: { $0 < $1 })
        #expect(table.bytes == 1_000 && table.count == 10)   // it fitted: nothing was looked at
    }

    @Test func pastItsCountTheFirstInOrderGo() {
        var table = Table()
        for v in 0..<20 { table.insert(v, for: "k\(v)", weight: 1, maxEntries: 10, maxBytes: 1_000, live: { _ in true }, order: { $0 < $1 }) }
        #expect(table.count <= 10 && table.count >= 8)
        #expect(table["k19"] == 19 && table["k0"] == nil)
        #expect(table.bytes == table.count)
    }

    @Test func aValueHeavierThanTheBoundIsNotKeptNorWhatItsKeyHeld() {
        var table = Table()
        table.insert(1, for: "a", weight: 10, maxEntries: 10, maxBytes: 100, live: { _ in true })
        table.insert(2, for: "a", weight: 101, maxEntries: 10, maxBytes: 100, live: { _ in true })
        #expect(table["a"] == nil && table.bytes == 0)
    }
}

/// The verdict cache's bound by bytes: chains of thousands of names weigh what their facts hold.
struct VerdictCacheBytesTests {
    static func evidence(names: Int, seed: Int) -> Evidence {
        let leaf = CertificateFacts(sha256: [UInt8](repeating: UInt8(seed & 0xFF), count: 32), spkiSHA256: [UInt8](repeating: 1, count: 32),
                                    subject: "CN=host\(seed).example", issuer: "CN=Issuing CA,O=Example", serialHex: "01",
                                    notBefore: UnixTime(seconds: 1_600_000_000), notAfter: UnixTime(seconds: 4_000_000_000),
                                    dnsNames: (0..<names).map { "name\($0).host\(seed).example.com" }, ipAddresses: [],
                                    keyType: .ec, keyBits: 256, signatureAlgorithm: "ecdsa-with-SHA256", signatureDigest: "SHA256",
                                    isCA: false, isSelfSigned: false)
        return Evidence(connectHost: "host\(seed).example", serverName: "host\(seed).example", port: 443, protocolVersion: .tls1_2,
                        cipher: nil, validation: PathValidation(presented: [leaf], path: [], error: nil, anchorKind: nil),
                        source: .passive)
    }

    static let rule = RuleIdentity(name: "defaults", contentHash: 1)

    static func key(_ seed: Int) -> VerdictCache.Key {
        // The shard is picked by the hash's first byte: one shard for all, so its share of the bound is what counts.
        VerdictCache.Key(chainHash: [0] + [UInt8](repeating: UInt8(seed & 0xFF), count: 31) + [UInt8(seed >> 8)],
                         rule: rule, host: "host\(seed).example", connectHost: "host\(seed).example")
    }

    @Test func aChainOfManyNamesWeighsItsNames() {
        let small = Self.evidence(names: 2, seed: 1).retainedBytes
        let large = Self.evidence(names: 8_000, seed: 2).retainedBytes
        #expect(small < 2_000)
        #expect(large > 8_000 * 40)   // each name is over 15 bytes: a heap string each
    }

    @Test func verdictsStayWithinTheirShareOfTheBytes() {
        let maxBytes = 16 * 4 << 20   // 3.5 MiB for the one shard used (seven eighths of 64 MiB over 16 shards)
        let cache = VerdictCache(maxBytes: maxBytes)
        let weight = Self.evidence(names: 5_000, seed: 0).retainedBytes
        for seed in 0..<60 {   // 60 chains of 5 000 names: about 5 times the shard's share
            cache.store(Verdict(rule: Self.rule, findings: []), evidence: Self.evidence(names: 5_000, seed: seed), for: Self.key(seed), now: 0)
        }
        let share = (maxBytes - maxBytes / 8) / VerdictCache.shardCount
        #expect(cache.bytes.verdicts <= share)
        #expect(cache.sizes.verdicts >= share / weight * 8 / 10)
        #expect(cache.verdict(for: Self.key(59), now: 1) != nil)   // the newest is kept
    }

    @Test func knownBadMarksStayWithinAnEighthAndTheSoonestToExpireGoFirst() {
        let maxBytes = 8 << 20   // 1 MiB for the marks
        let cache = VerdictCache(knownBadMilliseconds: 300_000, maxBytes: maxBytes)
        let finding = Finding(reason: .rootMismatch, level: nil, detail: "test", check: "pins", action: .block)
        // Marked in turn, each expiring sooner than the one before (a mark of a longer-lived rule first): the soonest
        // to expire go, which are the newest here, not the oldest.
        for seed in 0..<40 {
            cache.markBad(Authority(host: "host\(seed).example", port: 443), VerdictCache.KnownBad(
                finding: finding, ruleName: "defaults", rule: Self.rule, evidence: Self.evidence(names: 2_000, seed: seed),
                expires: 300_000 - Int64(seed) * 1000))
        }
        #expect(cache.bytes.knownBad <= maxBytes / 8)
        #expect(cache.knownBad(Authority(host: "host0.example", port: 443), now: 1) != nil)
        #expect(cache.knownBad(Authority(host: "host38.example", port: 443), now: 1) == nil)
        let held = cache.sizes.knownBad
        #expect(held >= 2 && cache.clearKnownBad() == held && cache.bytes.knownBad == 0)
    }
}
