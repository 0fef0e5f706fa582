import Testing
@testable import ChainwatchCore

@Test func validatedPathPasses() {
    #expect(PathValidationCheck().evaluate(Synthetic.evidence(), rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func validationErrorBecomesItsReasonAtItsLevel() {
    let untrusted = ValidationError(reason: .untrustedChain, opensslCode: 20, message: "unable to get local issuer certificate", depth: 1)
    let r = PathValidationCheck().evaluate(Synthetic.evidence(error: untrusted), rule: Rule(name: "r"), at: Synthetic.now)
    #expect(r == .fails(.untrustedChain, level: .intermediate, detail: "unable to get local issuer certificate (depth 1)"))
    let expired = ValidationError(reason: .expired, opensslCode: 10, message: "certificate has expired", depth: 0)
    #expect(PathValidationCheck().evaluate(Synthetic.evidence(error: expired), rule: Rule(name: "r"), at: Synthetic.now).level == .leaf)
}

@Test func emptyPathWithoutErrorIsUntrusted() {
    let r = PathValidationCheck().evaluate(Synthetic.evidence(path: []), rule: Rule(name: "r"), at: Synthetic.now)
    #expect(r.reason == .untrustedChain)
}
