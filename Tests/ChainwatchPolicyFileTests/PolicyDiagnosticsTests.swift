import Testing
import Foundation
import ChainwatchCore
@testable import ChainwatchPolicyFile

/// (line, column, severity, a piece of the message, a piece of the hint)
private typealias Expected = (Int, Int, Diagnostic.Severity, String, String?)

private func check(_ file: String, _ expected: [Expected], sourceLocation: SourceLocation = #_sourceLocation) {
    let path = TestPaths.brokenFile(file)
    let got = Linter.lint(path: path, now: TestPaths.now)
    #expect(got.count == expected.count, "\(file): \(got.map(\.description))", sourceLocation: sourceLocation)
    for (d, e) in zip(got, expected) {
        #expect(d.file == path, sourceLocation: sourceLocation)
        #expect((d.line, d.column) == (e.0, e.1), "\(d)", sourceLocation: sourceLocation)
        #expect(d.severity == e.2, "\(d)", sourceLocation: sourceLocation)
        #expect(d.message.contains(e.3), "\(d)", sourceLocation: sourceLocation)
        if let hint = e.4 { #expect(d.hint?.contains(hint) == true, "\(d)", sourceLocation: sourceLocation) }
    }
}

@Test func unknownKeySuggestsTheClosest() {
    check("unknown-key.yaml", [(7, 5, .error, "unknown key 'acton' in a rule", "did you mean 'action'?")])
}

@Test func sha1LengthFingerprintIsRefusedAtItsValue() {
    check("fingerprint-length.yaml", [(10, 13, .error, "is 20 bytes; SHA-256 has 32 (that is a SHA-1 fingerprint)", "-sha256")])
}

@Test func badFingerprintEncodingsAreRefused() {
    check("fingerprint-encoding.yaml", [
        (9, 16, .error, "is not valid base64 after sha256/", nil),
        (9, 38, .error, "is in no known form", "base64 needs the sha256/ prefix"),
    ])
}

@Test func unreadablePEMIsAnError() {
    check("unreadable-pem.yaml", [(7, 23, .error, "cannot read anchor file '../pem/missing.pem'", "relative to the policy file's directory")])
}

@Test func nonCAPEMIsAnError() {
    check("non-ca-pem.yaml", [(7, 15, .error, "is not a CA certificate", "pin it instead")])
}

@Test func brokenPEMAndMisspeltSystem() {
    check("bad-pem.yaml", [
        (8, 9, .error, "is not valid base64", nil),
        (9, 9, .error, "no PEM certificate", nil),
        (10, 9, .error, "cannot read anchor file 'sytem'", "did you mean 'system'?"),
    ])
}

@Test func emptyPinSetsAreErrors() {
    check("empty-pin-set.yaml", [
        (7, 11, .error, "empty pin set: `pins` names no", nil),
        (12, 9, .error, "empty pin set: `root` has no pin", nil),
    ])
}

@Test func shadowedPatternsAreErrors() {
    check("shadowed-rule.yaml", [
        (9, 9, .error, "'api.example.com' is shadowed: rule 'first' (line 6) matches it first", nil),
        (10, 9, .error, "'.example.org' is shadowed", nil),
    ])
}

@Test func blockingSingleMemberPinSetWarnsNoBackup() {
    check("no-backup-pin.yaml", [(10, 9, .warning, "no backup pin: the root pin set", nil)])
}

@Test func expiredPinSetWarns() {
    check("expired-pins.yaml", [(8, 16, .warning, "expired on 2020-01-01", nil)])
}

@Test func unquotedWildcardGetsAQuotingHint() {
    check("unquoted-wildcard.yaml", [(6, 14, .error, "YAML:", "quote patterns that start with *")])
}

@Test func badValuesAreEachReported() {
    check("bad-values.yaml", [
        (6, 30, .error, "a wildcard may only be the whole left-most label", nil),
        (6, 48, .error, "bad port '99999'", nil),
        (7, 13, .error, "unknown action 'blok'", "did you mean 'block'?"),
        (8, 15, .error, "must be true or false", nil),
        (9, 14, .error, "unknown profile 'atz'", "did you mean 'ats'?"),
    ])
}

@Test func missingDefaultsAndHostnameOffWarn() {
    check("no-defaults-hostname-off.yaml", [
        (1, 1, .warning, "no `defaults`", nil),
        (4, 15, .warning, "turns the hostname check off", nil),
    ])
}

@Test func pinsInDefaultsAreRefused() {
    check("pins-in-defaults.yaml", [(3, 3, .error, "`pins` is not allowed in `defaults`", nil)])
}

@Test func everyBrokenFixtureIsCovered() throws {
    let files = try FileManager.default.contentsOfDirectory(atPath: TestPaths.broken.path).filter { $0.hasSuffix(".yaml") }
    #expect(files.count == 18)
}

@Test func loadRefusesErrorsWithTheSameMessages() {
    let path = TestPaths.brokenFile("unknown-key.yaml")
    do {
        _ = try PolicyLoader.load(path: path, now: TestPaths.now)
        Issue.record("a file with errors must not load")
    } catch {
        #expect(error.description == "\(path):7:5: error: unknown key 'acton' in a rule (hint: did you mean 'action'?)")
        #expect(Linter.exitStatus(error.diagnostics) == 1)
    }
}

@Test func warningsDoNotStopALoad() throws {
    let (policy, warnings) = try PolicyLoader.loadWithWarnings(path: TestPaths.brokenFile("no-backup-pin.yaml"), now: TestPaths.now)
    #expect(warnings.count == 1 && Linter.exitStatus(warnings) == 0)
    #expect(policy.rule(for: "api.example.com", port: 443).action == .block)
}

@Test func anchorInspectorIsReplaceable() throws {
    // The proxy can wire an OpenSSL-backed inspector; a stub that refuses everything turns the example CA into an error.
    let refuse = AnchorInspector { _ in .unusable("refused by test double") }
    let path = TestPaths.policies.appendingPathComponent("examples/self-signed-own-ca.yaml").path
    let d = Linter.lint(path: path, now: TestPaths.now, inspector: refuse)
    #expect(d.count == 1 && d[0].message.contains("refused by test double") && (d[0].line, d[0].column) == (13, 15))
}

@Test func unreadablePolicyFile() {
    let d = Linter.lint(path: "/nonexistent/policy.yaml")
    #expect(d.map(\.description) == ["/nonexistent/policy.yaml:1:1: error: cannot read policy file (hint: check the path and permissions)"])
}

@Test func dateParsing() {
    #expect(PolicyParser.parseDate("2026-11-22T04:59:59Z") == UnixTime(seconds: 1_795_323_599))
    #expect(PolicyParser.parseDate("2000-02-29") == UnixTime(seconds: 951_782_400))
    #expect(PolicyParser.parseDate("2001-02-29") == nil)
    #expect(PolicyParser.parseDate("tomorrow") == nil)
}

/// The same digest twice (base64 and hex here) is one pin: a warning at the second, and the set still has no backup.
@Test func aPinListedTwiceIsOnePin() {
    check("duplicate-pin.yaml", [
        (10, 9, .warning, "no backup pin: the root pin set", nil),
        (10, 69, .warning, "duplicate pin", "a backup pin is another key or certificate"),
    ])
}

/// md2, md4 and md5 are hashes chainwatch knows, but no minimum (`explain` read md5 as "SHA-128").
@Test func aBrokenHashIsNoMinimum() {
    check("broken-minimum-hash.yaml", [(3, 44, .error, "'md5' is broken and cannot be a minimum", "sha1 at the lowest")])
}

/// A key given twice in one mapping is reported at the second, not at the file's first line with the document.
@Test func aDuplicateKeyIsReportedWhereItIsRepeated() {
    check("duplicate-key.yaml", [(7, 5, .error, "duplicate key 'name' in one mapping", "give each key once")])
}

/// A URL where a host pattern goes is named as one (it was "bad port '//api.example.com/v1'").
@Test func aURLInMatchIsNamedAsOne() {
    check("url-as-host.yaml", [(5, 13, .error, "is a URL, not a host pattern", "the host alone: api.example.com")])
}
