import Testing
@testable import ChainwatchCore

private let rule = Rule(name: "r")

@Test func exactAndWildcardSANsMatch() {
    #expect(HostnameCheck().evaluate(Synthetic.evidence(), rule: rule, at: Synthetic.now) == .passes)
    #expect(HostnameCheck().evaluate(Synthetic.evidence(host: "V2.API.example.com."), rule: rule, at: Synthetic.now) == .passes)
}

@Test func otherHostFails() {
    let r = HostnameCheck().evaluate(Synthetic.evidence(host: "evil.example.net"), rule: rule, at: Synthetic.now)
    #expect(r.reason == .hostnameMismatch)
    #expect(r.level == .leaf)
}

@Test func rfc6125WildcardRules() {
    #expect(HostnameCheck.matches(pattern: "*.example.com", host: "a.example.com"))
    #expect(!HostnameCheck.matches(pattern: "*.example.com", host: "a.b.example.com"))   // one label only
    #expect(!HostnameCheck.matches(pattern: "*.example.com", host: "example.com"))
    #expect(!HostnameCheck.matches(pattern: "a*.example.com", host: "ab.example.com"))   // no partial wildcards
    #expect(!HostnameCheck.matches(pattern: "www.*.com", host: "www.example.com"))
    #expect(!HostnameCheck.matches(pattern: "*.com", host: "example.com"))
    #expect(HostnameCheck.matches(pattern: "API.Example.COM", host: "api.example.com"))
}

@Test func ipLiteralMatchesIPSANsOnly() {
    let leaf = Synthetic.cert("CN=10.0.0.1", sha: 1, spki: 1, dns: ["10.0.0.1"], ips: ["::1", "10.0.0.2"])
    #expect(HostnameCheck.leaf(leaf, names: "10.0.0.2"))
    #expect(HostnameCheck.leaf(leaf, names: "[0:0:0:0:0:0:0:1]"))
    #expect(!HostnameCheck.leaf(leaf, names: "10.0.0.1"))   // a DNS SAN spelling an IP does not count
}

@Test func noCommonNameFallback() {
    let leaf = Synthetic.cert("CN=api.example.com", sha: 1, spki: 1, dns: [])
    #expect(!HostnameCheck.leaf(leaf, names: "api.example.com"))
}

@Test func hostnameOffPasses() {
    var off = rule; off.checkHostname = false
    #expect(HostnameCheck().evaluate(Synthetic.evidence(host: "evil.example.net"), rule: off, at: Synthetic.now) == .passes)
}

@Test func sniIsCheckedBeforeConnectHost() {
    let e = Synthetic.evidence(host: "10.1.1.1", sni: "api.example.com")
    #expect(HostnameCheck().evaluate(e, rule: rule, at: Synthetic.now) == .passes)
}
