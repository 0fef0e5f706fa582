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

    /// An oversized handshake is refused for want of room other tunnels hold: the proxy's state, not the server's
    /// chain (one client holding the room would otherwise deny the host to everyone for the mark's 5 minutes).
    @Test func whatTheProxysOwnStateDecidedMarksNothing() {
        #expect(!Self.finding(.oversizedHandshake).marksUpstreamBad(serverName: "a.test", connectHost: "a.test"))
        #expect(!Self.finding(.handshakeTimeout).marksUpstreamBad(serverName: nil, connectHost: "a.test"))
    }
}

/// A held tunnel whose chain did not come in time is closed whatever `on_probe_error` says: a forger who knows the
/// deadline would otherwise stall past it and send its chain through unjudged. It marks nothing (a slow path is not
/// a forged chain).
@Test func noVerdictInTimeBlocksAndMarksNothing() {
    for rule in [Rule(name: "b", action: .block), Rule(name: "l", action: .block, onProbeError: .allow),
                 Rule(name: "a", action: .alert, onProbeError: .alert, nonTLS: .block)] {
        let v = Evaluator.verdict(for: .noVerdict("no chain within 5 s"), rule: rule)
        #expect(v.action == .block && v.deciding?.reason == .handshakeTimeout, "\(rule.name)")
        #expect(v.deciding?.marksUpstreamBad(serverName: "a.test", connectHost: "a.test") == false)
    }
}

@Test func aHandshakeThatCannotBeReadFollowsTheRulesAction() {
    let blocking = Rule(name: "b", action: .block), alerting = Rule(name: "a")
    let oversized = Evaluator.verdict(for: .oversizedHandshake("type 11 announces 300000 bytes"), rule: blocking)
    #expect(oversized.action == .block && oversized.deciding?.reason == .oversizedHandshake)
    #expect(oversized.deciding?.detail.hasSuffix("its chain cannot be judged") == true)
    let malformed = Evaluator.verdict(for: .malformedHandshake("bad length"), rule: alerting)
    #expect(malformed.action == .alert && malformed.deciding?.reason == .untrustedChain)
}
