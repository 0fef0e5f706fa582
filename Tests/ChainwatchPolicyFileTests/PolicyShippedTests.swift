import Testing
import Foundation
import ChainwatchCore
@testable import ChainwatchPolicyFile

private func load(_ relative: String) throws -> (policy: Policy, warnings: [Diagnostic]) {
    try PolicyLoader.loadWithWarnings(path: TestPaths.policies.appendingPathComponent(relative).path, now: TestPaths.now)
}

private let now = UnixTime(seconds: 1_800_000_000)

private func fact(_ subject: String, sha: UInt8, spki: UInt8, dns: [String] = [], ca: Bool = false, key: CertificateFacts.KeyType = .ec,
                  bits: Int = 256, digest: String = "SHA256") -> CertificateFacts {
    CertificateFacts(sha256: [UInt8](repeating: sha, count: 32), spkiSHA256: [UInt8](repeating: spki, count: 32), subject: subject,
                     issuer: "CN=Issuer", serialHex: "01", notBefore: UnixTime(seconds: 1_700_000_000),
                     notAfter: UnixTime(seconds: 1_900_000_000), dnsNames: dns, ipAddresses: [], keyType: key, keyBits: bits,
                     signatureAlgorithm: "ecdsa-with-SHA256", signatureDigest: digest, isCA: ca, isSelfSigned: false)
}

private func evidence(_ host: String, port: UInt16 = 443, path: [CertificateFacts], anchor: AnchorKind? = .publicRoot,
                      error: ValidationError? = nil, version: TLSVersion = .tls1_3) -> Evidence {
    Evidence(connectHost: host, serverName: host, port: port, protocolVersion: version,
             cipher: NegotiatedCipher(name: "TLS_AES_128_GCM_SHA256", forwardSecret: true),
             validation: PathValidation(presented: path, path: path, error: error, anchorKind: anchor), source: .passive)
}

@Test func everyShippedPolicyLoadsWithoutErrorsOrWarnings() throws {
    let dir = TestPaths.policies
    var files = ["default.yaml"]
    files += try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("examples").path)
        .filter { $0.hasSuffix(".yaml") }.map { "examples/" + $0 }
    #expect(files.count == 8)
    for f in files {
        let (_, warnings) = try load(f)
        #expect(warnings.isEmpty, "\(f): \(warnings)")
    }
}

@Test func defaultPolicyIsSystemTrustAlert() throws {
    let p = try load("default.yaml").policy
    #expect(p.rules.isEmpty)
    var d = p.defaults; d.location = nil
    #expect(d == Rule.builtInDefault)   // the file says exactly what the built-in default does
    #expect(Policy.builtIn.rule(for: "anything.example", port: 443).anchors == .systemOnly)
}

@Test func systemTrustExampleBlocksListedHostsOnly() throws {
    let p = try load("examples/system-trust.yaml").policy
    #expect(p.rule(for: "api.example.com", port: 443).action == .block)
    #expect(p.rule(for: "eu.pay.example.com", port: 443).name == "payments")
    #expect(p.rule(for: "x.y.bank.example", port: 443).name == "payments")
    #expect(p.rule(for: "www.example.com", port: 443).action == .alert)
    let untrusted = ValidationError(reason: .untrustedChain, opensslCode: 20, message: "unable to get local issuer certificate", depth: 1)
    let leaf = fact("CN=api.example.com", sha: 1, spki: 1, dns: ["api.example.com"])
    let v = Evaluator().evaluate(evidence("api.example.com", path: [leaf], error: untrusted), policy: p, at: now)
    #expect(v.action == .block && v.deciding?.reason == .untrustedChain)
    #expect(Evaluator.verdict(for: .plainHTTP("GET http://api.example.com/"), rule: p.rule(for: "api.example.com", port: 80)).action == .block)
}

@Test func ownCAExampleTrustsOnlyThatCA() throws {
    let p = try load("examples/self-signed-own-ca.yaml").policy
    let rule = p.rule(for: "git.internal.example.com", port: 8443)
    #expect(rule.name == "internal-git")
    #expect(!rule.anchors.system && rule.anchors.certificates.count == 1)
    #expect(rule.anchors.certificates[0].der.first == 0x30)
    #expect(p.rule(for: "git.internal.example.com", port: 443).name == "defaults")   // port-specific rule
    let ca = fact("CN=Example Private CA,O=Example", sha: 9, spki: 9, ca: true)
    let leaf = fact("CN=git.internal.example.com", sha: 8, spki: 8, dns: ["git.internal.example.com"])
    // Validated through the rule's own CA (not a system root): passes, no local_root noise.
    #expect(Evaluator().evaluate(evidence("git.internal.example.com", port: 8443, path: [leaf, ca], anchor: .operatorAnchor), rule: rule, at: now).passes)
}

@Test func pinServerExampleCatchesAnotherKey() throws {
    let p = try load("examples/pin-server-certificate.yaml").policy
    let root = fact("CN=Root", sha: 0xA1, spki: 0x11, ca: true)
    let genuine = fact("CN=api.example.com", sha: 0xA5, spki: 0x55, dns: ["api.example.com"])
    let rotated = fact("CN=api.example.com", sha: 0xA6, spki: 0x66, dns: ["api.example.com"])
    let forged = fact("CN=api.example.com", sha: 0xF5, spki: 0xF5, dns: ["api.example.com"])
    #expect(Evaluator().evaluate(evidence("api.example.com", path: [genuine, root]), policy: p, at: now).passes)
    #expect(Evaluator().evaluate(evidence("api.example.com", path: [rotated, root]), policy: p, at: now).passes)   // the backup pin
    let v = Evaluator().evaluate(evidence("api.example.com", path: [forged, root]), policy: p, at: now)
    #expect(v.action == .block && v.deciding?.reason == .spkiMismatch)
}

@Test func threeLevelExampleComparesRootIntermediateAndLeafSubject() throws {
    let p = try load("examples/three-level.yaml").policy
    let root = fact("CN=Root", sha: 1, spki: 0x22, ca: true)
    let intermediate = fact("CN=Int", sha: 2, spki: 0x33, ca: true)
    let leaf = fact("CN=shop.example.com,O=Example Shop,C=DE", sha: 3, spki: 3, dns: ["shop.example.com", "*.shop.example.com"])
    #expect(Evaluator().evaluate(evidence("www.shop.example.com", path: [leaf, intermediate, root]), policy: p, at: now).passes)
    let otherSubject = fact("CN=evil,O=Evil", sha: 3, spki: 3, dns: ["shop.example.com"])
    #expect(Evaluator().evaluate(evidence("shop.example.com", path: [otherSubject, intermediate, root]), policy: p, at: now)
            .deciding?.reason == .leafSubjectMismatch)
    let otherIntermediate = fact("CN=Int", sha: 2, spki: 0x99, ca: true)
    #expect(Evaluator().evaluate(evidence("shop.example.com", path: [leaf, otherIntermediate, root]), policy: p, at: now)
            .deciding?.reason == .intermediateMismatch)
    // After 2030-01-01 the pins are reported, not enforced.
    let later = UnixTime(seconds: 1_900_000_000)
    let v = Evaluator().evaluate(evidence("shop.example.com", path: [leaf, otherIntermediate, root]), policy: p, at: later)
    #expect(v.findings.map(\.reason) == [.pinExpired] && v.action == .alert)
}

@Test func reportOnlyRolloutAlertsWithoutBlocking() throws {
    let p = try load("examples/report-only-rollout.yaml").policy
    let forged = [fact("CN=x", sha: 1, spki: 1, dns: ["v2.api.example.net"]), fact("CN=I", sha: 2, spki: 2, ca: true), fact("CN=R", sha: 4, spki: 4, ca: true)]
    let v = Evaluator().evaluate(evidence("v2.api.example.net", path: forged), policy: p, at: now)
    #expect(v.deciding?.reason == .intermediateMismatch && v.action == .alert)
}

@Test func atsExampleEnforcesTheProfile() throws {
    let p = try load("examples/ats-profile.yaml").policy
    let root = fact("CN=R", sha: 1, spki: 1, ca: true)
    let weak = fact("CN=a.m.example.com", sha: 2, spki: 2, dns: ["a.m.example.com"], key: .rsa, bits: 1024)
    let v = Evaluator().evaluate(evidence("a.m.example.com", path: [weak, root], version: .tls1_2), policy: p, at: now)
    #expect(v.deciding?.reason == .weakKey && v.action == .block)
    let old = fact("CN=legacy.partner.example", sha: 3, spki: 3, dns: ["legacy.partner.example"], key: .rsa, bits: 2048)
    let legacy = Evaluator().evaluate(evidence("legacy.partner.example", path: [old, root], version: .tls1_1), policy: p, at: now)
    #expect(legacy.deciding?.reason == .tlsVersion && legacy.action == .alert)
    #expect(p.rule(for: "a.m.example.com", port: 443).nonTLS == .block)
}

@Test func annotatedExampleMeansWhatItsCommentsSay() throws {
    let p = try load("examples/annotated.yaml").policy
    for (host, port, pattern) in [("pay.example.com", 443, "pay.example.com"), ("pay.example.com", 8443, "pay.example.com:8443"),
                                  ("eu.pay.example.com", 443, "*.pay.example.com"), ("a.b.payments.example", 443, ".payments.example")] {
        let m = p.match(host: host, port: UInt16(port))
        #expect(m.rule.name == "payments" && m.pattern?.description == pattern, "\(host):\(port)")
    }
    #expect(p.match(host: "a.b.pay.example.com", port: 443).rule.name == "defaults")   // the wildcard is one label
    let r = p.rules[0]
    #expect(r.action == .block && r.anchors.system && r.anchors.certificates.count == 1)
    #expect(r.pins?.root?.count == 2 && r.pins?.intermediate?.count == 2 && r.pins?.leafSubjects.count == 2)
    #expect(r.pins?.expires == UnixTime(seconds: 1_893_456_000))
    #expect(r.profile == .ats && r.checkHostname)   // hostname: inherited from defaults
    #expect(r.onProbeError == .block && r.nonTLS == .block && r.sniMismatch == .alert && r.httpsOnly)
    #expect(r.localRoot == .alert)   // not written: the built-in default via defaults
}
