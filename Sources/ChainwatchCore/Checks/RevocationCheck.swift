/// Check 6: a stapled OCSP response, signed by the leaf's issuer, that says the leaf is revoked. The server itself
/// says its certificate must not be trusted; an absent, unknown or unusable staple is recorded, not judged.
public struct RevocationCheck: Check {
    public init() {}
    public var name: String { "revocation" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        guard case .revoked(let detail) = evidence.stapled else { return .passes }
        return .fails(.revoked, level: .leaf, detail: "the stapled OCSP response says the leaf is revoked: \(detail)")
    }
}
