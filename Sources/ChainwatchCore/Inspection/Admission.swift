/// An upstream whose last verdict blocked: its next CONNECTs get `403` until `expires`, without a handshake.
public struct KnownBadMark: Sendable {
    public var finding: Finding
    public var ruleName: String
    public var rule: RuleIdentity
    public var evidence: Evidence?
    /// When the mark lapses (monotonic milliseconds).
    public var expires: Int64
    /// The OS trust store's read the finding was judged against (`PolicySnapshot.anchorsGeneration`).
    public var anchors: Int
    /// `403`s answered for the mark so far: each is a refusal counted here, not a finding of its own.
    public var refusals = 0

    public init(finding: Finding, ruleName: String, rule: RuleIdentity, evidence: Evidence?, expires: Int64, anchors: Int = 0) {
        self.finding = finding; self.ruleName = ruleName; self.rule = rule; self.evidence = evidence
        self.expires = expires; self.anchors = anchors
    }
}

/// Whether a proxy request may go on before any upstream is reached, and what finding that writes. Pure: the
/// executor looks up the mark and the policy snapshot, writes the finding and answers the refusal.
public enum Admission {
    /// A finding to write (its verdict, the evidence it rests on, the rule, the connection's facts).
    public struct FindingLine: Sendable {
        public var verdict: Verdict
        public var evidence: Evidence?
        public var rule: Rule
        public var facts: ConnectionFacts
    }

    public struct Decision: Sendable {
        /// nil: the request goes on.
        public var refusal: ProxyRequest.Refusal?
        /// A line for the alert log, whether or not the request goes on.
        public var finding: FindingLine?
        /// The known-bad mark the refusal answers for: the refusal is counted on it (its finding was written once,
        /// when the mark was set), with what the access line says.
        public var mark: (mark: KnownBadMark, outcome: InspectionOutcome)?

        public init(refusal: ProxyRequest.Refusal?, finding: FindingLine?, mark: (mark: KnownBadMark, outcome: InspectionOutcome)? = nil) {
            self.refusal = refusal; self.finding = finding; self.mark = mark
        }

        public static let admit = Decision(refusal: nil, finding: nil)
    }

    /// A CONNECT to an upstream marked known-bad gets `403` naming the mark's finding, and no line of its own: the
    /// finding was written when the mark was set (with the mark's expiry and how to clear it); a client that retries
    /// would otherwise write hundreds of copies of it. A mark counts only under the policy and OS trust store that
    /// made it: one set by a judgement still in flight across a reload (its rule changed, or the OS store did) answers
    /// nobody.
    /// - Parameters:
    ///   - ruleIdentities, anchorsGeneration: the current policy snapshot's.
    ///   - secondsLeft: until the mark lapses, for the refusal's text.
    /// The text names the clear command without the admin listener's address (`Observer.admin`): the client reads
    /// it, the operator's alert line names the address.
    public static func connect(_ authority: Authority, mark: KnownBadMark?, ruleIdentities: Set<RuleIdentity>,
                               anchorsGeneration: Int, secondsLeft: Int) -> Decision {
        guard let mark, ruleIdentities.contains(mark.rule), mark.anchors == anchorsGeneration else { return .admit }
        let text = "blocked by chainwatch: \(mark.finding.reason.rawValue): \(mark.finding.detail) "
            + "(known-bad for \(secondsLeft) s more; \(AlertRecord.clearCommand(host: authority.host, port: authority.port)) ends it)"
        return Decision(refusal: .init(status: 403, reason: text), finding: nil,
                        mark: (mark, InspectionOutcome(action: .block, reason: mark.finding.reason, evidence: .cache)))
    }

    /// Plain HTTP to a host whose rule says `https_only`: a finding, and under `block` a `403`.
    public static func forward(_ authority: Authority, facts: @autoclosure () -> ConnectionFacts, requestLine: String,
                               policy: Policy) -> Decision {
        let rule = policy.rule(for: authority.host, port: authority.port)
        guard rule.httpsOnly else { return .admit }
        let facts = facts()
        let verdict = Evaluator.verdict(for: .plainHTTP(String(requestLine.prefix(200))), rule: rule)
        let line = FindingLine(verdict: verdict, evidence: nil, rule: rule, facts: facts)
        guard verdict.action == .block else { return Decision(refusal: nil, finding: line) }
        return Decision(refusal: .init(status: 403, reason: "blocked by chainwatch: https_only: plain HTTP to \(authority.host) is not allowed"),
                        finding: line)
    }
}
