import Testing
@testable import ChainwatchCore

/// A probe's result as a test makes it: the captured handshake's own hellos and flight, or changed ones.
struct TestProbe: InspectionProbe {
    var version: TLSVersion = .tls1_3
    var cipher = CipherSuite(rawValue: 0x1301)
    var ja4: String? = "t13d_probe"
    var flight: FlightAgreement.ProbeFlight
    var parsedClientHello: ClientHello?
    var parsedServerHello: ServerHello?
    var chainDER: [[UInt8]] = [[UInt8](repeating: 0x30, count: 3_000)]
    var ocspResponse: [UInt8]? = nil
    var chainDigest: [UInt8]? = nil
}

/// The probe cache and the room, as a test sets them.
final class TestResources: InspectionResources {
    var cached: Set<ClientOffer> = []
    let roomCapacity: Int
    private(set) var held = 0
    private(set) var asked: [Int] = []

    init(room: Int = 64 << 20) { roomCapacity = room }

    /// Whether a spare connection waits beside the tunnel's (a spot check due at the address, or a first contact
    /// under alert).
    var spare = false
    var hasSpareConnection: Bool { spare }

    func hasProbeResult(for offer: ClientOffer) -> Bool { cached.contains(offer) }

    /// Earlier results the cache keeps beside its newest (a pool's other members), and the offers they were asked for.
    var others: [any InspectionProbe] = []
    private(set) var othersAskedFor: [ClientOffer] = []
    func otherProbes(for offer: ClientOffer) -> [any InspectionProbe] {
        othersAskedFor.append(offer)
        return others
    }

    /// Whether the pair's probe is the tunnel's own handshake, which holds a second hello for it.
    var pairProbeHolds = false
    var pairProbeHoldsItsRetry: Bool { pairProbeHolds }

    /// The coins a test draws for first contacts, in order (then heads: the probe first).
    var coins: [Bool] = []
    func probeGoesFirst() -> Bool { coins.isEmpty ? true : coins.removeFirst() }

    func reserveRoom(_ bytes: Int) -> Bool {
        asked.append(bytes)
        guard bytes <= roomCapacity - held else { return false }
        held = bytes
        return true
    }
}

/// The inspection machine as event tables: each step is an event and the exact actions it must give, on the real
/// captured handshakes of `Fixtures/tls`. These replace the sequencing the sleeping e2e tests used to be the only
/// check of (probe first, the kept probe, HelloRetryRequest, flight weighing, re-probe, deadlines).
@Suite struct InspectionMachineTests {
    typealias Machine = InspectionMachine
    static let settings = Machine.Settings(probeTimeoutMilliseconds: 5_000, holdLimit: 256 * 1024, probeCacheChainLimit: 512 * 1024)
    static let block = Rule(name: "b", action: .block)
    static let alert = Rule(name: "a", action: .alert)

    static func machine(_ rule: Rule, host: String, settings: Machine.Settings = settings) -> Machine {
        Machine(policy: Policy(defaults: rule), facts: ConnectionFacts(connectHost: host, port: 443), settings: settings)
    }

    /// Feeds `bytes` `chunk` at a time; the actions of every chunk, in order.
    static func feed(_ m: inout Machine, _ side: Side, _ bytes: [UInt8], chunk: Int = .max,
                     _ resources: TestResources) -> [String] {
        var out: [String] = []
        var i = 0
        while i < bytes.count {
            let piece = bytes[i..<min(bytes.count, i &+ chunk)]
            let actions = side == .client ? m.clientBytes(piece, resources) : m.serverBytes(piece, resources)
            out += actions.map(\.description)
            i = min(bytes.count, i &+ chunk)
        }
        return out
    }

    /// The captured TLS 1.3 handshake's probe: the same hellos, and a flight of its first four encrypted records (one
    /// message each, as OpenSSL writes them).
    static func genuineProbe(_ name: String = "tls13-rsa") throws -> TestProbe {
        var watch = HandshakeWatch()
        _ = watch.client(try TLSFixture.bytes("\(name).c2s.bin"))
        _ = watch.server(try TLSFixture.bytes("\(name).s2c.bin"))
        let records = watch.serverFlight.prefix(4).map(\.length)
        try #require(records.count == 4)
        let messages = zip([UInt8(8), 11, 15, 20], records).map { (type: $0, length: $1 - 17) }
        let (client, server) = try EvidenceAgreementTests.hellos(name)
        return TestProbe(flight: .init(messages: messages, recordLengths: records), parsedClientHello: client, parsedServerHello: server)
    }

    static func pass(_ rule: Rule) -> Verdict { Verdict(rule: rule.identity, findings: []) }
    static func blocks(_ rule: Rule, _ reason: Reason = .rootMismatch) -> Verdict {
        Verdict(rule: rule.identity, findings: [Finding(reason: reason, level: nil, detail: "d", check: "c", action: .block)])
    }
    static let evidence = Synthetic.evidence(host: "tls13.chainwatch.test")

    static func strings(_ actions: [Machine.Action]) -> [String] { actions.map(\.description) }

    /// The actions without the flight deadline's: a TLS 1.3 flight that arrives in pieces is waited for, with a
    /// deadline armed and cancelled when it is whole, and one that arrives whole is not. Everything else, and above
    /// all every decision, is the same however the bytes are cut; the pair is checked where it occurs.
    static func decisions(_ actions: [String]) -> [String] {
        let armed = actions.filter { $0.hasPrefix("arm(flight") }.count, cancelled = actions.filter { $0 == "cancel(flight)" }.count
        #expect(armed == cancelled, "the flight deadline armed \(armed) times and cancelled \(cancelled)")
        return actions.filter { !$0.hasPrefix("arm(flight") && $0 != "cancel(flight)" }
    }

    // MARK: - TLS 1.2: the passive chain

    @Test(arguments: [Int.max, 1, 7])
    func tls12UnderAlertJudgesThePassiveChainWithoutHolding(chunk: Int) throws {
        let r = TestResources()
        var m = Self.machine(Self.alert, host: "rsa.chainwatch.test")
        #expect(Self.strings(m.start()) == ["hold(upstream, 0)"])
        #expect(Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), chunk: chunk, r) == ["flowing(upstream)"])
        #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls12-rsa.s2c.bin"), chunk: chunk, r) == ["judge(passive)"])
        #expect(m.facts.protocolVersion == .tls1_2 && m.facts.serverName == "rsa.chainwatch.test")
        #expect(Self.strings(m.chainJudged(Self.pass(Self.alert), evidence: Self.evidence, r)) == ["writeFinding(pass)", "release"])
        #expect(m.outcome == InspectionOutcome(action: nil, reason: nil, evidence: .passive))
        #expect(Self.strings(m.tunnelClosed(r)).isEmpty)
    }

    @Test(arguments: [Int.max, 1])
    func tls12UnderBlockHoldsBothSidesAndMarksAForgedChain(chunk: Int) throws {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "rsa.chainwatch.test")
        #expect(Self.strings(m.start()) == ["hold(upstream, 0)", "hold(client, 0)", "arm(clientHello, 1000)"])
        // A client offering TLS 1.2 at most: no probe first; its bytes flow once the hello is whole.
        #expect(Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), chunk: chunk, r) == ["cancel(clientHello)", "flowing(client)"])
        #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls12-rsa.s2c.bin"), chunk: chunk, r) == ["arm(verdict, 5000)", "judge(passive)"])
        let evidence = Synthetic.evidence(host: "rsa.chainwatch.test", path: Synthetic.forgedPath)
        #expect(Self.strings(m.chainJudged(Self.blocks(Self.block), evidence: evidence, r))
                == ["cancel(verdict)", "writeFinding(block root_mismatch)", "markKnownBad(root_mismatch)", "block(root_mismatch)"])
        #expect(m.outcome == InspectionOutcome(action: .block, reason: .rootMismatch, evidence: .passive))
        // Late and repeated events change nothing.
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: evidence, r)).isEmpty)
        #expect(Self.feed(&m, .upstream, [22, 3, 3], r).isEmpty)
    }

    // MARK: - TLS 1.3: probe first, the kept result, weighing

    /// First contact under block: the tunnel's upstream is redialed and opened again together with the probe's, in
    /// the order the coin says. A probe that answers before the tunnel's server waits for the tunnel's flight; then
    /// the flight is weighed against it and the probe's chain judged, before any server byte passes.
    @Test(arguments: [(Int.max, true), (1, false), (5, true)])
    func tls13FirstContactUnderBlockPairsTheProbeWithTheTunnel(chunk: Int, probeFirst: Bool) throws {
        let r = TestResources()
        r.coins = [probeFirst]
        let probe = try Self.genuineProbe()
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        #expect(Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), chunk: chunk, r)
                == ["redial", probeFirst ? "pair(probe first)" : "pair(tunnel first)", "cancel(clientHello)", "flowing(client)"])
        #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["arm(flight, 5000)"], "the tunnel's flight is waited for")
        #expect(m.facts.protocolVersion == .tls1_3, "the probe's version until the tunnel's ServerHello")
        let server = Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), chunk: chunk, r)
        #expect(server == ["arm(verdict, 5000)", "cancel(flight)", "judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["releaseProbeClose", "cancel(verdict)", "writeFinding(pass)", "release"])
    }

    /// A tunnel under block that carries a spot check (a spare connection was opened beside it at the CONNECT, and the
    /// executor answers "no result" for its offer): the tunnel keeps its connection (no redial, which an interceptor
    /// would see as a connection closed unused), the probe goes beside it on the spare, first, and the executor lets
    /// the client's hello go after the probe's start. The server's bytes stay held until the flight is weighed against
    /// the check's probe and its chain judged; a forged chain blocks and marks the upstream.
    @Test(arguments: [(Int.max, false), (1, true), (7, false)])
    func underBlockASpotCheckBesideTheTunnelKeepsItsConnection(chunk: Int, forged: Bool) throws {
        let r = TestResources()
        r.spare = true
        let probe = try Self.genuineProbe()
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        #expect(Self.strings(m.start(holdingTheClientHello: true)) == ["hold(upstream, 0)", "hold(client, 0)", "arm(clientHello, 1000)"])
        #expect(Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), chunk: chunk, r)
                == ["keepReplayCopy", "hold(client, 0)", "probeBeside(probe first)", "cancel(clientHello)"],
                "no redial, no flowing(client); a copy of the hello for a stall's redial")
        #expect(m.phase.name == "pairing")
        #expect(Self.decisions(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), chunk: chunk, r))
                == ["arm(verdict, 5000)", "arm(pairStall, 500)"], "held: nothing passes before the verdict")
        #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["cancel(pairStall)", "judge(probe)"])
        #expect(Self.strings(m.chainJudged(forged ? Self.blocks(Self.block) : Self.pass(Self.block), evidence: Self.evidence, r))
                == (forged ? ["releaseProbeClose", "cancel(verdict)", "writeFinding(block root_mismatch)", "markKnownBad(root_mismatch)", "block(root_mismatch)"]
                           : ["releaseProbeClose", "cancel(verdict)", "writeFinding(pass)", "release"]))
    }

    /// A spot check beside a tunnel under block, behind a server that serves one connection at a time and took the
    /// tunnel's first: the stall gives the tunnel's connection up as a pair's does, and the probe goes on.
    @Test func underBlockASpotCheckBesideAOneConnectionServerStallsAsAPair() throws {
        let r = TestResources()
        r.spare = true
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start(holdingTheClientHello: true)
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        let s2c = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        #expect(Self.feed(&m, .upstream, Array(s2c.prefix(200)), r) == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        #expect(Self.strings(m.deadlineFired(.pairStall, r)) == ["countPairStall", "releaseProbeClose", "redial", "cancel(verdict)"])
        #expect(m.phase.name == "probingFirst")
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["reconnect"])
    }

    /// The tunnel's server answers first: the pair stall deadline runs from its first byte, and the probe's answer
    /// stops it and weighs the flight already held.
    @Test(arguments: [Int.max, 1])
    func aPairWhoseTunnelIsAnsweredFirst(chunk: Int) throws {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(Self.decisions(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), chunk: chunk, r))
                == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["cancel(pairStall)", "judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.blocks(Self.block), evidence: Self.evidence, r))
                == ["releaseProbeClose", "cancel(verdict)", "writeFinding(block root_mismatch)", "markKnownBad(root_mismatch)", "block(root_mismatch)"])
    }

    /// A server that serves one connection at a time took the tunnel's first: the probe waits behind it. At the pair
    /// stall deadline the tunnel gives its connection up (nothing of the server's passed), the probe is answered and
    /// judged, and the tunnel connects again (the connection's machine replays the client's bytes); its new
    /// handshake is weighed against the kept result.
    @Test func aPairThatStallsBehindAOneConnectionServerGivesTheServerToTheProbe() throws {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        let s2c = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        #expect(Self.feed(&m, .upstream, Array(s2c.prefix(200)), r) == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        #expect(Self.strings(m.deadlineFired(.pairStall, r)) == ["countPairStall", "releaseProbeClose", "redial", "cancel(verdict)"])
        #expect(m.phase.name == "probingFirst" && m.watch.serverHello == nil && m.facts.protocolVersion == nil)
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["reconnect"])
        // The new connection's server, from its first byte (the stalled one's 200 bytes are forgotten).
        #expect(Self.decisions(Self.feed(&m, .upstream, s2c, r)) == ["arm(verdict, 5000)", "judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["cancel(verdict)", "writeFinding(pass)", "release"])
    }

    /// A server that answers a TLS 1.3 offer with TLS 1.2 shows its chain in the tunnel: that chain decides, whether
    /// it comes before the pair's probe answers or after, and the probe's answer changes nothing.
    @Test(arguments: [(Int.max, false), (1, false), (Int.max, true)])
    func aPairWhoseTunnelShowsATLS12ChainIsJudgedByIt(chunk: Int, probeAnswersFirst: Bool) throws {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        let s2c = try TLSFixture.bytes("tls12-rsa.s2c.bin")
        if probeAnswersFirst {
            #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["arm(flight, 5000)"])
            #expect(Self.feed(&m, .upstream, s2c, chunk: chunk, r) == ["arm(verdict, 5000)", "cancel(flight)", "judge(passive)"])
        } else {
            let server = Self.feed(&m, .upstream, s2c, chunk: chunk, r)
            #expect(server == (chunk == 1 ? ["arm(verdict, 5000)", "arm(pairStall, 500)", "cancel(pairStall)", "judge(passive)"]
                                          : ["arm(verdict, 5000)", "judge(passive)"]))
            #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)).isEmpty, "the late probe changes nothing")
        }
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["releaseProbeClose", "cancel(verdict)", "writeFinding(pass)", "release"])
        #expect(m.outcome?.evidence == .passive)
    }

    /// While the pair's probe is unanswered a HelloRetryRequest is held (the tunnel may still have to give its
    /// connection up, which it can only while nothing of the server's has passed); it passes once the probe answers.
    @Test func aHelloRetryRequestWaitsForThePairsProbe() throws {
        let r = TestResources()
        let c2s = try TLSFixture.bytes("tls13-hrr.c2s.bin"), s2c = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        var watch = HandshakeWatch()
        _ = watch.client(c2s)
        let first = try #require(watch.clientHello)
        var m = Self.machine(Self.block, host: first.serverName ?? "localhost")
        _ = m.start()
        #expect(Self.feed(&m, .client, c2s, r).prefix(2) == ["redial", "pair(probe first)"])
        let hrrLength = 5 + (Int(s2c[3]) << 8 | Int(s2c[4]))
        #expect(Self.feed(&m, .upstream, Array(s2c[..<hrrLength]), r) == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r))
                == ["cancel(pairStall)", "arm(flight, 5000)", "hold(upstream, \(hrrLength))"])
        // After the HelloRetryRequest, no stall fallback is possible: the deadline was stopped, and a redial is not asked.
        #expect(Self.strings(m.deadlineFired(.pairStall, r)) == ["impossible(pairStall fired unarmed in weighing)"])
    }

    /// The pair's probe fails: under block the tunnel is blocked (no chain, no verdict); under a rule that lets a
    /// failed probe through, it is released with the line (its connection is open already).
    @Test func aPairWhoseProbeFails() throws {
        for (rule, expected) in [(Self.block, ["releaseProbeClose", "writeFinding(block probe_failed)", "block(probe_failed)"]),
                                 (Rule(name: "l", action: .block, onProbeError: .alert), ["releaseProbeClose", "writeFinding(alert probe_failed)", "release"])] {
            let r = TestResources()
            var m = Self.machine(rule, host: "tls13.chainwatch.test")
            _ = m.start()
            _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
            #expect(Self.strings(m.probeAnswered(.failure("connect refused"), r)) == expected, "\(rule.name)")
        }
    }

    /// A forged probe at first contact: blocked before any server byte reaches the client (the tunnel's flight, held,
    /// is weighed first; the probe's chain then blocks).
    @Test func tls13FirstContactWhoseProbeIsForgedIsBlockedBeforeAnyServerByte() throws {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        _ = m.probeAnswered(.success(try Self.genuineProbe()), r)
        _ = Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r)
        #expect(Self.strings(m.chainJudged(Self.blocks(Self.block), evidence: Self.evidence, r))
                == ["releaseProbeClose", "cancel(verdict)", "writeFinding(block root_mismatch)", "markKnownBad(root_mismatch)", "block(root_mismatch)"])
    }

    /// After a pair stalled, the probe that then fails: under block the tunnel is blocked and marks nobody (the
    /// client's offer may be what the server refused); under a rule that lets a failed probe through, the tunnel
    /// reconnects and the line is written.
    @Test func aStalledPairWhoseProbeFails() throws {
        for (rule, expected) in [(Self.block, ["writeFinding(block probe_failed)", "block(probe_failed)"]),
                                 (Rule(name: "l", action: .block, onProbeError: .alert),
                                  ["reconnect", "writeFinding(alert probe_failed)", "release"])] {
            let r = TestResources()
            var m = Self.machine(rule, host: "tls13.chainwatch.test")
            _ = m.start()
            _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
            _ = Self.feed(&m, .upstream, Array(try TLSFixture.bytes("tls13-rsa.s2c.bin").prefix(100)), r)
            #expect(Self.strings(m.deadlineFired(.pairStall, r)) == ["countPairStall", "releaseProbeClose", "redial", "cancel(verdict)"])
            #expect(Self.strings(m.probeAnswered(.failure("connect refused"), r)) == expected, "\(rule.name)")
        }
    }

    /// With a fresh probe result cached, the tunnel's own handshake goes first (no redial), as under alert.
    /// First contact under alert: nothing is held for a verdict and the tunnel keeps its connection, but the probe
    /// starts at the client's hello, beside the tunnel (on the spare connection opened at the CONNECT), and the
    /// client's bytes are held until the executor lets them flow, before or after the probe's start as the coin
    /// says. With a spare the client's bytes are held from the start until the hello is whole (a hello in pieces
    /// would otherwise have its first piece on the way). The stall deadline only counts (a tunnel whose server's
    /// bytes pass has nothing to give up); the probe is weighed against the flight whichever answers first.
    @Test(arguments: [(Int.max, true, true, true), (1, false, true, true), (Int.max, true, false, false), (5, false, false, true)])
    func tls13FirstContactUnderAlertProbesBesideTheTunnel(chunk: Int, probeFirst: Bool, probeAnswersFirst: Bool, spare: Bool) throws {
        let r = TestResources()
        r.coins = [probeFirst]
        let probe = try Self.genuineProbe()
        var m = Self.machine(Self.alert, host: "tls13.chainwatch.test")
        #expect(Self.strings(m.start(holdingTheClientHello: spare))
                == (spare ? ["hold(upstream, 0)", "hold(client, 0)", "arm(clientHello, 1000)"] : ["hold(upstream, 0)"]))
        #expect(Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), chunk: chunk, r)
                == ["flowing(upstream)", "hold(client, 0)", probeFirst ? "probeBeside(probe first)" : "probeBeside(tunnel first)"]
                    + (spare ? ["cancel(clientHello)"] : []), "no flowing(client): the executor lets the hello go")
        #expect(m.phase.name == "pairing")
        if probeAnswersFirst {
            #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["arm(flight, 5000)"], "the tunnel's flight is waited for")
            #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), chunk: chunk, r) == ["cancel(flight)", "judge(probe)"])
        } else {
            #expect(Self.decisions(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), chunk: chunk, r)) == ["arm(pairStall, 500)"],
                    "no verdict deadline under alert")
            #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["cancel(pairStall)", "judge(probe)"])
        }
        #expect(Self.strings(m.chainJudged(Self.pass(Self.alert), evidence: Self.evidence, r)) == ["writeFinding(pass)", "release"])
        #expect(m.outcome?.action == nil && m.isFinished)
    }

    /// Under alert, a first contact whose probe an interceptor forged (it took the probe for the client) is a line;
    /// one whose probe fails is `probe_failed`, reported as under a cached probe. Neither marks the upstream.
    @Test func aFirstContactUnderAlertWhoseProbeIsForgedOrFailsIsReported() throws {
        let alerts = Verdict(rule: Self.alert.identity, findings: [Finding(reason: .rootMismatch, level: nil, detail: "d", check: "c", action: .alert)])
        let r = TestResources()
        var m = Self.machine(Self.alert, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        _ = Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r)
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["cancel(pairStall)", "judge(probe)"])
        #expect(Self.strings(m.chainJudged(alerts, evidence: Self.evidence, r)) == ["writeFinding(alert root_mismatch)", "release"])

        var failing = Self.machine(Self.alert, host: "tls13.chainwatch.test")
        _ = failing.start()
        _ = Self.feed(&failing, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(Self.strings(failing.probeAnswered(.failure("timed out after 5000 ms"), r)) == ["writeFinding(alert probe_failed)", "release"])
    }

    /// Under alert a probe that stays unanswered while the tunnel's server answered (an interceptor, or a server, that
    /// serves one connection at a time) is counted, and nothing else: the tunnel keeps its connection and its bytes.
    @Test func aStallBesideTheTunnelUnderAlertIsOnlyCounted() throws {
        let r = TestResources()
        var m = Self.machine(Self.alert, host: "tls13.chainwatch.test")
        _ = m.start(holdingTheClientHello: true)
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(Self.decisions(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r)) == ["arm(pairStall, 500)"])
        #expect(Self.strings(m.deadlineFired(.pairStall, r)) == ["countPairStall"])
        #expect(m.phase.name == "pairing")
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["judge(probe)"])
    }

    /// A client under alert with a spare that sends part of a hello and stops: its bytes flow at the deadline, and
    /// so do its server's (a server that echoed a part record was held past the idle timeouts), for a CONNECT to a
    /// name; to an address, whose hello may still name a rule that holds, the server's wait for the hello.
    @Test(arguments: [("tls13.chainwatch.test", true), ("192.0.2.7", false)])
    func aPartHelloBesideASpareFlowsAtTheDeadline(_ host: String, _ serverFlows: Bool) throws {
        let r = TestResources()
        var m = Self.machine(Self.alert, host: host)
        _ = m.start(holdingTheClientHello: true)
        #expect(Self.feed(&m, .client, Array(try TLSFixture.bytes("tls13-rsa.c2s.bin").prefix(40)), r).isEmpty)
        #expect(Self.feed(&m, .upstream, [22, 3, 1, 0, 80], r).isEmpty)
        #expect(Self.strings(m.deadlineFired(.clientHello, r)) == (serverFlows ? ["flowing(client)", "flowing(upstream)"] : ["flowing(client)"]))
    }

    /// Which rules give a tunnel a spare connection at the CONNECT: one that holds nothing. Under block the pair
    /// opens two fresh connections instead.
    @Test func aSpareConnectionIsForAFirstContactUnderAlert() {
        #expect(Machine.wantsSpareConnection(rule: Self.alert))
        #expect(!Machine.wantsSpareConnection(rule: Self.block))
        #expect(!Machine.wantsSpareConnection(rule: Rule(name: "s", action: .alert, sniMismatch: .block)))
    }

    @Test(arguments: [true, false])
    func tls13WithACachedProbeOrUnderAlertProbesAtTheServerHello(blocking: Bool) throws {
        let r = TestResources()
        let probe = try Self.genuineProbe()
        let hello = try EvidenceAgreementTests.hellos("tls13-rsa").client
        r.cached = [ClientOffer(mirroring: hello)]
        var m = Self.machine(blocking ? Self.block : Self.alert, host: "tls13.chainwatch.test")
        _ = m.start()
        #expect(Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
                == (blocking ? ["cancel(clientHello)", "flowing(client)"] : ["flowing(upstream)"]))
        #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r)
                == (blocking ? ["arm(verdict, 5000)", "probe"] : ["probe"]))
        // More client bytes while the probe runs ask for nothing more.
        #expect(Self.feed(&m, .client, [23, 3, 3, 0, 1, 0], r).isEmpty)
        #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["judge(probe)"])
    }

    /// A tunnel whose flight differs from the cached probe's (a forger that spared the probe): the probe is made
    /// again, fresh, up to three times (a pool's other member may have answered the probe); still different, it is
    /// `evidence_mismatch`, which marks nobody.
    @Test func aFlightThatDiffersIsReprobedThenAFinding() throws {
        let r = TestResources()
        var forgedLength = try Self.genuineProbe()
        forgedLength.flight.recordLengths[1] += 1
        forgedLength.flight = .init(messages: forgedLength.flight.messages.enumerated().map { i, m in
            (type: m.type, length: i == 1 ? m.length + 1 : m.length) }, recordLengths: forgedLength.flight.recordLengths)
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        r.cached = [ClientOffer(mirroring: try EvidenceAgreementTests.hellos("tls13-rsa").client)]
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r) == ["arm(verdict, 5000)", "probe"])
        #expect(Self.strings(m.probeAnswered(.success(forgedLength), r)) == ["probe(fresh)"])
        #expect(Self.strings(m.probeAnswered(.success(forgedLength), r)) == ["probe(fresh)"])
        #expect(Self.strings(m.probeAnswered(.success(forgedLength), r)) == ["probe(fresh)"])
        #expect(Self.strings(m.probeAnswered(.success(forgedLength), r))
                == ["cancel(verdict)", "writeFinding(block evidence_mismatch)", "block(evidence_mismatch)"])
        #expect(r.othersAskedFor.count == 3, "each fresh probe's difference looks for a kept flight the tunnel's is")
        // The fresh probe agreeing instead: the probe's chain is judged.
        var again = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = again.start()
        _ = Self.feed(&again, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        _ = Self.feed(&again, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r)
        #expect(Self.strings(again.probeAnswered(.success(forgedLength), r)) == ["probe(fresh)"])
        #expect(Self.strings(again.probeAnswered(.success(try Self.genuineProbe()), r)) == ["judge(probe)"])
    }

    /// A pool of servers behind one address: the cached probe and the fresh one met a member whose flight is a byte
    /// longer than the one the tunnel met; the prober keeps an earlier member's result beside its newest. The tunnel's
    /// flight agrees with that one, whose own chain is judged, and no finding is made. With none that agrees, the
    /// address is probed afresh up to three times, then it is the finding; a fresh probe that meets the tunnel's
    /// member ends it.
    @Test func aPoolsOtherMemberIsWeighedNotAFinding() throws {
        var otherMember = try Self.genuineProbe()
        otherMember.flight.recordLengths[1] += 1
        otherMember.flight = .init(messages: otherMember.flight.messages.enumerated().map { i, m in
            (type: m.type, length: i == 1 ? m.length + 1 : m.length) }, recordLengths: otherMember.flight.recordLengths)
        otherMember.chainDER = [[UInt8](repeating: 0x31, count: 3_001)]
        var tunnelsMember = try Self.genuineProbe()
        tunnelsMember.chainDER = [[UInt8](repeating: 0x32, count: 3_000)]
        let offer = ClientOffer(mirroring: try EvidenceAgreementTests.hellos("tls13-rsa").client)

        func tunnel(_ r: TestResources) throws -> Machine {
            var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
            _ = m.start()
            r.cached = [offer]
            _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
            #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r) == ["arm(verdict, 5000)", "probe"])
            return m
        }
        // The member the tunnel met is kept beside the newest: it is weighed, and its chain (not the fresh one's) judged.
        let pool = TestResources()
        pool.others = [otherMember, tunnelsMember]
        var m = try tunnel(pool)
        #expect(Self.strings(m.probeAnswered(.success(otherMember), pool)) == ["probe(fresh)"])
        #expect(pool.othersAskedFor.isEmpty, "the cached result differing is re-probed first, as before")
        let judged = m.probeAnswered(.success(otherMember), pool)
        #expect(Self.strings(judged) == ["judge(probe)"])
        #expect(pool.othersAskedFor == [offer])
        guard case .judge(.probe(let chain), _, _)? = judged.first else { Issue.record("no judgement: \(judged)"); return }
        #expect(chain.chainDER == tunnelsMember.chainDER)

        // Other flights, none the tunnel's: probed afresh three times in all, then the finding.
        let noMatch = TestResources()
        noMatch.others = [otherMember]
        var n = try tunnel(noMatch)
        #expect(Self.strings(n.probeAnswered(.success(otherMember), noMatch)) == ["probe(fresh)"])
        #expect(Self.strings(n.probeAnswered(.success(otherMember), noMatch)) == ["probe(fresh)"])
        #expect(Self.strings(n.probeAnswered(.success(otherMember), noMatch)) == ["probe(fresh)"])
        #expect(Self.strings(n.probeAnswered(.success(otherMember), noMatch))
                == ["cancel(verdict)", "writeFinding(block evidence_mismatch)", "block(evidence_mismatch)"])
        // A pool whose third fresh probe meets the tunnel's member: its chain is judged.
        var late = try tunnel(noMatch)
        for _ in 0..<3 { #expect(Self.strings(late.probeAnswered(.success(otherMember), noMatch)) == ["probe(fresh)"]) }
        #expect(Self.strings(late.probeAnswered(.success(tunnelsMember), noMatch)) == ["judge(probe)"])

        // A kept flight that cannot be compared (its hellos unparsed here; a member that pads its records likewise)
        // answers for no tunnel: the differences go on to the finding.
        var unparsed = tunnelsMember
        unparsed.parsedServerHello = nil
        let uncomparable = TestResources()
        uncomparable.others = [unparsed]
        var u = try tunnel(uncomparable)
        for _ in 0..<3 { #expect(Self.strings(u.probeAnswered(.success(otherMember), uncomparable)) == ["probe(fresh)"]) }
        #expect(Self.strings(u.probeAnswered(.success(otherMember), uncomparable))
                == ["cancel(verdict)", "writeFinding(block evidence_mismatch)", "block(evidence_mismatch)"])
    }

    /// A held flight that stops short of the probe's waits for the flight deadline, then differs (re-probe); a tunnel
    /// whose bytes flowed and that ended short is judged by the probe (its client left mid-handshake).
    @Test func aShortFlightWaitsForItsDeadline() throws {
        let r = TestResources()
        let probe = try Self.genuineProbe()
        let server = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        var watch = HandshakeWatch()
        _ = watch.client(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
        _ = watch.server(server)
        // The ServerHello record and the first encrypted record (EncryptedExtensions) only.
        let helloRecord = 5 + (Int(server[3]) << 8 | Int(server[4]))
        var cut = helloRecord
        while server[cut] != 23 { cut += 5 + (Int(server[cut + 3]) << 8 | Int(server[cut + 4])) }   // a compatibility CCS
        cut += 5 + probe.flight.recordLengths[0]
        r.cached = [ClientOffer(mirroring: try #require(watch.clientHello))]

        var held = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = held.start()
        _ = Self.feed(&held, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(Self.feed(&held, .upstream, Array(server[..<cut]), r) == ["arm(verdict, 5000)", "probe"])
        #expect(Self.strings(held.probeAnswered(.success(probe), r)) == ["arm(flight, 5000)"])
        #expect(Self.strings(held.deadlineFired(.verdict, r)).isEmpty, "the evidence is being weighed")
        #expect(Self.strings(held.deadlineFired(.flight, r)) == ["probe(fresh)"])
        // Still short beside the fresh probe, at its own deadline: a stalled server is the finding after that one
        // fresh probe (each more, as a pool's flights get, would wait for the deadline again).
        #expect(Self.strings(held.probeAnswered(.success(probe), r)) == ["arm(flight, 5000)"])
        let stalled = Self.strings(held.deadlineFired(.flight, r))
        #expect(stalled.contains("writeFinding(block evidence_mismatch)") && !stalled.contains("probe(fresh)"), "\(stalled)")

        var flowed = Self.machine(Self.alert, host: "tls13.chainwatch.test")
        _ = flowed.start()
        _ = Self.feed(&flowed, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        _ = Self.feed(&flowed, .upstream, Array(server[..<cut]), r)
        #expect(Self.strings(flowed.probeAnswered(.success(probe), r)) == ["arm(flight, 5000)"])
        #expect(Self.strings(flowed.tunnelClosed(r)) == ["cancel(flight)", "judge(probe)"])
        #expect(Self.strings(flowed.chainJudged(Self.pass(Self.alert), evidence: Self.evidence, r)) == ["writeFinding(pass)", "release"])
    }

    // MARK: - HelloRetryRequest, deadlines, the tunnel's end

    /// A client that opens a tunnel and ends its stream before a hello, to a TLS server that answers that end with an
    /// alert record (what a TLS server sends a connection that ends before its hello; the selftest's servers do): no
    /// line, and under alert the alert, held for the hello, goes to the client; under block nothing unjudged passes and
    /// the tunnel closes (`drop`). Before, the alert waited for a hello that could not come: held until the idle
    /// timeout under alert, blocked with a line at the verdict deadline under block.
    @Test(arguments: [false, true])
    func aClientThatEndsBeforeItsHelloEndsTheInspectionQuietly(blocking: Bool) throws {
        let r = TestResources()
        let rule = blocking ? Self.block : Self.alert
        var m = Self.machine(rule, host: "127.0.0.1")
        _ = m.start()
        let alert: [UInt8] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]
        #expect(Self.feed(&m, .upstream, alert, r) == (blocking ? ["arm(verdict, 5000)", "hold(upstream, 7)"] : []), "held: no hello yet")
        #expect(Self.strings(m.clientEnded(r)) == (blocking ? ["cancel(verdict)", "cancel(clientHello)", "drop"] : ["release"]))
        #expect(m.outcome == nil && m.isFinished)
        #expect(Self.strings(m.tunnelClosed(r)).isEmpty)
    }

    /// The same end after a whole hello changes nothing: the server's handshake may still come (a client may
    /// half-close once its hello is sent; a hello and its end read at once are fed in that order), and is inspected
    /// as ever.
    @Test(arguments: [false, true])
    func aClientThatEndsAfterItsHelloIsStillInspected(blocking: Bool) throws {
        let r = TestResources()
        var m = Self.machine(blocking ? Self.block : Self.alert, host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(Self.strings(m.clientEnded(r)).isEmpty)
        #expect(!m.isFinished)
        #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls12-rsa.s2c.bin"), r).contains("judge(passive)"))
    }

    /// A client that sent part of a hello and ended: no hello will come. Under alert its bytes and the server's go;
    /// under block (its bytes held until the hello is whole) the tunnel closes with nothing passed either way.
    @Test(arguments: [false, true])
    func aClientThatEndsInsideItsHelloEndsTheInspectionQuietly(blocking: Bool) throws {
        let r = TestResources()
        var m = Self.machine(blocking ? Self.block : Self.alert, host: "rsa.chainwatch.test")
        _ = m.start()
        let hello = try TLSFixture.bytes("tls12-rsa.c2s.bin"), server = try TLSFixture.bytes("tls12-rsa.s2c.bin")
        #expect(Self.feed(&m, .client, Array(hello.prefix(20)), r).isEmpty)
        _ = Self.feed(&m, .upstream, Array(server.prefix(3)), r)   // the start of a record: held, no hello yet
        #expect(Self.strings(m.clientEnded(r)) == (blocking ? ["cancel(verdict)", "cancel(clientHello)", "drop"] : ["release"]))
        #expect(m.outcome == nil)
    }

    /// A HelloRetryRequest passes the hold (its client cannot go on without it); nothing else does.
    @Test(arguments: [Int.max, 1])
    func aHelloRetryRequestPassesTheHold(chunk: Int) throws {
        let r = TestResources()
        let c2s = try TLSFixture.bytes("tls13-hrr.c2s.bin"), s2c = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        var watch = HandshakeWatch()
        _ = watch.client(c2s)
        _ = watch.server(s2c)
        let first = try #require(watch.clientHello)
        r.cached = [ClientOffer(mirroring: first)]
        var m = Self.machine(Self.block, host: first.serverName ?? "localhost")
        _ = m.start()
        _ = Self.feed(&m, .client, c2s, chunk: chunk, r)
        let hrrLength = 5 + (Int(s2c[3]) << 8 | Int(s2c[4]))
        #expect(Self.feed(&m, .upstream, Array(s2c[..<hrrLength]), chunk: chunk, r) == ["arm(verdict, 5000)", "hold(upstream, \(hrrLength))"])
        #expect(Self.feed(&m, .upstream, Array(s2c[hrrLength...]), chunk: chunk, r) == ["probe"])
    }

    /// A client that ends after its server's HelloRetryRequest, without a second hello: under block its tunnel closes
    /// at once (`drop`) and no line is written, warm (the tunnel watching) and at a first contact (a pair's probe on
    /// its way, whose result is still judged); under alert nothing is held and nothing changes. A client that sent
    /// its second hello before its end is still inspected.
    @Test(arguments: [false, true])
    func aClientThatLeavesAfterAHelloRetryRequestEndsItsTunnelQuietly(firstContact: Bool) throws {
        let c2s = try TLSFixture.bytes("tls13-hrr.c2s.bin"), s2c = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        let firstHello = Array(c2s[..<(5 + (Int(c2s[3]) << 8 | Int(c2s[4])))])
        let hrr = Array(s2c[..<(5 + (Int(s2c[3]) << 8 | Int(s2c[4])))])
        var watch = HandshakeWatch()
        _ = watch.client(c2s)
        let offer = ClientOffer(mirroring: try #require(watch.clientHello))
        for rule in [Self.block, Self.alert] {
            let r = TestResources()
            if !firstContact { r.cached = [offer] }
            var m = Self.machine(rule, host: "localhost")
            _ = m.start()
            _ = Self.feed(&m, .client, firstHello, r)
            _ = Self.feed(&m, .upstream, hrr, r)
            let ended = Self.strings(m.clientEnded(r))
            if rule.action == .block {
                #expect(ended.last == "drop" && !ended.contains { $0.hasPrefix("writeFinding") }, "\(ended)")
                #expect(!ended.contains { $0.hasPrefix("arm(") })
                #expect(Self.strings(m.deadlineFired(.verdict, r)).allSatisfy { !$0.hasPrefix("writeFinding") })
            } else {
                #expect(ended.isEmpty, "\(ended)")
            }
        }
        // The second hello sent before the end: still inspected.
        let r = TestResources()
        r.cached = [offer]
        var sent = Self.machine(Self.block, host: "localhost")
        _ = sent.start()
        _ = Self.feed(&sent, .client, firstHello, r)
        _ = Self.feed(&sent, .upstream, hrr, r)
        _ = Self.feed(&sent, .client, Array(c2s[firstHello.count...]), r)
        #expect(Self.strings(sent.clientEnded(r)).isEmpty && !sent.isFinished)
        // A client that refused the retry with an alert (a compatibility ChangeCipherSpec before it, or not), in any
        // chunking, then ended: it left too. One that began a second hello, or sent data, did not.
        let alert: [UInt8] = [21, 3, 3, 0, 2, 2, 47], changeCipherSpec: [UInt8] = [20, 3, 3, 0, 1, 1]
        let tails: [([UInt8], Bool)] = [(alert, true), (changeCipherSpec + alert, true), (changeCipherSpec, true),
                                        (changeCipherSpec + Array(c2s[firstHello.count...].prefix(9)), false),
                                        ([23, 3, 3, 0, 3, 1, 2, 3], false)]
        for (tail, left) in tails {
            for chunk in [Int.max, 1] {
                var m = Self.machine(Self.block, host: "localhost")
                _ = m.start()
                _ = Self.feed(&m, .client, firstHello + (chunk == 1 ? [] : tail), r)
                _ = Self.feed(&m, .upstream, hrr, r)
                if chunk == 1 { _ = Self.feed(&m, .client, tail, chunk: 1, r) }
                let ended = Self.strings(m.clientEnded(r))
                #expect(left ? ended.last == "drop" : ended.isEmpty, "\(tail) in chunks of \(chunk): \(ended)")
            }
        }
    }

    /// A server whose stream ends mid-handshake (TLS 1.2, before its Certificate) while its bytes are held: the
    /// handshake cannot complete, so under block the tunnel closes at once with nothing passed and no line (`drop`),
    /// as when its upstream resets there; before, the client waited for the verdict deadline and a `handshake_timeout`
    /// line. Under alert the bytes flowed and the end passes with them. A server that ends after its whole chain is
    /// judged as ever.
    @Test(arguments: [false, true])
    func aServerThatEndsMidHandshakeIsNotWaitedFor(blocking: Bool) throws {
        let r = TestResources()
        let hello = try TLSFixture.bytes("tls12-rsa.c2s.bin"), server = try TLSFixture.bytes("tls12-rsa.s2c.bin")
        var m = Self.machine(blocking ? Self.block : Self.alert, host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, hello, r)
        _ = Self.feed(&m, .upstream, Array(server.prefix(40)), r)
        if blocking {
            #expect(Self.strings(m.serverEnded(r)) == ["drop", "cancel(verdict)"])
            #expect(m.isFinished && m.outcome == nil)
            #expect(Self.strings(m.deadlineFired(.verdict, r)).isEmpty, "no line at the old deadline")
        } else {
            #expect(Self.strings(m.serverEnded(r)).isEmpty && !m.isFinished)
        }
        var whole = Self.machine(blocking ? Self.block : Self.alert, host: "rsa.chainwatch.test")
        _ = whole.start()
        _ = Self.feed(&whole, .client, hello, r)
        #expect(Self.feed(&whole, .upstream, server, r).contains("judge(passive)"))
        #expect(Self.strings(whole.serverEnded(r)).isEmpty && !whole.isFinished, "the chain is being judged")
    }

    /// A server that promised a staple, sent its Certificate and ended before the CertificateStatus: that chain is
    /// all it showed, and is judged (and reported) though the tunnel closes at once; a reset there likewise.
    @Test(arguments: [false, true])
    func aChainAwaitingItsStapleIsJudgedWhenTheServerEnds(reset: Bool) throws {
        let r = TestResources()
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let hello = HandshakeWatchMalformedTests.serverHello12(extensions: uint16(5) + uint16(0))
        let flight = hello + handshakeMessage(11, vector(3, vector(3, der)))
        var m = Self.machine(Self.block, host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(Self.feed(&m, .upstream, record(22, flight), r) == ["arm(verdict, 5000)"])
        let ended = Self.strings(reset ? m.tunnelClosed(r) : m.serverEnded(r))
        #expect(ended == (reset ? [] : ["drop"]) + ["cancel(verdict)", "judge(passive)"], "the close first: a cached verdict answers at once")
        #expect(Self.strings(m.chainJudged(Self.blocks(Self.block), evidence: Self.evidence, r)).contains("writeFinding(block root_mismatch)"))
    }

    /// A held TLS 1.3 flight whose server ends short of the probe's is compared as ended at once, as at the flight
    /// deadline (`aShortFlightWaitsForItsDeadline`): one fresh probe, then the finding, written though the tunnel has
    /// closed. First contact too: the pair's probe, on its way, is still weighed against what the tunnel showed.
    @Test(arguments: [false, true])
    func aHeldTLS13FlightWhoseServerEndsShortIsWeighedAtOnce(firstContact: Bool) throws {
        let r = TestResources()
        let probe = try Self.genuineProbe()
        let server = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        let helloRecord = 5 + (Int(server[3]) << 8 | Int(server[4]))
        var cut = helloRecord
        while server[cut] != 23 { cut += 5 + (Int(server[cut + 3]) << 8 | Int(server[cut + 4])) }
        cut += 5 + probe.flight.recordLengths[0]   // the ServerHello and the EncryptedExtensions' record only
        var watch = HandshakeWatch()
        _ = watch.client(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
        if !firstContact { r.cached = [ClientOffer(mirroring: try #require(watch.clientHello))] }
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        if firstContact {
            _ = Self.feed(&m, .upstream, Array(server[..<cut]), r)
            let ended = Self.strings(m.serverEnded(r))
            #expect(ended.first == "drop" && !ended.contains { $0.hasPrefix("writeFinding") }, "\(ended)")
            #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["probe(fresh)"], "compared as ended: short")
        } else {
            #expect(Self.feed(&m, .upstream, Array(server[..<cut]), r) == ["arm(verdict, 5000)", "probe"])
            #expect(Self.strings(m.probeAnswered(.success(probe), r)) == ["arm(flight, 5000)"])
            #expect(Self.strings(m.serverEnded(r)) == ["drop", "cancel(verdict)", "cancel(flight)", "probe(fresh)"])
        }
        let found = Self.strings(m.probeAnswered(.success(probe), r))
        #expect(found.contains("writeFinding(block evidence_mismatch)") && !found.contains("probe(fresh)"), "\(found)")
    }

    /// A server that speaks first (TLS-looking bytes, held for the client's hello, whose SNI may pick the rule) and
    /// ends: no handshake can follow. Under alert, for a CONNECT to a name, its bytes go to the client at once; for a
    /// CONNECT to an address the hello's SNI may still pick a rule that holds, so the tunnel waits as before. Under
    /// block nothing unjudged passes: a refusal-like alert that may pass has passed and the end follows it; other
    /// bytes are dropped with the tunnel.
    @Test func aServerThatSpeaksFirstAndEnds() {
        let r = TestResources()
        let alertRecord: [UInt8] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]
        var named = Self.machine(Self.alert, host: "a.test")
        _ = named.start()
        #expect(Self.feed(&named, .upstream, alertRecord, r).isEmpty, "held for the hello")
        #expect(Self.strings(named.serverEnded(r)) == ["release"])
        #expect(named.isFinished && named.outcome == nil)

        var address = Self.machine(Self.alert, host: "192.0.2.7")
        _ = address.start()
        _ = Self.feed(&address, .upstream, alertRecord, r)
        #expect(Self.strings(address.serverEnded(r)).isEmpty && !address.isFinished)

        var passed = Self.machine(Self.block, host: "a.test")
        _ = passed.start()
        #expect(Self.feed(&passed, .upstream, alertRecord, r) == ["arm(verdict, 5000)", "hold(upstream, 7)"])
        #expect(Self.strings(passed.serverEnded(r)).isEmpty, "nothing held: the end follows the alert")

        var held = Self.machine(Self.block, host: "a.test")
        _ = held.start()
        _ = Self.feed(&held, .upstream, [0x16, 0x03, 0x03], r)
        #expect(Self.strings(held.serverEnded(r)) == ["drop", "cancel(verdict)", "cancel(clientHello)"])
        #expect(held.outcome == nil)
    }

    /// Under a hold, a server that shows no chain within the deadline blocks the tunnel (a forger could otherwise stall
    /// past it), and marks nobody.
    @Test func aServerThatStallsIsBlockedAtTheVerdictDeadline() throws {
        let r = TestResources()
        var m = Self.machine(Rule(name: "l", action: .block, onProbeError: .allow), host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(Self.feed(&m, .upstream, Array(try TLSFixture.bytes("tls12-rsa.s2c.bin").prefix(40)), r) == ["arm(verdict, 5000)"])
        #expect(Self.strings(m.deadlineFired(.verdict, r)) == ["writeFinding(block handshake_timeout)", "block(handshake_timeout)"])
    }

    /// A client that sends a few TLS-looking bytes and waits is not TLS: at the ClientHello deadline its bytes flow.
    @Test func aClientThatNeverCompletesItsHelloFlowsAtTheDeadline() {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "a.test")
        _ = m.start()
        #expect(Self.feed(&m, .client, [22, 3, 1], r).isEmpty)
        #expect(m.holdsClientBytes)
        #expect(Self.strings(m.deadlineFired(.clientHello, r)) == ["flowing(client)"])
        #expect(!m.holdsClientBytes)
        #expect(Self.strings(m.deadlineFired(.clientHello, r)) == ["impossible(clientHello fired unarmed in watching)"])
    }

    /// The tunnel closing while the first probe runs: the probe's verdict is still reached and written.
    @Test func aTunnelGoneDuringTheFirstProbeIsStillReported() throws {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(Self.strings(m.tunnelClosed(r)) == ["releaseProbeClose"], "nothing left for the probe to look like")
        #expect(Self.strings(m.probeAnswered(.success(try Self.genuineProbe()), r)) == ["judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["writeFinding(pass)", "release"])
    }

    /// A tunnel that ends before any evidence was asked for ends quietly: no line, no verdict.
    @Test func aTunnelGoneBeforeItsHelloEndsQuietly() {
        let r = TestResources()
        var m = Self.machine(Self.block, host: "a.test")
        _ = m.start()
        #expect(Self.strings(m.tunnelClosed(r)) == ["cancel(clientHello)"])
        #expect(m.isFinished && m.outcome == nil)
        #expect(Self.strings(m.probeAnswered(.failure("late"), r)).isEmpty, "late: ignored")
    }

    @Test func eventsThatCannotHappenAreNamed() {
        let r = TestResources()
        var m = Self.machine(Self.alert, host: "a.test")
        #expect(Self.strings(m.probeAnswered(.failure("x"), r)) == ["impossible(probe answered in watching)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.alert), evidence: Self.evidence, r)) == ["impossible(chain judged in watching)"])
        #expect(Self.strings(m.deadlineFired(.flight, r)) == ["impossible(flight fired unarmed in watching)"])
    }

    /// Bytes that are not TLS are a finding at once, under the rule's `non_tls` disposition.
    @Test func notTLSIsDecidedAtOnce() {
        let r = TestResources()
        var m = Self.machine(Rule(name: "n", action: .alert, nonTLS: .block), host: "a.test")
        _ = m.start()
        #expect(Self.feed(&m, .client, Array("GET / HTTP/1.1\r\n\r\n".utf8), r)
                == ["cancel(clientHello)", "writeFinding(block not_tls)", "block(not_tls)"])
    }

    /// A server that answers a ClientHello with bytes that are not TLS (an HTTP error page, a banner): under a block
    /// rule those bytes never reach the client, whatever `non_tls` says (it is `alert` by default); under alert they
    /// flow with a line. Before, `non_tls: alert` released them under `action: block`.
    @Test func aServerAnsweringTheHelloWithoutTLSIsBlockedUnderBlock() throws {
        let page = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8)
        for (rule, expected) in [(Self.block, "block(not_tls)"), (Self.alert, "release")] {
            let r = TestResources()
            var m = Self.machine(rule, host: "rsa.chainwatch.test")
            _ = m.start()
            _ = Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
            let actions = Self.feed(&m, .upstream, page, r)
            #expect(actions.last == expected, "\(rule.name): \(actions)")
            #expect(!actions.contains { $0.hasPrefix("markKnownBad") })
        }
    }

    /// The CONNECT host's rule judges the tunnel, whatever the SNI names: `CONNECT genuine.test` with SNI
    /// rsa.chainwatch.test is judged (and held) under genuine.test's block rule, not the defaults' alert, as
    /// `policy explain genuine.test` says. A CONNECT by address is judged under its SNI's rule.
    @Test func theClientsSNICannotPickALaxerRule() throws {
        let policy = Policy(defaults: Self.alert, rules: [
            Rule(name: "genuine", patterns: [HostPattern(.exact("genuine.test"))], action: .block),
            Rule(name: "named", patterns: [HostPattern(.exact("rsa.chainwatch.test"))], action: .block)])
        let r = TestResources()
        var byName = Machine(policy: policy, facts: ConnectionFacts(connectHost: "genuine.test", port: 443), settings: Self.settings)
        #expect(Self.strings(byName.start()).contains("hold(client, 0)"))
        _ = Self.feed(&byName, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(byName.facts.serverName == "rsa.chainwatch.test" && byName.rule.name == "genuine" && byName.holds)
        let laxer = Policy(defaults: Self.alert, rules: [Rule(name: "genuine", patterns: [HostPattern(.exact("genuine.test"))], action: .block)])
        var sniElsewhere = Machine(policy: laxer, facts: ConnectionFacts(connectHost: "genuine.test", port: 443), settings: Self.settings)
        _ = sniElsewhere.start()
        _ = Self.feed(&sniElsewhere, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(sniElsewhere.rule.name == "genuine", "the defaults (alert) for the SNI's name do not apply")
        var byAddress = Machine(policy: policy, facts: ConnectionFacts(connectHost: "127.0.0.1", port: 443), settings: Self.settings)
        _ = byAddress.start()
        _ = Self.feed(&byAddress, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(byAddress.rule.name == "named" && byAddress.holds)
    }

    /// A CONNECT to an address whose server speaks first: the hello's SNI picks the rule, so what the server sent is
    /// decided under that rule, not the address's. A whole TLS 1.2 flight sent before the hello (RSA key exchange lets
    /// a forger do that) is judged under the rule the SNI names; before, it was judged at once under the address's
    /// (alert), its bytes passed, and the named rule (block) never saw it. Partial bytes and an end before the hello
    /// are held under the named rule from the hello on, with its deadline, and the end closes the tunnel; before, they
    /// waited for the idle timeouts with no deadline at all.
    @Test func aServerThatSpeaksFirstToAnAddressIsJudgedUnderTheRuleTheHelloPicks() throws {
        let policy = Policy(defaults: Self.alert, rules: [
            Rule(name: "named", patterns: [HostPattern(.exact("rsa.chainwatch.test"))], action: .block)])
        let r = TestResources()
        let hello = try TLSFixture.bytes("tls12-rsa.c2s.bin"), server = try TLSFixture.bytes("tls12-rsa.s2c.bin")
        func byAddress() -> Machine {
            var m = Machine(policy: policy, facts: ConnectionFacts(connectHost: "127.0.0.1", port: 443), settings: Self.settings)
            _ = m.start()
            return m
        }
        var whole = byAddress()
        #expect(Self.feed(&whole, .upstream, server, r).isEmpty, "held for the hello, not judged")
        #expect(!whole.isFinished)
        let judged = Self.feed(&whole, .client, hello, r)
        #expect(judged == ["arm(verdict, 5000)", "judge(passive)"], "\(judged)")
        #expect(whole.rule.name == "named" && whole.holds)
        #expect(Self.strings(whole.chainJudged(Self.blocks(policy.rules[0]), evidence: Self.evidence, r)).last == "block(root_mismatch)")

        var partial = byAddress()
        _ = Self.feed(&partial, .upstream, Array(server.prefix(40)), r)
        #expect(Self.strings(partial.serverEnded(r)).isEmpty, "the address's rule holds nothing, and the hello may change it")
        let ended = Self.feed(&partial, .client, hello, r)
        #expect(ended == ["arm(verdict, 5000)", "drop", "cancel(verdict)"], "\(ended)")
        #expect(partial.isFinished && partial.outcome == nil)

        var open = byAddress()
        _ = Self.feed(&open, .upstream, Array(server.prefix(40)), r)
        #expect(Self.feed(&open, .client, hello, r) == ["arm(verdict, 5000)"])
        #expect(Self.strings(open.deadlineFired(.verdict, r)) == ["writeFinding(block handshake_timeout)", "block(handshake_timeout)"])

        // A hello whose SNI keeps the address's rule (alert): the bytes flow, and the chain is judged as before.
        var other = byAddress()
        _ = Self.feed(&other, .upstream, server, r)
        #expect(Self.feed(&other, .client, hello, r).contains("judge(passive)"))

        // The hello in pieces (a post-quantum hello spans TCP segments): nothing is decided until it is whole.
        var pieces = byAddress()
        _ = Self.feed(&pieces, .upstream, server, r)
        #expect(Self.feed(&pieces, .client, Array(hello.prefix(40)), r).isEmpty)
        #expect(Self.feed(&pieces, .client, Array(hello.dropFirst(40)), r) == ["arm(verdict, 5000)", "judge(passive)"])

        // A TLS-looking record that is no handshake (a ChangeCipherSpec) sent first, ahead of a flight: decided under
        // the named rule too (a server that answers a hello with no TLS handshake: blocked).
        var changeCipherSpec = byAddress()
        #expect(Self.feed(&changeCipherSpec, .upstream, [20, 3, 3, 0, 1, 1] + server, r).isEmpty)
        #expect(Self.decisions(Self.feed(&changeCipherSpec, .client, hello, r)).last?.hasPrefix("block(") == true)

        // A server that speaks first in plain text (an SMTP banner): decided at once, its client waits for it.
        var banner = byAddress()
        let decided = Self.feed(&banner, .upstream, Array("220 mail.test ESMTP ready\r\n".utf8), r)
        #expect(decided.last == "release" && banner.isFinished, "\(decided)")
    }

    /// A server that promised a staple and sent its chain, then stalls: at the verdict deadline that chain is what it
    /// showed in time, and is judged; before, it was a `handshake_timeout` and the chain was never judged.
    @Test func aChainAwaitingItsStapleIsJudgedAtTheVerdictDeadline() throws {
        let r = TestResources()
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let flight = HandshakeWatchMalformedTests.serverHello12(extensions: uint16(5) + uint16(0))
            + handshakeMessage(11, vector(3, vector(3, der)))
        var m = Self.machine(Self.block, host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        #expect(Self.feed(&m, .upstream, record(22, flight), r) == ["arm(verdict, 5000)"])
        #expect(Self.strings(m.deadlineFired(.verdict, r)) == ["judge(passive)"])
    }

    // MARK: - Room for large handshakes

    /// A Certificate message over 224 KiB is read only with room, taken when its header announces it; under a hold
    /// the connection may hold that much more. Without room: `oversized_handshake`, marking nobody.
    @Test(arguments: [true, false])
    func aLargeCertificateTakesRoom(roomFree: Bool) throws {
        let r = TestResources(room: roomFree ? 64 << 20 : 1 << 20)
        let (stream, _, length) = try HandshakeWatchTests.largeCertificateFlight(padding: 300_000)
        var m = Self.machine(Self.block, host: "rsa.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls12-rsa.c2s.bin"), r)
        let body = length + 0   // the message body's announced length
        let slack = Machine.roomSlack
        let actions = Self.feed(&m, .upstream, stream, chunk: 16_389, r)   // the header arrives before the body
        #expect(r.asked.first == (body + slack) * 3)
        if roomFree {
            #expect(actions == ["arm(verdict, 5000)", "holdUpTo(upstream, \(body + slack))", "judge(passive)"])
            #expect(Self.strings(m.chainJudged(Self.blocks(Self.block), evidence: Self.evidence, r))
                    == ["cancel(verdict)", "writeFinding(block root_mismatch)", "releaseRoom", "block(root_mismatch)"],
                    "a chain read with room marks nobody")
        } else {
            #expect(actions == ["arm(verdict, 5000)", "cancel(verdict)", "writeFinding(block oversized_handshake)", "block(oversized_handshake)"])
        }
    }

    /// After a stalled pair, a first probe's chain over 512 KiB is kept for its tunnel with room (the prober does not
    /// cache it), and the verdict deadline starts again when it is kept; the room goes back with the verdict.
    @Test func aLargeFirstProbeIsKeptWithRoom() throws {
        let r = TestResources()
        var probe = try Self.genuineProbe()
        probe.chainDER = [[UInt8](repeating: 0x30, count: 1_000_000)]
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        _ = Self.feed(&m, .upstream, [22, 3, 3], r)
        _ = m.deadlineFired(.pairStall, r)
        _ = m.probeAnswered(.success(probe), r)
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["arm(verdict, 5000)", "reconnect"])
        #expect(r.held == 1_000_000 + Machine.roomSlack)
        #expect(Self.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r) == ["judge(probe)"])
        #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r))
                == ["cancel(verdict)", "writeFinding(pass)", "releaseRoom", "release"])
    }

    /// A pair's probe with a chain over 512 KiB holds room while the tunnel's flight is awaited; none free: the
    /// tunnel is `oversized_handshake`.
    @Test(arguments: [true, false])
    func aLargePairedProbeTakesRoom(roomFree: Bool) throws {
        let r = TestResources(room: roomFree ? 64 << 20 : 512 * 1024)
        var probe = try Self.genuineProbe()
        probe.chainDER = [[UInt8](repeating: 0x30, count: 1_000_000)]
        var m = Self.machine(Self.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = Self.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        let answered = Self.strings(m.probeAnswered(.success(probe), r))
        if roomFree {
            #expect(answered == ["arm(flight, 5000)"])
            #expect(r.held == 1_000_000 + Machine.roomSlack)
            #expect(Self.strings(m.tunnelClosed(r)) == ["releaseProbeClose", "cancel(flight)", "judge(probe)"])
            #expect(Self.strings(m.chainJudged(Self.pass(Self.block), evidence: Self.evidence, r)) == ["writeFinding(pass)", "releaseRoom", "release"])
        } else {
            #expect(answered == ["releaseProbeClose", "writeFinding(block oversized_handshake)", "block(oversized_handshake)"])
        }
    }
}
