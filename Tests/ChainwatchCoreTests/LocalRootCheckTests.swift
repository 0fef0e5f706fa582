import Testing
@testable import ChainwatchCore

@Test func publicRootPasses() {
    #expect(LocalRootCheck().evaluate(Synthetic.evidence(), rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func rootAddedToTheOSStoreOnUnpinnedHostIsReported() {
    let e = Synthetic.evidence(path: Synthetic.forgedPath, anchor: .localRoot)
    let r = LocalRootCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now)
    #expect(r.reason == .localRoot && r.level == .root)
    #expect(r.detail?.contains("added to this machine's trust store") == true)
}

/// The operator named it (`--ca`, a rule's anchors): trusted deliberately, so quiet, also beside `system`.
@Test func anchorTheOperatorNamedPasses() {
    let e = Synthetic.evidence(path: Synthetic.forgedPath, anchor: .operatorAnchor)
    #expect(LocalRootCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

/// Without the public set, a system root's kind is unknown: nothing is raised rather than a guess.
@Test func systemRootOfUnknownKindPasses() {
    let e = Synthetic.evidence(path: Synthetic.forgedPath, anchor: .systemRoot)
    #expect(LocalRootCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func chainThatDoesNotValidateIsLeftToPathValidation() {
    let untrusted = ValidationError(reason: .untrustedChain, opensslCode: 20, message: "unable to get local issuer certificate", depth: 1)
    let e = Synthetic.evidence(path: Synthetic.forgedPath, error: untrusted, anchor: .localRoot)
    #expect(LocalRootCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func ruleTrustingOnlyItsOwnCAPasses() {
    let own = Rule(name: "own", anchors: Anchors(system: false, certificates: [.init(der: [0x30], origin: "ca.pem")]))
    #expect(LocalRootCheck().evaluate(Synthetic.evidence(anchor: .localRoot), rule: own, at: Synthetic.now) == .passes)
}

@Test func pinnedHostIsLeftToThePins() {
    let pinned = Rule(name: "p", pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)])))
    #expect(LocalRootCheck().evaluate(Synthetic.evidence(anchor: .localRoot), rule: pinned, at: Synthetic.now) == .passes)
}
