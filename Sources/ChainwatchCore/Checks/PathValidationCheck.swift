/// Check 2: the chain builds a valid path to the rule's anchors (as OpenSSL found, at the evaluation time).
public struct PathValidationCheck: Check {
    public init() {}
    public var name: String { "path" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        let v = evidence.validation
        if let error = v.error {
            let count = max(v.path.count, error.depth + 1)
            let level: ChainLevel? = v.path.isEmpty && error.depth == 0 && v.presented.isEmpty ? nil : .of(depth: error.depth, count: count)
            return .fails(error.reason, level: level, detail: "\(error.message) (depth \(error.depth))")
        }
        if v.path.isEmpty {
            return .fails(.untrustedChain, level: nil, detail: "no certification path was built")
        }
        return .passes
    }
}
