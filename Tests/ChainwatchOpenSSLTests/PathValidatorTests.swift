import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

@Suite struct PathValidatorTests {
    let genuineStore: TrustStore
    let leaf, intermediate, root: Certificate

    init() throws {
        genuineStore = try PKI.store("genuine-root")
        leaf = try PKI.certificate("genuine")
        intermediate = try PKI.certificate("genuine-intermediate")
        root = try PKI.certificate("genuine-root")
    }

    @Test func genuineChainValidatesToTheTestRoot() throws {
        let result = PathValidator.validate(chain: [leaf.der, intermediate.der], store: genuineStore, at: PKI.now)
        #expect(result.error == nil)
        #expect(result.presented == [leaf.facts, intermediate.facts])
        #expect(result.path == [leaf.facts, intermediate.facts, root.facts])
        #expect(result.anchorKind == .operatorAnchor)   // the store holds only the anchors it was given
    }

    @Test func outOfOrderAndExtraCertificatesBuildTheSamePath() throws {
        let stranger = try PKI.certificate("otherhost"), otherIntermediate = try PKI.certificate("genuine-intermediate-b")
        let chain = [leaf.der, root.der, stranger.der, otherIntermediate.der, intermediate.der]
        let result = PathValidator.validate(chain: chain, store: genuineStore, at: PKI.now)
        #expect(result.error == nil)
        #expect(result.presented.count == 5)
        #expect(result.path.map(\.sha256) == [leaf, intermediate, root].map(\.facts.sha256))
    }

    @Test(arguments: ["rekeyed", "other-intermediate", "otherhost"])
    func otherGenuineLeavesValidate(_ name: String) throws {
        let chain = try PKI.certificates(name + ".fullchain.pem")
        let result = PathValidator.validate(chain: chain, store: genuineStore, at: PKI.now)
        #expect(result.error == nil)
        #expect(result.path.count == 3)
        #expect(result.path.last == root.facts)
    }

    @Test func attackerChainFailsAgainstTheGenuineRoot() throws {
        let chain = try PKI.certificates("attacker.fullchain.pem")
        let result = PathValidator.validate(chain: chain, store: genuineStore, at: PKI.now)
        #expect(result.error?.reason == .untrustedChain)
        #expect(result.anchorKind == nil)   // no anchor reached
        #expect(result.path.first == chain[0].facts)
    }

    /// The naive-pinning bypass: a forged chain with the genuine intermediate and root appended.
    @Test func attackerChainWithGenuineCertificatesAppendedStillFails() throws {
        let forged = try PKI.certificates("attacker.fullchain.pem").map(\.der) + [intermediate.der, root.der]
        let result = PathValidator.validate(chain: forged, store: genuineStore, at: PKI.now)
        #expect(result.error?.reason == .untrustedChain)
        #expect(!result.path.contains(root.facts))
    }

    @Test func attackerChainValidatesWhenTheInterceptionRootIsTrusted() throws {
        let store = try PKI.store("genuine-root", "attacker-root")
        let forged = try PKI.certificates("attacker.fullchain.pem").map(\.der) + [intermediate.der, root.der]
        let result = PathValidator.validate(chain: forged, store: store, at: PKI.now)
        #expect(result.error == nil)
        #expect(result.path.map(\.sha256) == ["attacker", "attacker-intermediate", "attacker-root"].map { try! PKI.certificate($0).facts.sha256 })
        #expect(result.path.last?.subject == root.facts.subject)  // same name: only pins tell them apart
        #expect(result.anchorKind == .operatorAnchor)
    }

    @Test func expiredLeafIsReportedAsExpired() throws {
        let chain = try PKI.certificates("expired.fullchain.pem")
        let result = PathValidator.validate(chain: chain, store: genuineStore, at: PKI.now)
        #expect(result.error?.reason == .expired)
        #expect(result.error?.depth == 0)
        #expect(result.error?.message == "certificate has expired")
        #expect(result.path.count == 3)  // the path itself was built
        // During 2020 it was fine.
        let inside = PathValidator.validate(chain: chain, store: genuineStore, at: UnixTime(seconds: 1_590_000_000))
        #expect(inside.error == nil)
    }

    @Test func chainBeforeItsValidityIsNotYetValid() throws {
        let result = PathValidator.validate(chain: [leaf.der, intermediate.der], store: genuineStore,
                                            at: UnixTime(seconds: 1_500_000_000))
        #expect(result.error?.reason == .notYetValid)
    }

    @Test func missingIntermediateFailsThenPassesWithRememberedIntermediates() throws {
        let alone = PathValidator.validate(chain: [leaf.der], store: genuineStore, at: PKI.now)
        #expect(alone.error?.reason == .untrustedChain)
        #expect(alone.error?.opensslCode == 20)  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        #expect(alone.path == [leaf.facts])      // the partial path
        let completed = PathValidator.validate(chain: [leaf.der], store: genuineStore, at: PKI.now,
                                               extraUntrusted: [try PKI.certificate("genuine-intermediate-b"), intermediate])
        #expect(completed.error == nil)
        #expect(completed.presented == [leaf.facts])
        #expect(completed.path == [leaf.facts, intermediate.facts, root.facts])
    }

    @Test func privateCAServerValidatesOnlyThroughItsOwnCA() throws {
        let chain = try PKI.certificates("selfsigned.pem")
        #expect(PathValidator.validate(chain: chain, store: genuineStore, at: PKI.now).error?.reason == .untrustedChain)
        let result = PathValidator.validate(chain: chain, store: try PKI.store("private-ca"), at: PKI.now)
        #expect(result.error == nil)
        #expect(result.path.map(\.subject) == ["CN=private.test,O=Chainwatch Test", "CN=Chainwatch Private CA,O=Chainwatch Test"])
    }

    /// Auth level 0: weak keys and SHA-1 are facts for the policy, not validation failures.
    @Test(arguments: ["weak-rsa1024", "weak-sha1"])
    func weakLeavesStillValidate(_ name: String) throws {
        let chain = try PKI.certificates(name + ".fullchain.pem")
        let result = PathValidator.validate(chain: chain, store: genuineStore, at: PKI.now)
        #expect(result.error == nil)
        #expect(result.path.count == 3)
    }

    @Test func undecodableLeafIsAFindingNotACrash() throws {
        let result = PathValidator.validate(chain: [[0x30, 0x82, 0x01], intermediate.der], store: genuineStore, at: PKI.now)
        #expect(result.error?.reason == .untrustedChain)
        #expect(result.error?.opensslCode == PathValidator.undecodableCode)
        #expect(result.error?.depth == 0)
        #expect(result.path.isEmpty && result.presented.isEmpty)

        let badIntermediate = PathValidator.validate(chain: [leaf.der, [1, 2, 3]], store: genuineStore, at: PKI.now)
        #expect(badIntermediate.error?.depth == 1)
        #expect(badIntermediate.presented == [leaf.facts])

        let empty = PathValidator.validate(chain: [[UInt8]](), store: genuineStore, at: PKI.now)
        #expect(empty.error?.reason == .untrustedChain)
    }

    @Test func verifyCodesMapToReasons() {
        #expect(PathValidator.reason(for: 10) == .expired)          // CERT_HAS_EXPIRED
        #expect(PathValidator.reason(for: 9) == .notYetValid)       // CERT_NOT_YET_VALID
        #expect(PathValidator.reason(for: 66) == .weakKey)          // EE_KEY_TOO_SMALL
        #expect(PathValidator.reason(for: 67) == .weakKey)          // CA_KEY_TOO_SMALL
        #expect(PathValidator.reason(for: 68) == .weakSignature)    // CA_MD_TOO_WEAK
        #expect(PathValidator.reason(for: 20) == .untrustedChain)   // UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        #expect(PathValidator.reason(for: 19) == .untrustedChain)   // SELF_SIGNED_CERT_IN_CHAIN
        #expect(PathValidator.reason(for: 7) == .untrustedChain)    // CERT_SIGNATURE_FAILURE
    }

    @Test func oneStoreServesManyThreads() async throws {
        let store = genuineStore, chain = [leaf.der, intermediate.der]
        let expected = [leaf.facts, intermediate.facts, root.facts]
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (0..<50).allSatisfy { _ in
                        let result = PathValidator.validate(chain: chain, store: store, at: PKI.now)
                        return result.error == nil && result.path == expected
                    }
                }
            }
            for await ok in group { #expect(ok) }
        }
    }
}

/// The signature memo (`SignatureMemo`, `verifyPathWithMemo`): the same results as OpenSSL's own verification step,
/// one signature check per new leaf under a known intermediate, and never a forged signature let through.
@Suite struct SignatureMemoTests {
    static let chains = ["genuine", "rekeyed", "other-intermediate", "otherhost", "attacker", "expired", "selfsigned",
                         "weak-rsa1024", "weak-sha1"]

    /// The certificate with the last byte of its signature changed: still well-formed DER, a signature that fails.
    static func tampered(_ certificate: Certificate) throws -> Certificate {
        var der = certificate.der
        der[der.count - 1] ^= 0x01
        return try Certificate(der: der)
    }

    @Test(arguments: chains)
    func sameResultAsOpenSSLsOwnStep(_ name: String) throws {
        let stores = [try PKI.store("genuine-root"), try PKI.store("genuine-root", "attacker-root"), try PKI.store("selfsigned")]
        let chain = try PKI.certificates(name + ".fullchain.pem")
        let memo = SignatureMemo()
        for store in stores {
            for time in [PKI.now, UnixTime(seconds: 1_590_000_000), UnixTime(seconds: 4_000_000_000)] {
                for candidate in [chain, [chain[0]], Array(chain.dropLast())] {
                    let own = PathValidator.validate(chain: candidate, store: store, at: time, signatures: nil)
                    for round in 1...2 {   // the second time from the memo
                        let memoised = PathValidator.validate(chain: candidate, store: store, at: time, signatures: memo)
                        #expect(memoised == own, "\(name), \(candidate.count) certificates, round \(round)")
                    }
                }
            }
        }
    }

    @Test func aNewLeafUnderAKnownIntermediateCostsOneSignatureCheck() throws {
        let store = try PKI.store("genuine-root")
        let memo = SignatureMemo()
        let first = PathValidator.validate(chain: try PKI.certificates("genuine.fullchain.pem"), store: store, at: PKI.now,
                                           signatures: memo)
        #expect(first.error == nil)
        #expect(memo.hitsAndChecks.hits == 0 && memo.hitsAndChecks.checks == 2)   // leaf by intermediate, intermediate by root
        let second = PathValidator.validate(chain: try PKI.certificates("rekeyed.fullchain.pem"), store: store, at: PKI.now,
                                            signatures: memo)
        #expect(second.error == nil && second.path.count == 3)
        #expect(memo.hitsAndChecks.hits == 1 && memo.hitsAndChecks.checks == 3)   // only the new leaf was checked
    }

    @Test func aForgedSignatureFailsAfterTheGenuineOneWasMemoised() throws {
        let store = try PKI.store("genuine-root")
        let memo = SignatureMemo()
        let leaf = try PKI.certificate("genuine"), intermediate = try PKI.certificate("genuine-intermediate")
        #expect(PathValidator.validate(chain: [leaf, intermediate], store: store, at: PKI.now, signatures: memo).error == nil)
        for _ in 1...2 {   // failures are never memoised: the second attempt is checked again
            let forgedLeaf = PathValidator.validate(chain: [try Self.tampered(leaf), intermediate], store: store, at: PKI.now,
                                                    signatures: memo)
            #expect(forgedLeaf.error?.opensslCode == 7 && forgedLeaf.error?.depth == 0)   // X509_V_ERR_CERT_SIGNATURE_FAILURE
            let forgedIntermediate = PathValidator.validate(chain: [leaf, try Self.tampered(intermediate)], store: store,
                                                            at: PKI.now, signatures: memo)
            #expect(forgedIntermediate.error?.opensslCode == 7 && forgedIntermediate.error?.depth == 1)
        }
        // The genuine chain still validates, and its signatures still come from the memo.
        let hitsBefore = memo.hitsAndChecks.hits
        #expect(PathValidator.validate(chain: [leaf, intermediate], store: store, at: PKI.now, signatures: memo).error == nil)
        #expect(memo.hitsAndChecks.hits == hitsBefore + 2)
    }

    @Test func theMemoIsBounded() throws {
        let memo = SignatureMemo(capacity: 2)   // one key per generation
        let store = try PKI.store("genuine-root")
        for name in ["genuine", "rekeyed", "otherhost", "other-intermediate"] {
            #expect(PathValidator.validate(chain: try PKI.certificates(name + ".fullchain.pem"), store: store, at: PKI.now,
                                           signatures: memo).error == nil)
        }
        // Four validations need six distinct signatures; an unbounded memo checks each once and holds all six. Two
        // keys fit here, so some were forgotten and checked again.
        #expect(memo.count <= 2)
        #expect(memo.hitsAndChecks.checks > 6)
    }
}

@Suite struct DecodedCertificatesTests {
    @Test func aCertificateIsDecodedOnceAndSharedByItsBytes() throws {
        let cache = DecodedCertificates(capacity: 8)
        let der = try PKI.der("genuine-intermediate")
        let first = try cache.certificate(der: der), second = try cache.certificate(der: der)
        #expect(first === second)
        #expect(cache.hitsAndMisses.hits == 1 && cache.hitsAndMisses.misses == 1)
        // Different bytes are a different entry, even when they decode to a certificate with the same name.
        let tampered = try SignatureMemoTests.tampered(first)
        #expect(try cache.certificate(der: tampered.der) !== first)
    }

    @Test func keptCertificatesAreFoundAndTheCacheIsBounded() throws {
        let cache = DecodedCertificates(capacity: 4, maxBytes: 4096)
        let names = ["genuine", "rekeyed", "otherhost", "genuine-intermediate", "genuine-root", "attacker"]
        for name in names { cache.keep(try PKI.certificate(name)) }
        #expect(cache.count <= 4)
        #expect(cache.count >= 2)
        let latest = try PKI.certificate("attacker")
        #expect(try cache.certificate(der: latest.der).der == latest.der)
        #expect(cache.hitsAndMisses.hits == 1)
        let small = DecodedCertificates(capacity: 4, maxBytes: 16)   // nothing fits
        small.keep(latest)
        #expect(small.count == 0)
    }

    @Test func anUndecodableCertificateIsAnErrorAndNotKept() throws {
        let cache = DecodedCertificates()
        #expect(throws: OpenSSLError.self) { try cache.certificate(der: [0x30, 0x03, 0x02, 0x01, 0x00]) }
        #expect(cache.count == 0)
    }
}
