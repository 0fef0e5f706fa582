import Testing
@testable import ChainwatchCore

/// A first contact whose server asks both connections of the pair to retry (`InspectionMachine+Retry`): the second
/// hellos leave together, in the coin's order, as the first ones did. On the captured HelloRetryRequest handshake
/// (`tls13-hrr`: the client's first hello, a ChangeCipherSpec and its second hello; the server's HelloRetryRequest).
@Suite struct InspectionMachineRetryTests {
    typealias T = InspectionMachineTests

    struct Handshake {
        let c2s: [UInt8], s2c: [UInt8]
        /// Where the client's first hello ends, and its second (after the ChangeCipherSpec); the HelloRetryRequest's length.
        let firstHello: Int, secondHello: Int, hrr: Int
        let host: String
    }

    static func handshake() throws -> Handshake {
        let c2s = try TLSFixture.bytes("tls13-hrr.c2s.bin"), s2c = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        func recordEnd(_ bytes: [UInt8], at start: Int) -> Int { start + 5 + (Int(bytes[start + 3]) << 8 | Int(bytes[start + 4])) }
        let firstHello = recordEnd(c2s, at: 0)
        let ccs = recordEnd(c2s, at: firstHello)
        try #require(c2s[firstHello] == 20 && c2s[ccs] == 22 && c2s[ccs + 5] == 1)
        var watch = HandshakeWatch()
        _ = watch.client(c2s)
        return Handshake(c2s: c2s, s2c: s2c, firstHello: firstHello, secondHello: recordEnd(c2s, at: ccs),
                         hrr: recordEnd(s2c, at: 0), host: try #require(watch.clientHello?.serverName))
    }

    /// A first contact under block whose probe is the tunnel's own: the client's first hello fed (the pair made);
    /// then, in this order, the tunnel's HelloRetryRequest (`hrr`) and the probe's retry (`probeRetried`).
    static func paired(_ h: Handshake, _ r: TestResources, hrr: Bool = false, probeRetried: Bool = false) -> InspectionMachine {
        r.pairProbeHolds = true
        var m = T.machine(T.block, host: h.host)
        _ = m.start()
        _ = T.feed(&m, .client, Array(h.c2s[..<h.firstHello]), r)
        if hrr { _ = T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r) }
        if probeRetried { _ = m.probeRetried(r) }
        return m
    }

    /// Under block: the tunnel's HelloRetryRequest is held until the probe holds a second hello of its own; then it
    /// passes, the client's bytes are held from there until its second hello is whole, and the two hellos leave in
    /// the order of the coin drawn then (the client's flow when the connection is told; the probe's, second, a loop
    /// turn later).
    @Test(arguments: [true, false], [Int.max, 1])
    func theSecondHellosLeaveTogetherInTheCoinsOrder(probeFirst: Bool, chunk: Int) throws {
        let h = try Self.handshake()
        let r = TestResources()
        r.coins = [true, probeFirst]
        r.pairProbeHolds = true
        var m = T.machine(T.block, host: h.host)
        _ = m.start()
        #expect(T.feed(&m, .client, Array(h.c2s[..<h.firstHello]), r)
                == ["redial", "pair(probe first)", "cancel(clientHello)", "flowing(client)"])
        #expect(T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r) == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        #expect(T.strings(m.probeRetried(r))
                == ["cancel(pairStall)", "hold(upstream, \(h.hrr))", "hold(client, \(h.firstHello))", "arm(retryGate, 500)"])
        var actions = T.feed(&m, .client, Array(h.c2s[h.firstHello..<h.secondHello]), chunk: chunk, r)
        #expect(actions == ["cancel(retryGate)", probeFirst ? "sendSecondHellos(probe first)" : "sendSecondHellos(client first)"])
        // The server's answer to the tunnel's second hello is held for the probe, as any pair's flight is.
        actions = T.feed(&m, .upstream, Array(h.s2c[h.hrr...]), r)
        #expect(!actions.contains { $0.hasPrefix("hold(upstream") || $0 == "release" || $0.hasPrefix("sendProbeRetry") }, "\(actions)")
        #expect(m.phase.name == "pairing")
    }

    /// The probe's retry comes first: the tunnel's HelloRetryRequest passes as it arrives (no stall deadline: the
    /// server answers the probe), and the client's second hello is held for the pairing.
    @Test func aProbeThatRetriedFirstLetsTheTunnelsRetryPass() throws {
        let h = try Self.handshake()
        let r = TestResources()
        var m = Self.paired(h, r)
        #expect(T.strings(m.probeRetried(r)) == ["arm(retryGate, 100)"])   // the other's retry: the server sends both at once
        #expect(T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r)
                == ["arm(verdict, 5000)", "hold(upstream, \(h.hrr))", "hold(client, \(h.firstHello))",
                    "arm(retryGate, 500)"])
        #expect(T.feed(&m, .client, Array(h.c2s[h.firstHello..<h.secondHello]), r)
                == ["cancel(retryGate)", "sendSecondHellos(probe first)"])
    }

    /// Nothing to pair the probe's second hello with: the tunnel's server answered without a retry, the tunnel
    /// ended, or the tunnel's retry did not come in time. The probe's hello goes at once; a client's held bytes flow.
    @Test func aProbesSecondHelloIsLetGoWhenTheTunnelHasNone() throws {
        let h = try Self.handshake()
        // The tunnel's server answered its hello with a ServerHello (another server's handshake: no retry).
        do {
            let r = TestResources()
            r.pairProbeHolds = true
            var m = T.machine(T.block, host: "tls13.chainwatch.test")
            _ = m.start()
            _ = T.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
            #expect(T.strings(m.probeRetried(r)) == ["arm(retryGate, 100)"])
            #expect(T.feed(&m, .upstream, try TLSFixture.bytes("tls13-rsa.s2c.bin"), r)
                    == ["arm(verdict, 5000)", "cancel(retryGate)", "sendProbeRetry"])
        }
        // The tunnel's retry does not come within the stall (a server that serves the probe's connection first).
        do {
            let r = TestResources()
            var m = Self.paired(h, r, probeRetried: true)
            #expect(T.strings(m.deadlineFired(.retryGate, r)) == ["sendProbeRetry"])
            // Its retry, later, waits for the probe's answer as before.
            #expect(T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r) == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        }
        // The client does not send its second hello in time: both go.
        do {
            let r = TestResources()
            var m = Self.paired(h, r, hrr: true, probeRetried: true)
            _ = T.feed(&m, .client, Array(h.c2s[h.firstHello..<(h.firstHello + 9)]), r)
            #expect(T.strings(m.deadlineFired(.retryGate, r)) == ["flowing(client)", "sendProbeRetry"])
        }
        // The tunnel ends while the probe holds.
        do {
            let r = TestResources()
            var m = Self.paired(h, r, probeRetried: true)
            #expect(T.strings(m.tunnelClosed(r)) == ["cancel(retryGate)", "sendProbeRetry", "releaseProbeClose"])
            #expect(T.strings(m.probeRetried(r)) == ["sendProbeRetry"])   // said again: let go again
        }
        // A client whose bytes after the retry are not a hello (an alert): they flow, and the probe's goes.
        do {
            let r = TestResources()
            var m = Self.paired(h, r, hrr: true, probeRetried: true)
            #expect(T.feed(&m, .client, [21, 3, 3, 0, 2, 2, 40], r) == ["cancel(retryGate)", "flowing(client)", "sendProbeRetry"])
        }
    }

    /// The pair's probe keeps its closing flight until the tunnel is decided: a first byte of the tunnel's server (an
    /// interceptor's nudge) lets nothing go; the verdict, the tunnel's end or its redial does, once.
    @Test func theProbesCloseWaitsForTheTunnelsVerdict() throws {
        let r = TestResources()
        var m = T.machine(T.block, host: "tls13.chainwatch.test")
        _ = m.start()
        _ = T.feed(&m, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(T.strings(m.probeAnswered(.success(try T.genuineProbe()), r)) == ["arm(flight, 5000)"])
        let s2c = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        #expect(!T.feed(&m, .upstream, Array(s2c.prefix(5)), r).contains("releaseProbeClose"))
        #expect(T.feed(&m, .upstream, Array(s2c.dropFirst(5)), r) == ["cancel(flight)", "judge(probe)"])
        #expect(T.strings(m.chainJudged(T.pass(T.block), evidence: T.evidence, r))
                == ["releaseProbeClose", "cancel(verdict)", "writeFinding(pass)", "release"])
        #expect(T.strings(m.tunnelClosed(r)).isEmpty, "once")
        // Under alert nothing is kept: no release is told.
        var a = T.machine(T.alert, host: "tls13.chainwatch.test")
        _ = a.start()
        _ = T.feed(&a, .client, try TLSFixture.bytes("tls13-rsa.c2s.bin"), r)
        #expect(!T.strings(a.tunnelClosed(r)).contains("releaseProbeClose"))
    }

    /// A probe that is not the tunnel's own handshake (one in flight for its key already) holds nothing: the
    /// tunnel's HelloRetryRequest waits for its answer, as before, and no client byte is held for it.
    @Test func aProbeTheTunnelOnlyWaitsForIsNotPaired() throws {
        let h = try Self.handshake()
        let r = TestResources()
        var m = T.machine(T.block, host: h.host)
        _ = m.start()
        _ = T.feed(&m, .client, Array(h.c2s[..<h.firstHello]), r)
        #expect(T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r) == ["arm(verdict, 5000)", "arm(pairStall, 500)"])
        #expect(T.feed(&m, .client, Array(h.c2s[h.firstHello..<h.secondHello]), r).isEmpty)
        // Under alert the retry flows to the client at once, and its second hello is not held either.
        var a = T.machine(T.alert, host: h.host)
        _ = a.start()
        _ = T.feed(&a, .client, Array(h.c2s[..<h.firstHello]), r)
        #expect(!T.feed(&a, .upstream, Array(h.s2c[..<h.hrr]), r).contains { $0.hasPrefix("hold(client") })
    }

    /// Under alert the retry reaches the client at once; its second hello is held, whole, until the probe says it
    /// holds its own (or the gate's deadline), and the two then leave in the coin's order.
    @Test(arguments: [true, false])
    func underAlertTheClientsSecondHelloWaitsForTheProbes(probeFirst: Bool) throws {
        let h = try Self.handshake()
        let r = TestResources()
        r.coins = [true, probeFirst]
        r.pairProbeHolds = true
        var m = T.machine(T.alert, host: h.host)
        _ = m.start()
        #expect(T.feed(&m, .client, Array(h.c2s[..<h.firstHello]), r).contains("probeBeside(probe first)"))
        // Until the probe retries, the wait is for its retry, which the server sent with the tunnel's.
        #expect(T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r)
                == ["arm(pairStall, 500)", "hold(client, \(h.firstHello))", "arm(retryGate, 100)"])
        #expect(T.feed(&m, .client, Array(h.c2s[h.firstHello..<h.secondHello]), chunk: 7, r).isEmpty)
        #expect(T.strings(m.probeRetried(r))
                == ["cancel(retryGate)", probeFirst ? "sendSecondHellos(probe first)" : "sendSecondHellos(client first)"])
    }

    /// Under alert, a probe that retries while its client's second hello is still coming gives the client the time
    /// for it (the wait was for the probe's retry).
    @Test func underAlertAProbeThatRetriesFirstWaitsForTheClient() throws {
        let h = try Self.handshake()
        let r = TestResources()
        r.pairProbeHolds = true
        var m = T.machine(T.alert, host: h.host)
        _ = m.start()
        _ = T.feed(&m, .client, Array(h.c2s[..<h.firstHello]), r)
        _ = T.feed(&m, .upstream, Array(h.s2c[..<h.hrr]), r)
        #expect(T.feed(&m, .client, Array(h.c2s[h.firstHello..<(h.firstHello + 10)]), r).isEmpty)
        #expect(T.strings(m.probeRetried(r)) == ["cancel(pairStall)", "arm(retryGate, 500)"])
        #expect(T.feed(&m, .client, Array(h.c2s[(h.firstHello + 10)..<h.secondHello]), r)
                == ["cancel(retryGate)", "sendSecondHellos(probe first)"])
    }
}

/// The client's second hello after a HelloRetryRequest, read from its records.
@Suite struct SecondHelloScanTests {
    @Test(arguments: [Int.max, 1, 5, 6, 7])
    func theHelloIsWholeAtTheEndOfItsRecord(chunk: Int) throws {
        let h = try InspectionMachineRetryTests.handshake()
        let bytes = Array(h.c2s[h.firstHello...])   // a ChangeCipherSpec, the hello, then encrypted records
        var scan = SecondHelloScan()
        var progress = [SecondHelloScan.Progress]()
        var i = 0
        while i < bytes.count {
            progress.append(scan.feed(bytes[i..<min(bytes.count, i &+ chunk)]))
            i = min(bytes.count, i &+ chunk)
        }
        let end = h.secondHello - h.firstHello
        #expect(progress.last == .whole(end: end))
        #expect(progress.filter { $0 != .moreBytes }.allSatisfy { $0 == .whole(end: end) })
        // Cut one byte short, it is not whole.
        var short = SecondHelloScan()
        #expect(short.feed(bytes[..<(end - 1)]) == .moreBytes)
    }

    @Test func whatIsNotAHelloIsSaidAtOnce() {
        let cases: [[UInt8]] = [
            [21, 3, 3, 0, 2, 2, 40],                 // an alert
            [23, 3, 3, 0, 1, 0],                     // application data
            [20, 3, 3, 0, 1, 2],                     // a ChangeCipherSpec that is not 1
            [22, 3, 3, 0, 4, 2, 0, 0, 0],            // a handshake message that is not a ClientHello
            [22, 3, 3, 0, 5, 1, 0, 0, 0, 0],         // a hello that ends before its record does
            [22, 9, 3, 0, 1, 1],                     // a record version that is not TLS
            [22, 3, 3, 0x40, 1],                     // a record over 16 KiB
        ]
        for bytes in cases {
            var scan = SecondHelloScan()
            #expect(scan.feed(bytes) == .notAHello, "\(bytes)")
        }
        var split = SecondHelloScan()   // a hello over two records is whole at the second's end
        #expect(split.feed([22, 3, 3, 0, 3, 1, 0, 0]) == .moreBytes)
        #expect(split.feed([22, 3, 3, 0, 3, 2, 0xAB, 0xCD]) == .whole(end: 16))
    }
}
