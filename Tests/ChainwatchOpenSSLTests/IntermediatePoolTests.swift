import ChainwatchCore
import ChainwatchOpenSSL
import Testing

@Suite struct IntermediatePoolTests {
    let store: TrustStore
    let leaf, intermediate, other: Certificate

    init() throws {
        store = try PKI.store("genuine-root")
        leaf = try PKI.certificate("genuine")
        intermediate = try PKI.certificate("genuine-intermediate")
        other = try PKI.certificate("otherhost")
    }

    @Test func aServerThatOmitsItsIntermediateValidatesOnceAnotherSentIt() {
        let pool = IntermediatePool()
        let alone = pool.validate(chain: [leaf.der], store: store, at: PKI.now)
        #expect(IntermediatePool.missingIssuerCodes.contains(alone.error?.opensslCode ?? 0))
        // Another server (same intermediate) sends a whole chain: valid, and the pool learns the intermediate.
        #expect(pool.validate(chain: [other.der, intermediate.der], store: store, at: PKI.now).error == nil)
        #expect(pool.count == 1)
        let completed = pool.validate(chain: [leaf.der], store: store, at: PKI.now)
        #expect(completed.error == nil)
        #expect(completed.path.map(\.sha256) == [leaf, intermediate].map(\.facts.sha256) + [try! PKI.certificate("genuine-root").facts.sha256])
        #expect(completed.presented == [leaf.facts])   // what the server sent, as sent
    }

    @Test func loadedIntermediatesCompletePathsFromTheStart() {
        let pool = IntermediatePool(loaded: [intermediate, leaf])   // a leaf is not an intermediate: ignored
        #expect(pool.count == 1)
        #expect(pool.validate(chain: [leaf.der], store: store, at: PKI.now).error == nil)
    }

    /// The pool offers candidates, never anchors: the attacker's intermediate, learned from a path valid under a
    /// store that trusts the attacker's root, does not make the attacker's leaf valid under the genuine root.
    @Test func aLearnedIntermediateGrantsNoTrust() throws {
        let pool = IntermediatePool()
        let attackerStore = try PKI.store("attacker-root")
        let attacker = try PKI.certificate("attacker"), attackerIntermediate = try PKI.certificate("attacker-intermediate")
        #expect(pool.validate(chain: [attacker.der, attackerIntermediate.der], store: attackerStore, at: PKI.now).error == nil)
        #expect(pool.count == 1)
        #expect(pool.validate(chain: [attacker.der], store: store, at: PKI.now).error?.reason == .untrustedChain)
        #expect(pool.validate(chain: [attacker.der], store: attackerStore, at: PKI.now).error == nil)
    }

    @Test func learnedIntermediatesAreBounded() throws {
        let pool = IntermediatePool(capacity: 1)
        #expect(pool.validate(chain: [leaf.der, intermediate.der], store: store, at: PKI.now).error == nil)
        let attackerStore = try PKI.store("attacker-root")
        #expect(pool.validate(chain: [try PKI.certificate("attacker").der, try PKI.certificate("attacker-intermediate").der],
                              store: attackerStore, at: PKI.now).error == nil)
        #expect(pool.count == 1)   // the genuine intermediate, learned first, was dropped
        #expect(pool.validate(chain: [leaf.der], store: store, at: PKI.now).error != nil)
    }

    /// A hostile server sending many certificates: only the first `maxConsideredCertificates` are decoded and
    /// offered to path building; a path that needs one past them fails, and says why.
    @Test func onlyTheFirstPresentedCertificatesAreConsidered() {
        let filler = Array(repeating: other.der, count: 30)
        #expect(PathValidator.validate(chain: [leaf.der, intermediate.der] + filler, store: store, at: PKI.now).error == nil)
        let late = PathValidator.validate(chain: [leaf.der] + filler + [intermediate.der], store: store, at: PKI.now)
        #expect(late.error?.reason == .untrustedChain)
        #expect(late.error?.message.contains("the first 16 of 32 presented certificates were considered") == true)
        #expect(late.presented.count == PathValidator.maxConsideredCertificates)
    }
}
