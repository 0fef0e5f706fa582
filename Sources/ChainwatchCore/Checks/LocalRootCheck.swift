/// Check 5: for a rule without pins that trusts the system roots, a chain that validated only through one of
/// the rule's extra anchors (or an installed `--ca`) is worth reporting: it is how interception CAs look.
/// Rules that trust only their own CA (no `system`) chose that anchor and pass.
public struct NonSystemAnchorCheck: Check {
    public init() {}
    public var name: String { "non_system_anchor" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        let pinned = rule.pins.map { !$0.isExpired(at: now) } ?? false
        guard !pinned, rule.anchors.system else { return .passes }
        let v = evidence.validation
        guard v.error == nil, let anchor = v.path.last, !v.anchorIsSystemRoot else { return .passes }
        return .fails(.nonSystemAnchor, level: .root, detail: "chain validates only through \(anchor.subject), not a system root")
    }
}
