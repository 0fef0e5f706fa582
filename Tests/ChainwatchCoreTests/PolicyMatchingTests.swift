import Testing
@testable import ChainwatchCore

private func rule(_ name: String, _ patterns: String...) -> Rule {
    Rule(name: name, patterns: patterns.map { try! HostPattern(parsing: $0) })
}

private let policy = Policy(rules: [
    rule("domain-short", ".example.com"),
    rule("domain-long", ".api.example.com"),
    rule("wildcard", "*.api.example.com"),
    rule("exact", "v1.api.example.com"),
    rule("exact-port", "v1.api.example.com:8443"),
    rule("wildcard-port", "*.api.example.com:8443"),
])

@Test func exactHostAndPortBeatsEverything() {
    #expect(policy.rule(for: "v1.api.example.com", port: 8443).name == "exact-port")
}

@Test func exactHostBeatsWildcard() {
    #expect(policy.rule(for: "v1.api.example.com", port: 443).name == "exact")
}

@Test func wildcardWithPortBeatsWildcard() {
    #expect(policy.rule(for: "v2.api.example.com", port: 8443).name == "wildcard-port")
    #expect(policy.rule(for: "v2.api.example.com", port: 443).name == "wildcard")
}

@Test func wildcardMatchesOneLabelOnly() {
    // Two labels deep: not the wildcard; the longest domain wins.
    #expect(policy.rule(for: "a.b.api.example.com", port: 443).name == "domain-long")
    // The parent itself is not matched by the wildcard.
    #expect(policy.rule(for: "api.example.com", port: 443).name == "domain-long")
}

@Test func longestDomainWins() {
    #expect(policy.rule(for: "www.example.com", port: 443).name == "domain-short")
    #expect(policy.rule(for: "example.com", port: 443).name == "domain-short")
}

@Test func unmatchedHostGetsDefaults() {
    let m = policy.match(host: "example.org", port: 443)
    #expect(m.rule.name == "defaults")
    #expect(m.pattern == nil)
    #expect(policy.rule(for: "notexample.com", port: 443).name == "defaults")
}

@Test func hostsAreNormalizedBeforeMatching() {
    #expect(policy.rule(for: "V1.API.Example.COM.", port: 443).name == "exact")
}

@Test func patternsParseAndRefuse() throws {
    #expect(try HostPattern(parsing: "API.Example.com.").kind == .exact("api.example.com"))
    #expect(try HostPattern(parsing: "[::1]:8443") == HostPattern(.exact("::1"), port: 8443))
    #expect(try HostPattern(parsing: ".example.org").kind == .domain("example.org"))
    #expect(throws: HostPattern.ParseError.misplacedWildcard) { try HostPattern(parsing: "a*.example.com") }
    #expect(throws: HostPattern.ParseError.tooBroad) { try HostPattern(parsing: "*.com") }
    #expect(throws: HostPattern.ParseError.badPort("70000")) { try HostPattern(parsing: "a.example.com:70000") }
    #expect(throws: HostPattern.ParseError.nonASCII) { try HostPattern(parsing: "bücher.example") }
}

@Test func earlierRuleWinsAtEqualSpecificity() {
    let p = Policy(rules: [rule("first", "a.example.com"), rule("second", "a.example.com")])
    #expect(p.rule(for: "a.example.com", port: 443).name == "first")
}

@Test func ruleIdentityIsStableAndChangesWithContent() {
    let a = rule("r", "a.example.com")
    var b = a
    #expect(a.identity == b.identity)
    b.location = PolicyLocation(file: "x.yaml", line: 9, column: 3)
    #expect(a.identity == b.identity)   // moving a rule in the file keeps cached verdicts
    b.action = .block
    #expect(a.identity != b.identity)
    #expect(a.identity.name == "r")
}

@Test func fingerprintsParseInBothForms() throws {
    let hex = try Fingerprint(parsing: String(repeating: "1", count: 64))
    let colon = try Fingerprint(parsing: Array(repeating: "11", count: 32).joined(separator: ":"))
    let b64 = try Fingerprint(parsing: "sha256/ERERERERERERERERERERERERERERERERERERERERERE=")
    #expect(hex == colon && colon == b64)
    #expect(b64.pinText == "sha256/ERERERERERERERERERERERERERERERERERERERERERE=")
    #expect(throws: Fingerprint.ParseError.wrongLength(bytes: 20)) { try Fingerprint(parsing: String(repeating: "ab", count: 20)) }
    #expect(throws: Fingerprint.ParseError.badBase64) { try Fingerprint(parsing: "sha256/!!!") }
    #expect(throws: Fingerprint.ParseError.badHex) { try Fingerprint(parsing: String(repeating: "zz", count: 32)) }
}

@Test func ipLiteralsParse() {
    #expect(HostName.ipAddressBytes("192.0.2.1") == [192, 0, 2, 1])
    #expect(HostName.ipAddressBytes("::1") == [UInt8](repeating: 0, count: 15) + [1])
    #expect(HostName.ipAddressBytes("0:0:0:0:0:0:0:1") == HostName.ipAddressBytes("[::1]"))
    #expect(HostName.ipAddressBytes("::ffff:192.0.2.1")?.suffix(4) == [192, 0, 2, 1])
    #expect(HostName.ipAddressBytes("example.com") == nil)
    #expect(HostName.ipAddressBytes("1.2.3") == nil)
}
