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
    func systemRootsAreClassifiedAsSystem() throws {
        let roots = try Self.systemRoots()
        #expect(roots.count > 50)
        let system = try TrustStore.system()
        #expect(system.includesSystemRoots)
        #expect(roots.allSatisfy { system.isSystemRoot($0.facts) })

        // Both: an extra anchor that is also a system root stays a system root; the test root does not.
        let genuineRoot = try PKI.certificate("genuine-root")
        let both = try TrustStore(systemRoots: true, extraAnchors: [roots[0], genuineRoot])
        #expect(both.isSystemRoot(roots[0].facts))
        #expect(!both.isSystemRoot(genuineRoot.facts))

        // Without the system roots nothing is a system root, even a certificate from the bundle.
        let only = try TrustStore(systemRoots: false, extraAnchors: [roots[0]])
        #expect(!only.isSystemRoot(roots[0].facts))
    }

    /// A path that really ends at a system root: a root presented alone validates when its key usage allows
    /// a TLS server (those with keyCertSign only fail the purpose check); its anchor must be classified system.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: bundlePath)))
    func pathToASystemRootReportsSystemAnchor() throws {
        let system = try TrustStore.system()
        let now = UnixTime(seconds: Int64(Date().timeIntervalSince1970))
        var validated = 0
        for root in try Self.systemRoots() {
            let result = PathValidator.validate(chain: [root.der], store: system, at: now)
            #expect(result.path.first == root.facts)
            if result.error == nil {
                validated += 1
                #expect(result.anchorIsSystemRoot, "\(root.facts.subject)")
            }
        }
        #expect(validated > 0, "no system root validates as its own path; classification above still holds")

        // The same root given as an extra anchor of a store without system roots is not a system root.
        let root = try Self.systemRoots().first { PathValidator.validate(chain: [$0.der], store: system, at: now).error == nil }
        if let root {
            let own = try TrustStore(systemRoots: false, extraAnchors: [root])
            let result = PathValidator.validate(chain: [root.der], store: own, at: now)
            #expect(result.error == nil)
            #expect(!result.anchorIsSystemRoot)
            let both = try TrustStore(systemRoots: true, extraAnchors: [root])
            #expect(PathValidator.validate(chain: [root.der], store: both, at: now).anchorIsSystemRoot)
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
        #expect(!result.anchorIsSystemRoot)
    }
}
