import Testing
@testable import ChainwatchCore

private let ats = Rule(name: "ats", profile: .ats)

@Test func atsPassesModernEvidence() {
    #expect(ProtocolCheck().evaluate(Synthetic.evidence(), rule: ats, at: Synthetic.now) == .passes)
}

@Test func noProfileChecksNothing() {
    let old = Synthetic.evidence(version: .tls1_0)
    #expect(ProtocolCheck().evaluate(old, rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func versionBelowFloorFails() {
    guard case .fails(.tlsVersion, nil, let detail) = ProtocolCheck().evaluate(Synthetic.evidence(version: .tls1_1), rule: ats, at: Synthetic.now) else {
        Issue.record("expected tls_version"); return
    }
    #expect(detail.contains("TLS 1.1"))
}

@Test func sha1SignedIntermediateIsWeakButSha1RootIsNot() {
    var path = Synthetic.goodPath
    path[2].signatureDigest = "SHA1"       // the anchor's self-signature is never checked
    #expect(ProtocolCheck().evaluate(Synthetic.evidence(path: path), rule: ats, at: Synthetic.now) == .passes)
    path[1].signatureDigest = "SHA1"
    #expect(ProtocolCheck().evaluate(Synthetic.evidence(path: path), rule: ats, at: Synthetic.now)
            .reason == .weakSignature)
}

@Test func smallKeysAreWeak() {
    var path = Synthetic.goodPath
    path[0].keyType = .rsa; path[0].keyBits = 1024
    let r = ProtocolCheck().evaluate(Synthetic.evidence(path: path), rule: ats, at: Synthetic.now)
    #expect(r == .fails(.weakKey, level: .leaf, detail: "CN=api.example.com,O=Example has a 1024-bit RSA key; profile ats needs RSA ≥ 2048"))
    path[0].keyType = .ec; path[0].keyBits = 224
    #expect(ProtocolCheck().evaluate(Synthetic.evidence(path: path), rule: ats, at: Synthetic.now).reason == .weakKey)
}

@Test func staticRSAKeyExchangeHasNoForwardSecrecy() {
    let e = Synthetic.evidence(version: .tls1_2, cipher: NegotiatedCipher(name: "AES128-GCM-SHA256", forwardSecret: false))
    #expect(ProtocolCheck().evaluate(e, rule: ats, at: Synthetic.now).reason == .noForwardSecrecy)
    let unknown = Synthetic.evidence(version: .tls1_2, cipher: NegotiatedCipher(name: "?", forwardSecret: nil))
    #expect(ProtocolCheck().evaluate(unknown, rule: ats, at: Synthetic.now) == .passes)
}

@Test func protocolVersionNames() {
    #expect(TLSVersion.tls1_2.description == "TLS 1.2")
    #expect(TLSVersion(policyText: "TLSv1.3") == .tls1_3)
    #expect(TLSVersion(rawValue: 0x7F1C).description == "0x7F1C")
}

extension CheckResult {
    var reason: Reason? { if case .fails(let r, _, _) = self { return r } else { return nil } }
    var level: ChainLevel? { if case .fails(_, let l, _) = self { return l } else { return nil } }
    var detail: String? { if case .fails(_, _, let d) = self { return d } else { return nil } }
}
