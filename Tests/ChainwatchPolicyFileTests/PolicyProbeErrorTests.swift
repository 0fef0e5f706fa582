import Testing
import ChainwatchCore
@testable import ChainwatchPolicyFile

/// `on_probe_error` defaults to the rule's action (a blocking rule fails closed); an explicit setting, in the rule or
/// inherited from `defaults`, wins; `policy check` warns when a blocking rule fails open.
private func load(_ yaml: String) throws -> (policy: Policy, warnings: [Diagnostic]) {
    try PolicyLoader.load(yaml: yaml, path: "/tmp/probe.yaml", now: TestPaths.now)
}

private func rule(_ settings: String, defaults: String = "action: alert") -> String {
    """
    defaults: {\(defaults)}
    rules:
      - name: api
        match: [api.example.com]
        \(settings)
    """
}

@Test func blockingRuleWithoutSettingBlocksOnProbeFailure() throws {
    let (policy, warnings) = try load(rule("action: block"))
    let api = policy.rule(for: "api.example.com", port: 443)
    #expect(api.onProbeErrorSetting == nil && api.onProbeError == .block)
    #expect(api.consequence(of: .probeFailed) == .block)
    #expect(policy.rule(for: "other.example.com", port: 443).onProbeError == .alert)
    #expect(warnings.isEmpty)
}

@Test func alertingRuleKeepsAlertOnProbeFailure() throws {
    let (policy, _) = try load(rule("action: alert"))
    #expect(policy.rule(for: "api.example.com", port: 443).onProbeError == .alert)
}

@Test func explicitSettingInTheRuleWinsAndIsFlagged() throws {
    let (policy, warnings) = try load(rule("action: block\n    on_probe_error: alert"))
    #expect(policy.rule(for: "api.example.com", port: 443).onProbeError == .alert)
    #expect(warnings.count == 1)
    let warning = try #require(warnings.first)
    #expect(warning.severity == .warning && warning.line == 6)
    #expect(warning.message.contains("blocking rule 'api' has on_probe_error: alert") && warning.message.contains("fails open"))
}

@Test func settingInheritedFromDefaultsWinsAndIsFlagged() throws {
    let (policy, warnings) = try load(rule("action: block", defaults: "action: alert, on_probe_error: allow"))
    #expect(policy.rule(for: "api.example.com", port: 443).onProbeError == .allow)
    #expect(policy.rule(for: "other.example.com", port: 443).onProbeError == .allow)
    #expect(warnings.map(\.message) == ["blocking rule 'api' has on_probe_error: allow (inherited from defaults): when the TLS 1.3 probe fails, its hosts are let through unchecked (fails open)"])
}

@Test func blockingDefaultsBlockOnProbeFailure() throws {
    let (policy, _) = try load(rule("action: alert", defaults: "action: block"))
    #expect(policy.rule(for: "other.example.com", port: 443).onProbeError == .block)
    #expect(policy.rule(for: "api.example.com", port: 443).onProbeError == .alert)
}

@Test func pinWithBlockWritesOnProbeErrorBlock() throws {
    let block = PolicyWriter.pinRule(name: "api", host: "api.example.com", port: nil, action: .block, path: [])
    #expect(block.contains("\n    on_probe_error: block"))
    let alert = PolicyWriter.pinRule(name: "api", host: "api.example.com", port: nil, action: .alert, path: [])
    #expect(!alert.contains("on_probe_error"))
    let (policy, _) = try load("defaults: {action: alert}\nrules:\n" + block)
    #expect(policy.rule(for: "api.example.com", port: 443).onProbeErrorSetting == .block)
}

@Test func explainerSaysWhenProbeFailureFollowsTheAction() throws {
    let (policy, _) = try load(rule("action: block"))
    let text = Explainer.explain(policy, host: "api.example.com")
    #expect(text.contains("if the probe fails → block, as the rule's action (no on_probe_error) (probe_failed)"))
    #expect(text.contains("→ blocked (evidence_mismatch)"))
}
