/// Check 4: the rule's pins, level by level on the *validated path* (never on the order the server sent):
/// root = the path's last certificate, intermediates = those between, leaf = the first. Any member of a
/// level's set passes that level. Past the set's `expires`, reports `pin_expired` instead of enforcing.
public struct PinCheck: Check {
    public init() {}
    public var name: String { "pins" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        guard let pins = rule.pins else { return .passes }
        if let expires = pins.expires, now >= expires {
            return .fails(.pinExpired, level: nil, detail: "pin set expired \(expires.rfc3339); not enforced until renewed")
        }
        let path = evidence.validation.path
        if let root = pins.root {
            guard let anchor = path.last, path.count > 1 || evidence.validation.error == nil, root.matches(anchor) else {
                return .fails(.rootMismatch, level: .root, detail: "anchor \(path.last.map(Self.named) ?? "(none)") is not in the root pin set")
            }
        }
        if let intermediate = pins.intermediate {
            let middle = path.count > 2 ? Array(path[1..<(path.count - 1)]) : []
            guard middle.contains(where: intermediate.matches) else {
                let seen = middle.isEmpty ? "no intermediate on the path" : middle.map(Self.named).joined(separator: "; ")
                return .fails(.intermediateMismatch, level: .intermediate, detail: "\(seen): none is in the intermediate pin set")
            }
        }
        if !pins.leafSubjects.isEmpty {
            guard let leaf = path.first, pins.leafSubjects.contains(where: { $0.matches(leaf) }) else {
                return .fails(.leafSubjectMismatch, level: .leaf,
                              detail: "leaf \(path.first.map(Self.named) ?? "(none)") matches none of \(pins.leafSubjects.map(\.description).joined(separator: ", "))")
            }
        }
        if let leafPins = pins.leaf {
            guard let leaf = path.first, leafPins.matches(leaf) else {
                return .fails(.spkiMismatch, level: .leaf, detail: "leaf \(path.first.map(Self.named) ?? "(none)") matches no leaf pin")
            }
        }
        return .passes
    }

    /// A certificate as a finding names it: its subject, which a forgery copies, and its SPKI pin, which it cannot.
    static func named(_ certificate: CertificateFacts) -> String {
        "\(certificate.subject) (spki sha256/\(HashText.base64(certificate.spkiSHA256)))"
    }
}
