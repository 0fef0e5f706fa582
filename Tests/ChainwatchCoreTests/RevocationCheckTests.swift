import Testing
@testable import ChainwatchCore

@Test func revokedStapleIsALeafFinding() {
    var e = Synthetic.evidence()
    e.stapled = .revoked(detail: "keyCompromise, serial 2000")
    let r = RevocationCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now)
    #expect(r.reason == .revoked && r.level == .leaf)
    #expect(r.detail?.contains("keyCompromise") == true)
    let v = Evaluator().evaluate(e, rule: Rule(name: "r", action: .block), at: Synthetic.now)
    #expect(v.action == .block && v.deciding?.reason == .revoked)
}

@Test(arguments: [nil, StapledStatus.good, .unknown, .invalid("not signed by the leaf's issuer")])
func anyOtherStapleOrNoneIsNoFinding(stapled: StapledStatus?) {
    var e = Synthetic.evidence()
    e.stapled = stapled
    #expect(RevocationCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}
