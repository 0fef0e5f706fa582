import Testing
import Foundation
import ChainwatchCore
@testable import ChainwatchPolicyFile

private func cert(_ subject: String, issuer: String, spki: UInt8, notAfter: Int64, dns: [String] = [], ca: Bool) -> CertificateFacts {
    CertificateFacts(sha256: [UInt8](repeating: spki &+ 1, count: 32), spkiSHA256: [UInt8](repeating: spki, count: 32), subject: subject,
                     issuer: issuer, serialHex: "0A", notBefore: UnixTime(seconds: 1_700_000_000), notAfter: UnixTime(seconds: notAfter),
                     dnsNames: dns, ipAddresses: [], keyType: .ec, keyBits: 256, signatureAlgorithm: "ecdsa-with-SHA256",
                     signatureDigest: "SHA256", isCA: ca, isSelfSigned: subject == issuer)
}

private let path = [
    cert("CN=api.example.com", issuer: "CN=Example Issuing CA 1,O=Example", spki: 0x55, notAfter: 1_850_000_000, dns: ["api.example.com"], ca: false),
    cert("CN=Example Issuing CA 1,O=Example", issuer: "CN=Example Root,O=Example", spki: 0x33, notAfter: 1_950_000_000, ca: true),
    cert("CN=Example Root,O=Example", issuer: "CN=Example Root,O=Example", spki: 0x11, notAfter: 2_100_000_000, ca: true),
]

private func loadText(_ yaml: String) throws -> (policy: Policy, warnings: [Diagnostic]) {
    try PolicyLoader.load(yaml: yaml, path: "/tmp/pinned.yaml", now: TestPaths.now)
}

@Test func pinnedPolicyLoadsBackWithTheSamePins() throws {
    let yaml = PolicyWriter.pinPolicy(name: "api", host: "API.example.com", port: 443, action: .block, path: path)
    let (policy, warnings) = try loadText(yaml)
    let rule = policy.rule(for: "api.example.com", port: 443)
    #expect(rule.name == "api" && rule.action == .block)
    #expect(rule.pins?.root?.spki.map(\.bytes) == [path[2].spkiSHA256])
    #expect(rule.pins?.intermediate?.spki.map(\.bytes) == [path[1].spkiSHA256])
    #expect(rule.pins?.leafSubjects == [.distinguishedName("CN=api.example.com")])
    #expect(rule.pins?.expires == UnixTime(seconds: 1_949_961_600))   // the intermediate's not-after day, midnight UTC
    // Blocking with single pins: the loader says so, on each level.
    #expect(warnings.map(\.message).allSatisfy { $0.contains("no backup pin") } && warnings.count == 2)
}

@Test func pinnedPolicyAcceptsTheGenuineChainAndRejectsAForgery() throws {
    let policy = try loadText(PolicyWriter.pinPolicy(name: "api", host: "api.example.com", port: 8443, action: .block, path: path)).policy
    func evidence(_ chain: [CertificateFacts], anchor: AnchorKind) -> Evidence {
        Evidence(connectHost: "api.example.com", serverName: "api.example.com", port: 8443, protocolVersion: .tls1_3, cipher: nil,
                 validation: PathValidation(presented: chain, path: chain, error: nil, anchorKind: anchor), source: .probe)
    }
    let now = UnixTime(seconds: 1_800_000_000)
    #expect(Evaluator().evaluate(evidence(path, anchor: .publicRoot), policy: policy, at: now).passes)
    let forged = [
        cert("CN=api.example.com", issuer: "CN=Example Issuing CA 1,O=Example", spki: 0xF5, notAfter: 1_850_000_000, dns: ["api.example.com"], ca: false),
        cert("CN=Example Issuing CA 1,O=Example", issuer: "CN=Example Root,O=Example", spki: 0xF3, notAfter: 1_950_000_000, ca: true),
        cert("CN=Example Root,O=Example", issuer: "CN=Example Root,O=Example", spki: 0xF1, notAfter: 2_100_000_000, ca: true),
    ]
    let v = Evaluator().evaluate(evidence(forged, anchor: .localRoot), policy: policy, at: now)
    #expect(v.action == .block && v.deciding?.reason == .rootMismatch)
}

@Test func writerCommentsNameEachCertificate() {
    let rule = PolicyWriter.pinRule(name: "api", host: "api.example.com", port: nil, action: .alert, path: path)
    #expect(rule.contains("# subject: CN=Example Root,O=Example"))
    #expect(rule.contains("# issuer: CN=Example Root,O=Example"))
    #expect(rule.contains("# not after: 2036-07-18T"))
    #expect(rule.contains("BACKUP PIN"))
    #expect(rule.contains("- sha256/ERERERERERERERERERERERERERERERERERERERERERE="))
}

@Test func writerQuotesHostileSubjects() throws {
    var leaf = path[0]
    leaf.subject = "CN=a\"b: #c\nd"
    let yaml = PolicyWriter.pinPolicy(name: "x: y", host: "api.example.com", port: nil, action: .alert, path: [leaf] + path.dropFirst())
    let rule = try loadText(yaml).policy.rules[0]
    #expect(rule.name == "x: y")
    #expect(rule.pins?.leafSubjects == [.distinguishedName("CN=a\"b: #c\nd")])
}

@Test func explainerNamesTheRuleAndEveryCheck() throws {
    let policy = try PolicyLoader.load(path: TestPaths.policies.appendingPathComponent("examples/three-level.yaml").path, now: TestPaths.now)
    let text = Explainer.explain(policy, host: "WWW.shop.example.com", port: 443)
    #expect(text.hasPrefix("www.shop.example.com:443 → rule 'shop' ("))
    #expect(text.contains("matched by wildcard *.shop.example.com (one label)"))
    #expect(text.contains("Action on a failed check: block"))
    #expect(text.contains("Path: the chain must validate, unexpired, to the system root store"))
    #expect(text.contains("Hostname: the leaf's subjectAltNames must name www.shop.example.com"))
    #expect(text.contains("until 2030-01-01T00:00:00Z"))
    #expect(text.contains("root_mismatch") && text.contains("intermediate_mismatch") && text.contains("leaf_subject_mismatch"))
    let other = Explainer.explain(policy, host: "example.net", port: 443)
    #expect(other.hasPrefix("example.net:443 → no rule matches: the defaults apply."))
    #expect(other.contains("local_root"))
}
