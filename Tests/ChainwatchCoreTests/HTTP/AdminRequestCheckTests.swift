import Testing
@testable import ChainwatchCore

/// The admin listener answers its operator, not a web page on the same host.
@Suite struct AdminRequestCheckTests {
    func refusal(_ method: String = "GET", host: String? = "127.0.0.1:9128", origin: String? = nil, header: String? = nil,
                 loopback: Bool = true) -> String? {
        AdminRequestCheck.refusal(method: method, host: host, origin: origin, adminHeader: header, peerIsLoopback: loopback)
    }

    @Test func theOperatorsRequestsAreAnswered() {
        #expect(refusal() == nil)
        #expect(refusal(host: "localhost:9128") == nil)
        #expect(refusal(host: "[::1]:9128") == nil)
        #expect(refusal(host: "10.0.3.7:9128") == nil, "a kubelet probe names the pod's address")
        #expect(refusal(host: nil) == nil, "HTTP/1.0 without Host")
        #expect(refusal("POST", header: "1") == nil, "chainwatch ctl")
    }

    /// A page that rebinds its name to 127.0.0.1 sends its own name as Host.
    @Test func aRebindingPagesHostIsRefused() {
        #expect(refusal(host: "rebind.attacker.example:9128")?.contains("not this listener's address") == true)
        #expect(refusal(host: "rebind.attacker.example") != nil)
        #expect(refusal(host: "127.0.0.1.attacker.example:9128") != nil)
        #expect(refusal(host: "[::1]:x") != nil)
        #expect(refusal(host: "scraper.internal:9128", loopback: false) == nil, "a remote scraper --allow-client admits")
    }

    /// A cross-site "simple" POST (no preflight) cannot carry a header of its own, and a browser sends an Origin.
    @Test func aCrossSitePostIsRefused() {
        #expect(refusal("POST")?.contains("X-Chainwatch-Admin") == true)
        #expect(refusal("POST", header: "0") != nil)
        #expect(refusal("POST", origin: "https://attacker.example", header: "1")?.contains("Origin") == true)
        #expect(refusal("GET", origin: "null") != nil)
    }
}
