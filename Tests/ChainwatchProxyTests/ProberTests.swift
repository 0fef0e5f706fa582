import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import ChainwatchProxy
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
import ChainwatchLock
#endif

/// The prober against real `openssl s_server` processes on loopback, with loops on their own threads.
/// Serialized: timing expectations (timeouts) should not compete with parallel handshakes on 2 cores.
@Suite(.serialized, .enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/openssl")))
struct ProberTests {
    @Test func tls13ProbeGetsLeafAndIntermediateAsSent() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3", "-alpn", "h2,http/1.1"])
        defer { server.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober()

        let answer = try #require(prober.probeAndWait(key(port: server.port, alpn: ["h2", "http/1.1"]), from: loop))
        #expect(answer.onOwnLoop)
        #expect(answer.afterReturn)
        let chain = try #require(answer.result.chain, "\(answer.result)")
        #expect(chain.chainDER == [try ProbePKI.der("genuine"), try ProbePKI.der("genuine-intermediate")])
        #expect(chain.version == .tls1_3)
        #expect(chain.cipher.isTLS13 && chain.cipher.name?.hasPrefix("TLS_") == true)
        #expect(chain.alpn == "h2")
        #expect(prober.counters == .init(started: 1, cacheHits: 0, waitersAttached: 0, succeeded: 1, failed: 0))
    }

    @Test func maxVersionTLS12IsHonoured() throws {
        let server = try OpenSSLServer(genuine: [])   // TLS 1.2 and 1.3
        defer { server.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober()

        let tls12 = try #require(prober.probeAndWait(key(port: server.port, maxVersion: .tls1_2), from: loop)?.result.chain)
        #expect(tls12.version == .tls1_2)
        #expect(tls12.cipher.name?.hasPrefix("TLS_ECDHE_ECDSA_") == true)
        #expect(tls12.chainDER == [try ProbePKI.der("genuine"), try ProbePKI.der("genuine-intermediate")])
        #expect(tls12.alpn == nil)

        // The same upstream without the cap is another key, and negotiates TLS 1.3.
        let tls13 = try #require(prober.probeAndWait(key(port: server.port), from: loop)?.result.chain)
        #expect(tls13.version == .tls1_3)
        #expect(prober.counters.started == 2)
    }

    @Test func serverNameSelectsTheCertificate() throws {
        let server = try OpenSSLServer(genuine: ["-servername", "other.test",
                                                 "-cert2", ProbePKI.path("otherhost.pem"), "-key2", ProbePKI.path("otherhost.key")])
        defer { server.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober()

        let other = try #require(prober.probeAndWait(key(port: server.port, serverName: "other.test"), from: loop)?.result.chain)
        #expect(other.chainDER.first == (try ProbePKI.der("otherhost")))
        let genuine = try #require(prober.probeAndWait(key(port: server.port, serverName: "genuine.test"), from: loop)?.result.chain)
        #expect(genuine.chainDER.first == (try ProbePKI.der("genuine")))
        // No SNI, and an IP literal (never sent as SNI): the default certificate.
        let none = try #require(prober.probeAndWait(key(port: server.port, serverName: nil), from: loop)?.result.chain)
        #expect(none.chainDER.first == (try ProbePKI.der("genuine")))
        let ip = try #require(prober.probeAndWait(key(port: server.port, serverName: "127.0.0.1"), from: loop)?.result.chain)
        #expect(ip.chainDER.first == (try ProbePKI.der("genuine")))
    }

    @Test func concurrentProbesOfOneKeyFromTwoLoopsMakeOneHandshake() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { server.stop() }
        // The relay holds each connection 300 ms before reaching the server: the first handshake is surely in
        // flight while the other 19 callers arrive.
        let relay = try CountingRelay(upstreamPort: server.port, delayMilliseconds: 300)
        defer { relay.stop() }
        let loops = [try LoopThread(index: 0), try LoopThread(index: 1)]
        defer { for loop in loops { loop.stop() } }
        let prober = Prober()
        let probeKey = key(port: relay.port)

        let answers = Answers()
        for index in 0..<20 { prober.probe(probeKey, from: loops[index % 2], into: answers) }
        let all = try #require(answers.wait(for: 20))

        #expect(all.count == 20)
        #expect(all.allSatisfy { $0.onOwnLoop })
        #expect(all.allSatisfy { $0.afterReturn })
        let first = try #require(all.first?.result.chain)
        #expect(first.chainDER.count == 2)
        #expect(all.allSatisfy { $0.result == all[0].result })
        #expect(prober.counters == .init(started: 1, cacheHits: 0, waitersAttached: 19, succeeded: 1, failed: 0))
        #expect(relay.accepted == 1)
        #expect(prober.sizes.inFlight == 0)
        #expect(prober.sizes.cached == 1)
    }

    @Test func cachedWithinTTLThenProbedAgain() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { server.stop() }
        let relay = try CountingRelay(upstreamPort: server.port)
        defer { relay.stop() }
        let loops = [try LoopThread(index: 0), try LoopThread(index: 1)]
        defer { for loop in loops { loop.stop() } }
        let clock = ManualClock()
        let prober = Prober(successTTLMilliseconds: 60_000, clock: clock.read)
        let probeKey = key(port: relay.port)

        let first = try #require(prober.probeAndWait(probeKey, from: loops[0]))
        #expect(first.result.chain != nil)
        // Within the TTL, from either loop: the cached result, no new connection, still after `probe` returned.
        clock.advance(59_000)
        for loop in loops {
            let again = try #require(prober.probeAndWait(probeKey, from: loop))
            #expect(again.result == first.result)
            #expect(again.onOwnLoop && again.afterReturn)
        }
        #expect(relay.accepted == 1)
        #expect(prober.counters.started == 1 && prober.counters.cacheHits == 2)

        // Past the TTL: a new handshake.
        clock.advance(1_000)
        #expect(prober.probeAndWait(probeKey, from: loops[1])?.result.chain != nil)
        #expect(relay.accepted == 2)

        // Invalidated: a new handshake; removeAll likewise.
        prober.invalidate(probeKey)
        #expect(prober.probeAndWait(probeKey, from: loops[0])?.result.chain != nil)
        prober.removeAll()
        #expect(prober.probeAndWait(probeKey, from: loops[0])?.result.chain != nil)
        #expect(relay.accepted == 4)
        #expect(prober.counters == .init(started: 4, cacheHits: 2, waitersAttached: 0, succeeded: 4, failed: 0))
    }

    /// A spot check probes afresh (`fresh`) whatever the cache holds: a chain replaces the cached one; a failure is
    /// answered to the check alone and never replaces a success that has not expired (the next tunnels must not be
    /// answered `probe_failed` because a check was reset). Other askers get the cached result meanwhile.
    @Test func aFreshProbeReplacesASuccessOnlyWithASuccess() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { server.stop() }
        let relay = try CountingRelay(upstreamPort: server.port)
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let clock = ManualClock()
        let prober = Prober(successTTLMilliseconds: 60_000, failureTTLMilliseconds: 5_000, clock: clock.read)
        let probeKey = key(port: relay.port)
        let first = try #require(prober.probeAndWait(probeKey, from: loop))
        #expect(first.result.chain != nil)
        #expect(prober.cachedSuccess(for: probeKey) == first.result)
        #expect(prober.cachedSuccess(for: key(port: relay.port &+ 1)) == nil)

        let again = try #require(prober.probeAndWait(probeKey, from: loop, fresh: true))
        #expect(again.result.chain != nil && relay.accepted == 2, "a handshake, though a result was cached")
        relay.stop()   // the next check's handshake fails
        let failed = try #require(prober.probeAndWait(probeKey, from: loop, fresh: true))
        #expect(failed.result.chain == nil, "the check is told")
        #expect(prober.hasResult(for: probeKey) && prober.cachedSuccess(for: probeKey) == again.result,
                "the success stays for the tunnels")
        #expect(prober.probeAndWait(probeKey, from: loop)?.result == again.result)
        #expect(prober.counters.cacheHits == 1 && prober.counters.failed == 1)
        clock.advance(60_000)
        #expect(prober.cachedSuccess(for: probeKey) == nil, "expired")
    }

    /// A pool of servers behind one address (two members with other leaves, one relay in front): a success whose
    /// flight differs from the one it replaces keeps that one beside it (`otherFlights`, newest first), never the
    /// newest's own flight again, nor another of the same member; an expired result keeps none.
    @Test func freshProbesKeepAPoolsOtherFlights() throws {
        let a = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { a.stop() }
        let b = try OpenSSLServer(["-cert", ProbePKI.path("otherhost.pem"), "-key", ProbePKI.path("otherhost.key"), "-tls1_3"])
        defer { b.stop() }
        let relay = try CountingRelay(upstreamPort: a.port)
        defer { relay.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let clock = ManualClock()
        let prober = Prober(successTTLMilliseconds: 60_000, failureTTLMilliseconds: 5_000, clock: clock.read)
        let probeKey = key(port: relay.port)

        let first = try #require(prober.probeAndWait(probeKey, from: loop)?.result.chain)
        #expect(prober.otherFlights(for: probeKey).isEmpty)
        let again = try #require(prober.probeAndWait(probeKey, from: loop, fresh: true)?.result.chain)
        #expect(Prober.sameFlight(first, again), "one member, two handshakes: \(first.serverRecordLengths) \(again.serverRecordLengths)")
        #expect(prober.otherFlights(for: probeKey).isEmpty, "the same member's flight is not kept twice")

        relay.route(to: b.port)
        let other = try #require(prober.probeAndWait(probeKey, from: loop, fresh: true)?.result.chain)
        #expect(!Prober.sameFlight(first, other))
        #expect(prober.otherFlights(for: probeKey).map(\.chainDER) == [again.chainDER])
        #expect(prober.probeAndWait(probeKey, from: loop)?.result.chain?.chainDER == other.chainDER, "the newest answers")

        relay.route(to: a.port)
        _ = try #require(prober.probeAndWait(probeKey, from: loop, fresh: true)?.result.chain)
        #expect(prober.otherFlights(for: probeKey).map(\.chainDER) == [other.chainDER], "A's own flight is not kept beside it")
        #expect(relay.accepted == 4)
        // Each kept flight expires 60 s after the probe that met it, however often the newest is refreshed.
        clock.advance(40_000)
        _ = try #require(prober.probeAndWait(probeKey, from: loop, fresh: true)?.result.chain)
        #expect(prober.otherFlights(for: probeKey).map(\.chainDER) == [other.chainDER], "kept 40 s after B's probe")
        clock.advance(21_000)
        #expect(prober.hasResult(for: probeKey), "the newest, refreshed, is still cached")
        #expect(prober.otherFlights(for: probeKey).isEmpty, "B's flight, 61 s after its probe, is not")
    }

    @Test func failureIsCachedForTheShortTTL() throws {
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let clock = ManualClock()
        let prober = Prober(successTTLMilliseconds: 300_000, failureTTLMilliseconds: 5_000, clock: clock.read)
        let probeKey = key(port: try freePort())

        #expect(prober.probeAndWait(probeKey, from: loop)?.result == .failure("connect refused"))
        clock.advance(4_999)
        #expect(prober.probeAndWait(probeKey, from: loop)?.result == .failure("connect refused"))
        #expect(prober.counters == .init(started: 1, cacheHits: 1, waitersAttached: 0, succeeded: 0, failed: 1))
        clock.advance(1)
        #expect(prober.probeAndWait(probeKey, from: loop)?.result == .failure("connect refused"))
        #expect(prober.counters.started == 2)
    }

    /// The completion says whether the key's result was cached when asked (what a tunnel's spot checks go by): not
    /// for the handshake that made it, then yes until the failure's TTL ends.
    @Test func theAnswerSaysWhetherItWasCached() throws {
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let clock = ManualClock()
        let prober = Prober(failureTTLMilliseconds: 5_000, clock: clock.read)
        let probeKey = key(port: try freePort())
        func ask() -> Bool? {
            let answer = Lock<Bool?>(nil)
            let done = DispatchSemaphore(value: 0)
            loop.loop.execute {
                prober.probe(probeKey, on: loop.loop) { _, cached in
                    answer.withLock { $0 = cached }
                    done.signal()
                }
            }
            guard done.wait(timeout: .now() + 15) == .success else { return nil }
            return answer.withLock { $0 }
        }
        #expect(ask() == false)
        #expect(ask() == true)
        clock.advance(5_000)
        #expect(ask() == false)
    }

    @Test func refusedPortFailsQuickly() throws {
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober(timeoutMilliseconds: 5_000)
        let answer = try #require(prober.probeAndWait(key(port: try freePort()), from: loop))
        #expect(answer.result == .failure("connect refused"))
        #expect(answer.seconds < 1)
        #expect(answer.onOwnLoop)
    }

    @Test func silentListenerTimesOut() throws {
        let listener = try SilentListener()
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober(timeoutMilliseconds: 500)
        let answer = try #require(prober.probeAndWait(key(port: listener.port), from: loop))
        #expect(answer.result == .failure("timed out after 500 ms"))
        #expect(answer.seconds >= 0.45 && answer.seconds < 2.5, "took \(answer.seconds) s")
        #expect(prober.counters.failed == 1)
    }

    /// Past `maxInFlight` handshakes a new key waits for a slot: it starts when one frees and gets its chain.
    /// A Certificate message over the 512 KiB a probe reads by default (the intermediate sent 1 200 times: about 565
    /// KB): with room, a second handshake with a 2 MiB limit reads it, and the room goes back; without room the result
    /// is `.oversized` (`oversized_handshake`, not `probe_failed`). Neither is cached: the chain is too large to keep,
    /// and the refusal was the proxy's state, not the server's.
    @Test func aCertificateOverTheDefaultIsReadWithRoomAndNotCached() throws {
        let intermediate = try String(contentsOfFile: ProbePKI.path("genuine.chain.pem"), encoding: .utf8)
        let chainFile = NSTemporaryDirectory() + "chainwatch-prober-large-chain-\(getpid()).pem"
        try String(repeating: intermediate, count: 1_200).write(toFile: chainFile, atomically: true, encoding: .utf8)
        defer { unlink(chainFile) }
        let server = try OpenSSLServer(["-cert", ProbePKI.path("genuine.pem"), "-key", ProbePKI.path("genuine.key"),
                                        "-cert_chain", chainFile, "-tls1_3"])
        defer { server.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }

        let none = LargeHandshakeRoom(capacity: 0)
        let refused = Prober(largeHandshakes: none)
        let answer = try #require(refused.probeAndWait(key(port: server.port), from: loop))
        guard case .oversized(let detail) = answer.result else { Issue.record("got \(answer.result)"); return }
        #expect(detail.contains("--large-handshake-memory"))
        #expect(!refused.hasResult(for: key(port: server.port)))
        #expect(none.usage.refused == 1)

        let room = LargeHandshakeRoom(capacity: 64 << 20)
        let prober = Prober(largeHandshakes: room)
        let chain = try #require(prober.probeAndWait(key(port: server.port), from: loop)?.result.chain)
        #expect(chain.chainDER.count == 1_201 && chain.chainDER.reduce(0) { $0 + $1.count } > TLSClient.defaultMaxCertificateList)
        #expect(chain.chainDER.first == (try ProbePKI.der("genuine")))
        #expect(!prober.hasResult(for: key(port: server.port)))
        #expect(room.usage.granted == 1 && room.usage.used == 0)
    }

    @Test func keysPastTheCapWaitForASlot() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { server.stop() }
        let listener = try SilentListener()
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober(timeoutMilliseconds: 800, maxInFlight: 1)
        let answers = Answers()
        prober.probe(key(port: listener.port), from: loop, into: answers)    // holds the one slot until it times out
        Thread.sleep(forTimeInterval: 0.1)
        prober.probe(key(port: server.port), from: loop, into: answers)      // waits in line
        Thread.sleep(forTimeInterval: 0.1)
        #expect(prober.sizes.inFlight == 1 && prober.sizes.queued == 1)
        let got = try #require(answers.wait(for: 2))
        #expect(got[0].result == .failure("timed out after 800 ms"))
        #expect(got[1].result.chain != nil, "\(got[1].result)")
        #expect(got[1].seconds >= 0.6)   // it started only when the slot freed
        #expect(prober.queuedTotal == 1 && prober.sizes.inFlight == 0 && prober.sizes.queued == 0)
    }

    /// One client cannot fill the probe line: past its share (a quarter of `maxInFlight`, for a line of 16 or more) its next new key is refused
    /// at once, while another client's probe still starts. Before, 200 short tunnels a second with new names to a
    /// silent server made most other clients' first TLS 1.3 contacts fail closed. A finished handshake frees the share.
    @Test func oneClientCannotFillTheProbeLine() throws {
        let silent = try SilentListener()
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        #expect(Prober(maxInFlight: 8).maxPerClient == 8, "a line under 16 is one user's")
        let prober = Prober(timeoutMilliseconds: 600, maxInFlight: 16)
        #expect(prober.maxPerClient == 4)
        let attacker: [UInt8] = [192, 0, 2, 66], other: [UInt8] = [192, 0, 2, 7]
        let answers = Answers()
        let port = silent.port
        func ask(_ name: String, _ client: [UInt8]) {
            let start = Date()
            loop.loop.execute {
                prober.probe(key(port: port, serverName: name), client: client, on: loop.loop) { result in
                    answers.add(Answer(result: result, onOwnLoop: true, afterReturn: true, seconds: Date().timeIntervalSince(start)))
                }
            }
        }
        for index in 0..<7 { ask("n\(index).attacker.test", attacker) }
        Thread.sleep(forTimeInterval: 0.1)
        ask("genuine.test", other)
        Thread.sleep(forTimeInterval: 0.1)
        #expect(prober.sizes.inFlight == 5, "the attacker's four and the other client's one")
        #expect(prober.refusedOverShareTotal == 3)
        let refused = try #require(answers.wait(for: 3, seconds: 0.5))
        #expect(refused.allSatisfy { $0.result.failureReason?.contains("its share of 16") == true && $0.seconds < 0.3 })
        let all = try #require(answers.wait(for: 8))
        #expect(all.filter { $0.result == .failure("timed out after 600 ms") }.count == 5)
        ask("again.attacker.test", attacker)   // the share came back with the timeouts
        let last = try #require(answers.wait(for: 9))
        #expect(last[8].result == .failure("timed out after 600 ms"))
    }

    /// A key that waited longer than the timeout for a slot fails (under block: fails closed) instead of waiting on.
    @Test func aKeyThatWaitedTooLongFailsWithTheReason() throws {
        let first = try SilentListener(), second = try SilentListener()
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let clock = ManualClock()
        let prober = Prober(timeoutMilliseconds: 500, maxInFlight: 1, clock: clock.read)
        let answers = Answers()
        prober.probe(key(port: first.port), from: loop, into: answers)
        Thread.sleep(forTimeInterval: 0.1)
        prober.probe(key(port: second.port), from: loop, into: answers)
        Thread.sleep(forTimeInterval: 0.1)
        clock.advance(1_000)   // the second has waited past the timeout when the first's slot frees
        let got = try #require(answers.wait(for: 2))
        #expect(got.map(\.result) == [.failure("timed out after 500 ms"),
                                       .failure("probe capacity: 1 handshakes in flight, none free within 500 ms")])
        #expect(prober.counters.started == 1 && prober.sizes.inFlight == 0)
        // The timeout is the server's, and cached; the capacity failure was the line's (other keys held it), and is
        // not: the next client of that key probes afresh instead of getting probe_failed for the failure TTL.
        #expect(prober.hasResult(for: key(port: first.port)))
        #expect(!prober.hasResult(for: key(port: second.port)))
    }

    @Test func handshakeFailureNamesTheOpenSSLError() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])   // refuses a client capped at TLS 1.2
        defer { server.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober()
        let answer = try #require(prober.probeAndWait(key(port: server.port, maxVersion: .tls1_2), from: loop))
        let reason = try #require(answer.result.failureReason)
        #expect(reason.hasPrefix("handshake failed: "), "\(reason)")
        #expect(reason == "handshake failed: tlsv1 alert protocol version")
    }

    /// A tunnel that asked and went away (client closed, tunnel freed) does not stop the probe: the prober holds
    /// what it needs, the completion still runs, and the result is cached for the next caller.
    @Test func callerFreedEarlyStillGetsItsCompletion() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { server.stop() }
        let relay = try CountingRelay(upstreamPort: server.port, delayMilliseconds: 100)
        defer { relay.stop() }
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober()
        let probeKey = key(port: relay.port)

        final class FakeTunnel { var answered = false }
        let answers = Answers()
        let freedBeforeAnswer = DispatchSemaphore(value: 0)
        loop.loop.execute {
            var tunnel: FakeTunnel? = FakeTunnel()
            weak let weakTunnel = tunnel
            prober.probe(probeKey, on: loop.loop) { [weak tunnel] result in
                tunnel?.answered = true
                answers.add(Answer(result: result, onOwnLoop: loop.isCurrent, afterReturn: weakTunnel == nil, seconds: 0))
            }
            tunnel = nil   // the tunnel is freed right after asking
            if weakTunnel == nil { freedBeforeAnswer.signal() }
        }
        #expect(freedBeforeAnswer.wait(timeout: .now() + 5) == .success)
        let answer = try #require(answers.wait(for: 1)?.first)
        #expect(answer.result.chain != nil)
        #expect(answer.onOwnLoop)
        #expect(answer.afterReturn)   // here: the tunnel was already gone when the answer came
        #expect(prober.probeAndWait(probeKey, from: loop)?.result == answer.result)
        #expect(relay.accepted == 1)
    }

    /// Every handshake's socket is closed when it reports, whatever the outcome.
    @Test func noSocketOutlivesItsProbe() throws {
        let server = try OpenSSLServer(genuine: ["-tls1_3"])
        defer { server.stop() }
        let listener = try SilentListener()
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober(timeoutMilliseconds: 100)
        func round(silent: Bool) throws {
            prober.removeAll()
            #expect(prober.probeAndWait(key(port: server.port), from: loop)?.result.chain != nil)
            #expect(prober.probeAndWait(key(port: server.port, maxVersion: .tls1_2), from: loop)?.result.chain == nil)
            #expect(prober.probeAndWait(key(port: try freePort()), from: loop)?.result.chain == nil)
            if silent { #expect(prober.probeAndWait(key(port: listener.port), from: loop)?.result.chain == nil) }
        }
        try round(silent: true)   // warm-up: whatever OpenSSL or libevent open once, lazily
        let before = openDescriptors()
        for index in 0..<10 { try round(silent: index < 2) }
        // Other tests' relay threads may still be closing their sockets: allow them a moment.
        let deadline = Date().addingTimeInterval(2)
        while openDescriptors().count > before.count, Date() < deadline { usleep(20_000) }
        let after = openDescriptors()
        #expect(after.count <= before.count, "new: \(after.subtracting(before).sorted())")
        #expect(prober.counters.started == 36)
    }

    /// `fd -> target` for each descriptor of this process (the listing's own descriptor excluded).
    private func openDescriptors() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(names.compactMap { name in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)).map { "\(name) -> \($0)" }
        })
    }

    @Test func cacheStaysWithinItsBound() throws {
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        let prober = Prober(maxEntries: 3)
        for _ in 0..<6 { _ = prober.probeAndWait(key(port: try freePort()), from: loop) }
        #expect(prober.sizes.cached <= 3)
        #expect(prober.sizes.inFlight == 0)
        #expect(prober.counters.started == 6)
    }

    @Test func cacheStaysWithinItsBytes() throws {
        let loop = try LoopThread(index: 0)
        defer { loop.stop() }
        // A refused connection's result weighs about 300 bytes; kept a minute, so none expires during the test.
        let prober = Prober(failureTTLMilliseconds: 60_000, maxBytes: 1_000)
        var keys: [ProbeKey] = []
        for _ in 0..<6 {
            keys.append(key(port: try freePort()))
            _ = prober.probeAndWait(keys.last!, from: loop)
        }
        #expect(prober.cachedBytes <= 1_000 && prober.cachedBytes > 0)
        #expect(prober.sizes.cached >= 1 && prober.sizes.cached <= 3)
        #expect(prober.hasResult(for: keys.last!))    // the oldest go first
        #expect(!prober.hasResult(for: keys.first!))
        prober.removeAll()
        #expect(prober.cachedBytes == 0)
    }
}
