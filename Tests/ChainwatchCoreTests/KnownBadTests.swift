import Testing
@testable import ChainwatchCore

/// Which blocking findings mark an upstream bad for every client: only what the server's chain earned.
@Suite struct KnownBadTests {
    static func finding(_ reason: Reason) -> Finding {
        Finding(reason: reason, level: nil, detail: "d", check: "c", action: .block)
    }

    @Test func theServersChainMarksItsUpstream() {
        for reason: Reason in [.untrustedChain, .rootMismatch, .hostnameMismatch, .expired] {
            #expect(Self.finding(reason).marksUpstreamBad(serverName: "a.test", connectHost: "a.test"))
            #expect(Self.finding(reason).marksUpstreamBad(serverName: nil, connectHost: "a.test"))
            #expect(Self.finding(reason).marksUpstreamBad(serverName: "A.Test.", connectHost: "a.test"), "the same name, written otherwise")
        }
    }

    @Test func whatAClientCanSteerMarksNothing() {
        for reason: Reason in [.notTLS, .sniMismatch, .evidenceMismatch, .probeFailed] {
            #expect(!Self.finding(reason).marksUpstreamBad(serverName: "a.test", connectHost: "a.test"), "\(reason)")
        }
        // A chain judged for another name than the CONNECT host's says nothing about the CONNECT host.
        #expect(!Self.finding(.hostnameMismatch).marksUpstreamBad(serverName: "other.test", connectHost: "a.test"))
        #expect(!Self.finding(.untrustedChain).marksUpstreamBad(serverName: "a.test", connectHost: "192.0.2.7"))
    }
}

@Test func noVerdictInTimeFollowsOnProbeErrorAndMarksNothing() {
    let blocking = Rule(name: "b", action: .block)
    let v = Evaluator.verdict(for: .noVerdict("no chain within 5 s"), rule: blocking)
    #expect(v.action == .block && v.deciding?.reason == .handshakeTimeout)
    #expect(v.deciding?.marksUpstreamBad(serverName: "a.test", connectHost: "a.test") == false)
    let lenient = Rule(name: "l", action: .block, onProbeError: .allow)
    #expect(Evaluator.verdict(for: .noVerdict("x"), rule: lenient).findings.isEmpty)
}
