/// Check 5: for a rule without pins that trusts `system`, a chain that validates only through a root added to this
/// machine's OS trust store (not a public root, not an anchor the operator named) is reported: that is how the CA of
/// a TLS-inspection gateway, installed with `update-ca-certificates` or a management profile, looks (the idea of
/// Chromium's `isIssuedByKnownRoot`). Anchors the operator names (`--ca`, a rule's own) are trusted quietly.
public struct LocalRootCheck: Check {
    public init() {}
    public var name: String { "local_root" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        let pinned = rule.pins.map { !$0.isExpired(at: now) } ?? false
        guard !pinned, rule.anchors.system else { return .passes }
        let v = evidence.validation
        guard v.error == nil, let anchor = v.path.last, v.anchorKind == .localRoot else { return .passes }
        return .fails(.localRoot, level: .root,
                      detail: "chain validates only through \(anchor.subject), a root added to this machine's trust store, not a public root")
    }
}
