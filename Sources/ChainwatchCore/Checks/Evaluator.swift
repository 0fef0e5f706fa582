/// One failed check under a rule, with what it leads to.
public struct Finding: Sendable, Hashable {
    public var reason: Reason
    public var level: ChainLevel?
    public var detail: String
    /// The check that found it (`Check.name`).
    public var check: String
    /// `block` or `alert`, from the rule (`pin_expired` always alerts).
    public var action: Action
    public init(reason: Reason, level: ChainLevel?, detail: String, check: String, action: Action) {
        self.reason = reason; self.level = level; self.detail = detail; self.check = check; self.action = action
    }
}

/// The result of evaluating evidence against a rule: the findings in check order.
public struct Verdict: Sendable, Hashable {
    public var rule: RuleIdentity
    public var findings: [Finding]
    public init(rule: RuleIdentity, findings: [Finding]) { self.rule = rule; self.findings = findings }

    public var passes: Bool { findings.isEmpty }
    /// The finding that decides: the first that blocks, else the first.
    public var deciding: Finding? { findings.first { $0.action == .block } ?? findings.first }
    /// What the proxy does: nil (pass silently), `.alert` (log), `.block` (close both sides, log).
    public var action: Action? { deciding?.action }
}

/// Runs every check in DESIGN order and collects the findings. Pure.
public struct Evaluator: Sendable {
    public var checks: [any Check]

    /// The standard checks in order: protocol, path, hostname, pins, local root, revocation, SNI mismatch.
    public static let standardChecks: [any Check] = [
        ProtocolCheck(), PathValidationCheck(), HostnameCheck(), PinCheck(), LocalRootCheck(), RevocationCheck(),
        SNIMismatchCheck(),
    ]

    public init(checks: [any Check] = Evaluator.standardChecks) { self.checks = checks }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> Verdict {
        var findings: [Finding] = []
        for check in checks {
            guard case let .fails(reason, level, detail) = check.evaluate(evidence, rule: rule, at: now) else { continue }
            guard let action = rule.consequence(of: reason) else { continue }
            findings.append(Finding(reason: reason, level: level, detail: detail, check: check.name, action: action))
        }
        return Verdict(rule: rule.identity, findings: findings)
    }

    /// Picks the rule that judges the evidence's tunnel (`Policy.ruleHost`) and evaluates against it.
    public func evaluate(_ evidence: Evidence, policy: Policy, at now: UnixTime) -> Verdict {
        evaluate(evidence, rule: policy.rule(for: Policy.ruleHost(connectHost: evidence.connection.connectHost,
                                                                  serverName: evidence.serverName), port: evidence.port), at: now)
    }

    /// A verdict for a tunnel event that is not a chain: non-TLS bytes, a failed probe, plain HTTP.
    public static func verdict(for event: TunnelEvent, rule: Rule) -> Verdict {
        let reason: Reason, detail: String
        var action: Action?
        switch event {
        case .notTLS(let d): reason = .notTLS; detail = d; action = rule.consequence(of: .notTLS)
        case .serverNotTLS(let d):
            reason = .notTLS; detail = d
            action = rule.action == .block ? .block : rule.consequence(of: .notTLS)
        case .probeFailed(let d): reason = .probeFailed; detail = d; action = rule.consequence(of: .probeFailed)
        case .evidenceMismatch(let d): reason = .evidenceMismatch; detail = d; action = rule.consequence(of: .evidenceMismatch)
        case .plainHTTP(let d): reason = .httpsOnly; detail = d; action = rule.httpsOnly ? rule.action : nil
        case .noVerdict(let d): reason = .handshakeTimeout; detail = d; action = rule.consequence(of: .handshakeTimeout)
        case .malformedHandshake(let d):
            reason = .untrustedChain; detail = "the server's handshake cannot be parsed, so its chain cannot be judged: \(d)"
            action = rule.consequence(of: .untrustedChain)
        case .oversizedHandshake(let d):
            reason = .oversizedHandshake; detail = "\(d): its chain cannot be judged"; action = rule.consequence(of: .oversizedHandshake)
        }
        guard let action else { return Verdict(rule: rule.identity, findings: []) }
        return Verdict(rule: rule.identity, findings: [Finding(reason: reason, level: nil, detail: detail, check: "tunnel", action: action)])
    }
}

/// Things that happen to a tunnel that the policy judges without a chain.
public enum TunnelEvent: Sendable, Hashable {
    /// The first bytes are not a TLS record (detail: what was seen).
    case notTLS(String)
    /// The server answered a ClientHello with bytes that are not TLS (detail: what was seen): the chain cannot be
    /// judged, so a `block` rule blocks whatever `non_tls` says (its bytes would otherwise reach a client that asked
    /// for TLS, unjudged); under `alert`, `non_tls` decides.
    case serverNotTLS(String)
    /// A probe that was needed could not get the chain (detail: why).
    case probeFailed(String)
    /// A TLS 1.3 tunnel's ServerHello disagrees with the probe's, even after a fresh probe (detail: what differs).
    case evidenceMismatch(String)
    /// A plain HTTP request to the host (detail: the request line).
    case plainHTTP(String)
    /// Server bytes held for a verdict whose evidence did not come in time (detail: what was missing).
    case noVerdict(String)
    /// The server's handshake cannot be parsed (detail: how): its chain cannot be judged, a chain failure.
    case malformedHandshake(String)
    /// A server handshake message is larger than chainwatch reads (detail: how large).
    case oversizedHandshake(String)
}
