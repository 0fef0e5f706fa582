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

        public static let admit = Decision(refusal: nil, finding: nil)
    }

    /// A CONNECT to an upstream marked known-bad gets `403` and a line naming the evidence that marked it (its
    /// handshake's version, cipher, SNI, chain), as a cached verdict's line does: this connection has had no
    /// handshake. A mark counts only under the policy and OS trust store that made it: one set by a judgement still
    /// in flight across a reload (its rule changed, or the OS store did) answers nobody.
    /// - Parameters:
    ///   - facts: the connection's facts (client, CONNECT host and port).
    ///   - ruleIdentities, anchorsGeneration: the current policy snapshot's.
    public static func connect(facts: @autoclosure () -> ConnectionFacts, mark: KnownBadMark?, policy: Policy,
                               ruleIdentities: Set<RuleIdentity>, anchorsGeneration: Int) -> Decision {
        guard let mark, ruleIdentities.contains(mark.rule), mark.anchors == anchorsGeneration else { return .admit }
        var evidence = mark.evidence
        evidence?.source = .cache
        var facts = facts()   // only now: the client's address as text is not made for every CONNECT
        facts.serverName = evidence?.serverName
        facts.protocolVersion = evidence?.protocolVersion
        facts.cipher = evidence?.cipher
        facts.upstreamIP = evidence?.connection.upstreamIP
        let rule = policy.rule(for: facts.connectHost, port: facts.port)
        return Decision(
            refusal: .init(status: 403, reason: "blocked by chainwatch: \(mark.finding.reason.rawValue): \(mark.finding.detail)"),
            finding: FindingLine(verdict: Verdict(rule: mark.rule, findings: [mark.finding]), evidence: evidence, rule: rule, facts: facts))
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
