import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

/// The system store is Debian's /etc/ssl/certs (ca-certificates); these tests need no network.
@Suite(.serialized) struct TrustStoreTests {
    static let bundlePath = "/etc/ssl/certs/ca-certificates.crt"

    /// The system roots as certificates (read here independently of OpenSSL's default paths).
    static func systemRoots() throws -> [Certificate] {
        try Certificate.parsePEM(String(contentsOfFile: bundlePath, encoding: .utf8))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: bundlePath)))
    func anchorKindsFollowThePublicSetAndTheOperator() throws {
        let roots = try Self.systemRoots()
        #expect(roots.count > 50)
        let everyRoot = PublicRoots(certificates: roots, source: Self.bundlePath)

        // Every system root in the public set is public; without a public set its kind is unknown.
        let system = try TrustStore.system(publicRoots: everyRoot)
        #expect(system.includesSystemRoots)
        #expect(roots.allSatisfy { system.kind(ofAnchor: $0.facts) == .publicRoot })
        #expect(try TrustStore.system().kind(ofAnchor: roots[0].facts) == .systemRoot)

        // A system root the public set lacks was added to this machine: local.
        let lacking = PublicRoots(certificates: Array(roots.dropFirst()), source: "test")
        let store = try TrustStore.system(publicRoots: lacking)
        #expect(store.kind(ofAnchor: roots[0].facts) == .localRoot)
        #expect(store.kind(ofAnchor: roots[1].facts) == .publicRoot)

        // What the operator names is the operator's, also when the OS store has it too.
        let genuineRoot = try PKI.certificate("genuine-root")
        let both = try TrustStore(systemRoots: true, extraAnchors: [roots[0], genuineRoot], publicRoots: lacking)
        #expect(both.kind(ofAnchor: roots[0].facts) == .operatorAnchor)
        #expect(both.kind(ofAnchor: genuineRoot.facts) == .operatorAnchor)
        #expect(both.kind(ofAnchor: roots[1].facts) == .publicRoot)

        // Without the system roots, everything the store holds was named by the operator.
        let only = try TrustStore(systemRoots: false, extraAnchors: [roots[0]], publicRoots: everyRoot)
        #expect(only.kind(ofAnchor: roots[0].facts) == .operatorAnchor)
    }

    /// A path that really ends at a system root: a root presented alone validates when its key usage allows
    /// a TLS server (those with keyCertSign only fail the purpose check); its anchor must be classified system.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: bundlePath)))
    func pathToASystemRootReportsSystemAnchor() throws {
        let system = try TrustStore.system(publicRoots: PublicRoots(certificates: try Self.systemRoots(), source: "test"))
        let now = UnixTime(seconds: Int64(Date().timeIntervalSince1970))
        var validated = 0
        for root in try Self.systemRoots() {
            let result = PathValidator.validate(chain: [root.der], store: system, at: now)
            #expect(result.path.first == root.facts)
            if result.error == nil {
                validated += 1
                #expect(result.anchorKind == .publicRoot, "\(root.facts.subject)")
            }
        }
        #expect(validated > 0, "no system root validates as its own path; classification above still holds")

        // The same root given as an extra anchor is the operator's, with or without the system roots.
        let root = try Self.systemRoots().first { PathValidator.validate(chain: [$0.der], store: system, at: now).error == nil }
        if let root {
            let own = try TrustStore(systemRoots: false, extraAnchors: [root])
            let result = PathValidator.validate(chain: [root.der], store: own, at: now)
            #expect(result.error == nil)
            #expect(result.anchorKind == .operatorAnchor)
            let both = try TrustStore(systemRoots: true, extraAnchors: [root])
            #expect(PathValidator.validate(chain: [root.der], store: both, at: now).anchorKind == .operatorAnchor)
        }
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: bundlePath)))
    func testPKIIsNotTrustedBySystemRootsButIsWithItsRootAdded() throws {
        let chain = try PKI.certificates("genuine.fullchain.pem")
        let system = try TrustStore.system()
        #expect(PathValidator.validate(chain: chain, store: system, at: PKI.now).error?.reason == .untrustedChain)

        let both = try TrustStore(systemRoots: true, extraAnchors: [try PKI.certificate("genuine-root")])
        let result = PathValidator.validate(chain: chain, store: both, at: PKI.now)
        #expect(result.error == nil)
        #expect(result.anchorKind == .operatorAnchor)
    }
}
