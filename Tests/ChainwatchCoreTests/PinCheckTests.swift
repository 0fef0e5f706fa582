import Testing
@testable import ChainwatchCore

private func pinned(_ pins: PinSet) -> Rule { Rule(name: "p", action: .block, pins: pins) }
private let p = Synthetic.pin

private let threeLevel = PinSet(
    root: LevelPins(spki: [p(0x11), p(0x22)]),
    intermediate: LevelPins(spki: [p(0x33), p(0x44)]),
    leafSubjects: [.distinguishedName("CN=api.example.com, O=Example")])

@Test func genuinePathPassesAllLevels() {
    #expect(PinCheck().evaluate(Synthetic.evidence(), rule: pinned(threeLevel), at: Synthetic.now) == .passes)
}

@Test func forgedPathFailsAtTheRoot() {
    let r = PinCheck().evaluate(Synthetic.evidence(path: Synthetic.forgedPath, anchor: .localRoot), rule: pinned(threeLevel), at: Synthetic.now)
    #expect(r.reason == .rootMismatch)
    #expect(r.level == .root)
}

@Test func appendedGenuineCertificateDoesNotHelpAForgery() {
    // The attacker sends forged leaf+intermediate and appends the genuine pinned intermediate and root:
    // OpenSSL's validated path still ends at the forged anchor, and only the path is compared.
    let presented = Synthetic.forgedPath + [Synthetic.intermediate, Synthetic.root]
    var e = Synthetic.evidence(path: Synthetic.forgedPath, anchor: .localRoot)
    e.validation.presented = presented
    let onlyIntermediate = PinSet(intermediate: LevelPins(spki: [p(0x33)]))
    #expect(PinCheck().evaluate(e, rule: pinned(onlyIntermediate), at: Synthetic.now).reason == .intermediateMismatch)
}

@Test func anyMemberOfALevelPasses() {
    let backupOnly = PinSet(root: LevelPins(certificates: [p(0x99), p(0xA1)]))   // certificate SHA-256 of the root
    #expect(PinCheck().evaluate(Synthetic.evidence(), rule: pinned(backupOnly), at: Synthetic.now) == .passes)
}

@Test func leafSubjectAndNamePatterns() {
    let byName = PinSet(leafSubjects: [.name("*.example.com")])
    #expect(PinCheck().evaluate(Synthetic.evidence(), rule: pinned(byName), at: Synthetic.now) == .passes)
    let wrong = PinSet(leafSubjects: [.distinguishedName("CN=other.example.com"), .name("*.example.org")])
    #expect(PinCheck().evaluate(Synthetic.evidence(), rule: pinned(wrong), at: Synthetic.now).reason == .leafSubjectMismatch)
}

@Test func leafKeyPinMismatchIsSPKIMismatch() {
    let leafKey = PinSet(leaf: LevelPins(spki: [p(0x55), p(0x66)]))
    #expect(PinCheck().evaluate(Synthetic.evidence(), rule: pinned(leafKey), at: Synthetic.now) == .passes)
    let r = PinCheck().evaluate(Synthetic.evidence(path: Synthetic.forgedPath), rule: pinned(leafKey), at: Synthetic.now)
    #expect(r.reason == .spkiMismatch && r.level == .leaf)
}

@Test func pathWithoutIntermediatesFailsIntermediatePins() {
    let short = [Synthetic.leaf, Synthetic.root]
    let r = PinCheck().evaluate(Synthetic.evidence(path: short), rule: pinned(PinSet(intermediate: LevelPins(spki: [p(0x33)]))), at: Synthetic.now)
    #expect(r.reason == .intermediateMismatch)
}

@Test func expiredPinSetIsReportedNotEnforced() {
    var set = threeLevel
    set.expires = UnixTime(seconds: Synthetic.now.seconds)
    let r = PinCheck().evaluate(Synthetic.evidence(path: Synthetic.forgedPath), rule: pinned(set), at: Synthetic.now)
    #expect(r.reason == .pinExpired)
    set.expires = UnixTime(seconds: Synthetic.now.seconds + 1)
    #expect(PinCheck().evaluate(Synthetic.evidence(path: Synthetic.forgedPath), rule: pinned(set), at: Synthetic.now).reason == .rootMismatch)
}

@Test func noPinsPasses() {
    #expect(PinCheck().evaluate(Synthetic.evidence(path: Synthetic.forgedPath), rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

/// A forgery copies subjects, never keys: a root_mismatch names the anchor's SPKI pin beside its subject (issue 27).
@Test func aPinFindingNamesTheCertificateByKeyToo() {
    let r = PinCheck().evaluate(Synthetic.evidence(path: Synthetic.forgedPath, anchor: .localRoot), rule: pinned(threeLevel), at: Synthetic.now)
    guard case .fails(_, _, let detail) = r, let anchor = Synthetic.forgedPath.last else { Issue.record("passed"); return }
    #expect(detail == "anchor \(anchor.subject) (spki sha256/\(HashText.base64(anchor.spkiSHA256))) is not in the root pin set")
}
