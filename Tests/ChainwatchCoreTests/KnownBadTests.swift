import Testing
@testable import ChainwatchCore

/// Which blocking findings mark an upstream bad for every client: only what the server's chain earned.
@Suite struct KnownBadTests {
    static func finding(_ reason: Reason, action: Action = .block) -> Finding {
        Finding(reason: reason, level: nil, detail: "d", check: "c", action: action)
    }

    @Test func theServersChainMarksItsUpstream() {
        for reason: Reason in [.untrustedChain, .rootMismatch, .hostnameMismatch, .expired] {
            #expect(marks(Self.finding(reason), sni: "a.test", host: "a.test"))
            #expect(marks(Self.finding(reason), sni: nil, host: "a.test"), "no hello read: the tunnel's own state")
            #expect(marks(Self.finding(reason), sni: nil, host: "192.0.2.7", hello: Self.noSNI), "an IP literal has no SNI")
            #expect(marks(Self.finding(reason), sni: "A.Test.", host: "a.test"), "the same name, written otherwise")
        }
    }

    @Test func whatAClientCanSteerMarksNothing() {
        for reason: Reason in [.notTLS, .sniMismatch, .evidenceMismatch, .probeFailed] {
            #expect(!marks(Self.finding(reason), sni: "a.test", host: "a.test"), "\(reason)")
        }
        // A chain judged for another name than the CONNECT host's says nothing about the CONNECT host.
        #expect(!marks(Self.finding(.hostnameMismatch), sni: "other.test", host: "a.test"))
        #expect(!marks(Self.finding(.untrustedChain), sni: "a.test", host: "192.0.2.7"))
    }

    /// An oversized handshake is refused for want of room other tunnels hold: the proxy's state, not the server's
    /// chain (one client holding the room would otherwise deny the host to everyone for the mark's 5 minutes).
    @Test func whatTheProxysOwnStateDecidedMarksNothing() {
        #expect(!marks(Self.finding(.oversizedHandshake), sni: "a.test", host: "a.test"))
        #expect(!marks(Self.finding(.handshakeTimeout), sni: nil, host: "a.test"))
    }

    static let noSNI = ClientHello(legacyVersion: .tls1_2, random: [UInt8](repeating: 0, count: 32), sessionID: [],
                                   cipherSuites: [CipherSuite(rawValue: 0x1301)], serverName: nil, supportedVersions: [.tls1_3],
                                   alpnProtocols: [], offersPreSharedKey: false, offersSessionTicket: false, signatureAlgorithms: [])

    /// Routes by which one client's own offer made a finding that marked the upstream for everyone (a 403 for five
    /// minutes at will): a hello with no SNI to a multi-site server (its default certificate), an offer of TLS 1.2
    /// only under `min_tls: "1.3"`, a non-forward-secret suite only under `profile: ats`.
    @Test func whatTheClientsOfferPickedMarksNothing() {
        #expect(!marks(Self.finding(.hostnameMismatch), sni: nil, host: "a.test", hello: Self.noSNI))
        #expect(!marks(Self.finding(.tlsVersion), sni: "a.test", host: "a.test"))
        #expect(!marks(Self.finding(.noForwardSecrecy), sni: "a.test", host: "a.test"))
        #expect(marks(Self.finding(.weakKey), sni: "a.test", host: "a.test"), "the chain's own key still marks")
    }

    /// The verdict marks with the first blocking finding the chain earned: a forged chain over an offer below the TLS
    /// floor decides as tls_version (the client's), and its root_mismatch (the server's) still marks the host.
    @Test func aChainFindingBehindAClientFindingStillMarks() {
        var facts = ConnectionFacts(connectHost: "a.test", port: 443)
        facts.serverName = "a.test"
        let verdict = Verdict(rule: Rule(name: "r").identity,
                              findings: [Self.finding(.tlsVersion), Self.finding(.rootMismatch), Self.finding(.expired, action: .alert)])
        #expect(verdict.deciding?.reason == .tlsVersion)
        #expect(KnownBadRule.marking(verdict, facts: facts, leafKeyType: nil, clientHello: nil, largeChain: false)?.reason == .rootMismatch)
        let clientOnly = Verdict(rule: Rule(name: "r").identity, findings: [Self.finding(.tlsVersion), Self.finding(.noForwardSecrecy)])
        #expect(KnownBadRule.marking(clientOnly, facts: facts, leafKeyType: nil, clientHello: nil, largeChain: false) == nil)
        facts.serverName = "other.test"
        #expect(KnownBadRule.marking(verdict, facts: facts, leafKeyType: nil, clientHello: nil, largeChain: false) == nil)
    }

    @Test func anAlertMarksNothing() {
        #expect(!marks(Self.finding(.untrustedChain, action: .alert), sni: "a.test", host: "a.test"))
    }

    /// A chain read with room (over 224 KiB) is judged anew for each tunnel; its mark would keep tens of thousands of
    /// names for minutes.
    @Test func aLargeChainMarksNothing() {
        #expect(!marks(Self.finding(.untrustedChain), sni: "a.test", host: "a.test", largeChain: true))
    }

    /// A client that offered one key type only got the chain the server keeps for that type: its block does not speak
    /// for the host. A leaf of the other type, or an offer of both, does.
    @Test func aKeyTypeTheClientPickedMarksNothing() {
        let rsaOnly = KeyTypeOfferTests.hello(schemes: [KeyTypeOfferTests.pss], suites: [KeyTypeOfferTests.tls13Suite])
        let both = KeyTypeOfferTests.hello(schemes: [KeyTypeOfferTests.pss, KeyTypeOfferTests.ecdsa], suites: [KeyTypeOfferTests.tls13Suite])
        #expect(!marks(Self.finding(.rootMismatch), sni: "a.test", host: "a.test", leaf: .rsa, hello: rsaOnly))
        #expect(marks(Self.finding(.rootMismatch), sni: "a.test", host: "a.test", leaf: .ec, hello: rsaOnly))
        #expect(marks(Self.finding(.rootMismatch), sni: "a.test", host: "a.test", leaf: .rsa, hello: both))
        #expect(marks(Self.finding(.rootMismatch), sni: "a.test", host: "a.test", leaf: nil, hello: rsaOnly))
    }
}

func marks(_ finding: Finding, sni: String?, host: String, leaf: CertificateFacts.KeyType? = nil, hello: ClientHello? = nil,
           largeChain: Bool = false) -> Bool {
    var facts = ConnectionFacts(connectHost: host, port: 443)
    facts.serverName = sni
    facts.protocolVersion = .tls1_3
    let verdict = Verdict(rule: Rule(name: "r").identity, findings: [finding])
    return KnownBadRule.marking(verdict, facts: facts, leafKeyType: leaf, clientHello: hello, largeChain: largeChain) != nil
}

/// A held tunnel whose chain did not come in time is closed whatever `on_probe_error` says: a forger who knows the
/// deadline would otherwise stall past it and send its chain through unjudged. It marks nothing (a slow path is not
/// a forged chain).
@Test func noVerdictInTimeBlocksAndMarksNothing() {
    for rule in [Rule(name: "b", action: .block), Rule(name: "l", action: .block, onProbeError: .allow),
                 Rule(name: "a", action: .alert, onProbeError: .alert, nonTLS: .block)] {
        let v = Evaluator.verdict(for: .noVerdict("no chain within 5 s"), rule: rule)
        #expect(v.action == .block && v.deciding?.reason == .handshakeTimeout, "\(rule.name)")
        #expect(v.deciding.map { marks($0, sni: "a.test", host: "a.test") } == false)
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
