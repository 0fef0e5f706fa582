import Testing
@testable import ChainwatchCore

@Test func sameNamePasses() {
    #expect(SNIMismatchCheck().evaluate(Synthetic.evidence(host: "API.example.com", sni: "api.example.com."), rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}

@Test func differentNameFails() {
    let r = SNIMismatchCheck().evaluate(Synthetic.evidence(host: "allowed.example.com", sni: "blocked.example.net"), rule: Rule(name: "r"), at: Synthetic.now)
    #expect(r.reason == .sniMismatch)
}

@Test func ipConnectOrNoSNIPasses() {
    #expect(SNIMismatchCheck().evaluate(Synthetic.evidence(host: "192.0.2.7", sni: "api.example.com"), rule: Rule(name: "r"), at: Synthetic.now) == .passes)
    var e = Synthetic.evidence(); e.connection.serverName = nil
    #expect(SNIMismatchCheck().evaluate(e, rule: Rule(name: "r"), at: Synthetic.now) == .passes)
}
