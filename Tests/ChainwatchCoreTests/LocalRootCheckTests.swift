import Testing
@testable import ChainwatchCore

@Test func systemRootPasses() {
    #expect(NonSystemAnchorCheck().evaluate(Synthetic.evidence(), rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func installedCAOnUnpinnedHostIsReported() {
    let e = Synthetic.evidence(path: Synthetic.forgedPath, systemRoot: false)
    let r = NonSystemAnchorCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now)
    #expect(r.reason == .nonSystemAnchor && r.level == .root)
}

@Test func ruleTrustingOnlyItsOwnCAPasses() {
    let own = Rule(name: "own", anchors: Anchors(system: false, certificates: [.init(der: [0x30], origin: "ca.pem")]))
    #expect(NonSystemAnchorCheck().evaluate(Synthetic.evidence(systemRoot: false), rule: own, at: Synthetic.now) == .passes)
}

@Test func pinnedHostIsLeftToThePins() {
    let pinned = Rule(name: "p", pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)])))
    #expect(NonSystemAnchorCheck().evaluate(Synthetic.evidence(systemRoot: false), rule: pinned, at: Synthetic.now) == .passes)
}
