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
    #expect(HostName.ipAddressBytes("0.0.0.0") == [0, 0, 0, 0] && HostName.ipAddressBytes("255.255.255.255") == [255, 255, 255, 255])
    #expect(HostName.ipAddressBytes("::ffff:1.2.3.4.5") == nil)
    for refused in ["1.2.3.4.", ".1.2.3.4", "1..2.3", "1.2.3.256", "1.2.3.1000", "01.2.3.4", "1.2.3.00", "1.2.3.4a",
                    "1.2.3.-4", "1.2.3.+4", "1.2.3.٤", "", "...."] {
        #expect(HostName.ipAddressBytes(refused) == nil, "\(refused)")
    }
}

/// The precedence rule written as the plain scan over every pattern, to hold the indexed `match` to.
private func scanMatch(_ policy: Policy, host: String, port: UInt16) -> (name: String, pattern: HostPattern?) {
    let h = HostName.normalize(host)
    var best: (rule: Rule, pattern: HostPattern, score: Int)? = nil
    for rule in policy.rules {
        for pattern in rule.patterns where pattern.matches(host: h, port: port) {
            if best == nil || pattern.specificity > best!.score { best = (rule, pattern, pattern.specificity) }
        }
    }
    return best.map { ($0.rule.name, $0.pattern) } ?? ("defaults", nil)
}

@Test func indexedMatchAgreesWithAScanOverEveryPattern() {
    var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next(_ n: Int) -> Int {
        seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((seed >> 33) % UInt64(n))
    }
    let labels = ["a", "b", "api", "www", "v1", "example", "shop"]
    let tlds = ["com", "org", "example"]
    func name(_ depth: Int) -> String { (0..<depth).map { _ in labels[next(labels.count)] }.joined(separator: ".") + "." + tlds[next(tlds.count)] }
    let ports: [UInt16?] = [nil, nil, nil, 443, 8443]
    var rules: [Rule] = []
    for r in 0..<300 {
        var patterns: [HostPattern] = []
        for _ in 0..<(1 + next(3)) {
            let host = name(1 + next(3))
            let kind: HostPattern.Kind = [.exact(host), .wildcard(parent: host), .domain(host)][next(3)]
            patterns.append(HostPattern(kind, port: ports[next(ports.count)]))
        }
        patterns.append(HostPattern(.exact("192.0.2.\(r % 250)")))
        rules.append(Rule(name: "r\(r)", patterns: patterns))
    }
    let policy = Policy(rules: rules)
    for _ in 0..<5_000 {
        let host = next(10) == 0 ? "192.0.2.\(next(256))" : name(1 + next(4))
        let port: UInt16 = [443, 8443, 80][next(3)]
        let got = policy.match(host: host.uppercased(), port: port)
        let want = scanMatch(policy, host: host, port: port)
        #expect(got.rule.name == want.name && got.pattern == want.pattern, "\(host):\(port)")
    }
}

@Test func indexFollowsChangesToTheRules() {
    var p = Policy(rules: [rule("a", "a.example.com")])
    p.rules.append(rule("b", ".example.com"))
    #expect(p.rule(for: "x.example.com", port: 443).name == "b")
    p.rules[0].patterns = [try! HostPattern(parsing: "x.example.com")]
    #expect(p.rule(for: "x.example.com", port: 443).name == "a")
    #expect(p.rule(for: "a.example.com", port: 443).name == "b")
}

@Test func identityIsKeptByThePolicyAndRenewedOnChange() {
    let loose = rule("r", "a.example.com")
    var p = Policy(rules: [loose])
    let kept = p.rules[0]
    #expect(kept.identityCache.value == loose.identity)   // computed once, at build
    #expect(kept == loose && kept.hashValue == loose.hashValue)   // the cache is not content
    #expect(Policy.builtIn.defaults.identityCache.value == Rule.builtInDefault.identity)
    var changed = kept
    changed.action = .block
    #expect(changed.identityCache.value == nil && changed.identity != loose.identity)
    p.rules[0].action = .block
    #expect(p.rules[0].identityCache.value == changed.identity)
    p.defaults.httpsOnly = true
    #expect(p.defaults.identityCache.value != nil && p.defaults.identity != Rule.builtInDefault.identity)
}

/// A policy with very many rules builds without deep recursion (its rules' observer used to call itself once per
/// rule: 200 000 rules overflowed the stack) and matches by lookup.
@Test func aPolicyWithManyRulesBuildsAndMatches() throws {
    let rules = try (0..<60_000).map { i in Rule(name: "r\(i)", patterns: [try HostPattern(parsing: "h\(i).example.com")]) }
    var policy = Policy(rules: rules)
    #expect(policy.rule(for: "h59999.example.com", port: 443).name == "r59999")
    policy.rules.append(Rule(name: "late", patterns: [try HostPattern(parsing: "late.example.com")]))
    #expect(policy.rule(for: "late.example.com", port: 443).name == "late")
    #expect(policy.rules.allSatisfy { $0.identityCache.value != nil })
}
