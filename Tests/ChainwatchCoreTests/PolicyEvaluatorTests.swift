import Testing
@testable import ChainwatchCore

@Test func genuineChainPassesEveryStandardCheck() {
    let rule = Rule(name: "r", action: .block, pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)])), profile: .ats)
    let v = Evaluator().evaluate(Synthetic.evidence(), rule: rule, at: Synthetic.now)
    #expect(v.passes && v.action == nil)
    #expect(v.rule == rule.identity)
}

@Test func firstBlockingFailureDecidesAndAllFindingsAreListed() {
    let rule = Rule(name: "r", action: .block, pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)])))
    let untrusted = ValidationError(reason: .untrustedChain, opensslCode: 20, message: "unable to get local issuer certificate", depth: 2)
    let v = Evaluator().evaluate(Synthetic.evidence(host: "evil.example.net", path: Synthetic.forgedPath, error: untrusted, anchor: nil),
                                 rule: rule, at: Synthetic.now)
    #expect(v.findings.map(\.reason) == [.untrustedChain, .hostnameMismatch, .rootMismatch])
    #expect(v.deciding?.reason == .untrustedChain)
    #expect(v.action == .block)
}

@Test func expiredPinsOnlyAlertEvenUnderBlock() {
    let rule = Rule(name: "r", action: .block, pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)]), expires: UnixTime(seconds: 0)))
    let v = Evaluator().evaluate(Synthetic.evidence(), rule: rule, at: Synthetic.now)
    #expect(v.findings.map(\.reason) == [.pinExpired])
    #expect(v.action == .alert)
}

@Test func allowedDispositionsProduceNoFinding() {
    var rule = Rule(name: "r", sniMismatch: .allow)
    #expect(Evaluator().evaluate(Synthetic.evidence(host: "x.example.com", sni: "api.example.com"), rule: rule, at: Synthetic.now).passes)
    rule.sniMismatch = .block
    let v = Evaluator().evaluate(Synthetic.evidence(host: "x.example.com", sni: "api.example.com"), rule: rule, at: Synthetic.now)
    #expect(v.action == .block && v.deciding?.reason == .sniMismatch)
}

@Test func evaluatorPicksTheRuleBySNI() {
    let policy = Policy(rules: [Rule(name: "api", patterns: [try! HostPattern(parsing: "api.example.com")], action: .block)])
    let v = Evaluator().evaluate(Synthetic.evidence(host: "api.example.com", path: Synthetic.forgedPath, anchor: .localRoot), policy: policy, at: Synthetic.now)
    #expect(v.rule.name == "api")
    #expect(v.findings.map(\.reason) == [.localRoot])
    #expect(v.action == .alert)   // local_root defaults to alert
}

@Test func tunnelEventsFollowTheRule() {
    let rule = Rule(name: "r", action: .block, onProbeError: .block, nonTLS: .allow, httpsOnly: true)
    #expect(Evaluator.verdict(for: .notTLS("SSH-2.0"), rule: rule).passes)
    #expect(Evaluator.verdict(for: .probeFailed("timeout"), rule: rule).action == .block)
    #expect(Evaluator.verdict(for: .plainHTTP("GET http://x/"), rule: rule).deciding?.reason == .httpsOnly)
    #expect(Evaluator.verdict(for: .plainHTTP("GET http://x/"), rule: Rule(name: "d")).passes)
}

@Test func probeFailureFollowsTheActionUnlessSet() {
    let blocking = Rule(name: "b", action: .block)
    #expect(blocking.onProbeErrorSetting == nil && blocking.onProbeError == .block)
    #expect(Evaluator.verdict(for: .probeFailed("timeout"), rule: blocking).action == .block)
    let alerting = Rule(name: "a", action: .alert)
    #expect(alerting.onProbeError == .alert && alerting.consequence(of: .probeFailed) == .alert)
    #expect(Rule.builtInDefault.onProbeError == .alert)
    // An explicit setting always wins, whatever the action.
    var explicit = Rule(name: "e", action: .block, onProbeError: .allow)
    #expect(explicit.consequence(of: .probeFailed) == nil)
    explicit.action = .alert
    explicit.onProbeError = .block
    #expect(explicit.onProbeErrorSetting == .block && explicit.consequence(of: .probeFailed) == .block)
}

@Test func evidenceMismatchTakesTheRuleAction() {
    #expect(Reason.evidenceMismatch.rawValue == "evidence_mismatch")
    #expect(Rule(name: "b", action: .block).consequence(of: .evidenceMismatch) == .block)
    #expect(Rule(name: "a", action: .alert).consequence(of: .evidenceMismatch) == .alert)
}
