import Testing
@testable import ChainwatchCore

/// The connection machine without sockets: each test plays the events an executor would report and checks the
/// actions that come out.
@Suite struct ConnectionMachineTests {
    static let connect = Array("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n".utf8)

    /// A machine with a CONNECT tunnel established (inspection started, server bytes held until told otherwise).
    static func established(_ limits: ConnectionLimits = ConnectionLimits()) -> ConnectionMachine {
        var m = ConnectionMachine(limits: limits)
        _ = m.handle(.started)
        _ = m.handle(.readable(.client, buffered: connect.count))
        _ = m.handle(.peeked(.client, connect))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let actions = m.handle(.connected)
        #expect(actions.contains(.startInspection))
        _ = m.handle(.queued(.client, 0))
        _ = m.handle(.hold(.upstream, passingUpTo: 0))
        return m
    }

    @Test func connectRequestResolvesConnectsAndAnswers200() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        #expect(m.handle(.started) == [.schedule(milliseconds: 10_000), .setReading(.client, true)])
        #expect(m.handle(.readable(.client, buffered: Self.connect.count)) == [.peek(.client, from: 0, max: RequestHeadParser.defaultLimit + 4)])
        let parsed = m.handle(.peeked(.client, Self.connect))
        #expect(parsed.first == .consume(.client, Self.connect.count))
        #expect(parsed.contains(.setReading(.client, false)))
        #expect(m.isPaused(.client, for: .awaitingUpstream))
        guard case .vet(.connect(let authority), _) = parsed.last else { Issue.record("no vet: \(parsed)"); return }
        #expect(authority == Authority(host: "example.com", port: 443))
        #expect(m.handle(.vetted(nil)) == [.resolve(authority)])
        #expect(m.handle(.resolved(addressCount: 2)) == [.schedule(milliseconds: 10_000), .connect(addressIndex: 0)])
        #expect(m.handle(.connectFailed(.failed("connection refused"))) == [.dropUpstream, .schedule(milliseconds: 10_000), .connect(addressIndex: 1)])
        let up = m.handle(.connected)
        #expect(up == [.cancelTimer, .schedule(milliseconds: 300_000), .startInspection,
                       .write(.client, HTTPWriter.connectionEstablished), .setReading(.client, true), .setReading(.upstream, true)])
        #expect(m.phase == .relaying)
    }

    @Test func partialHeadWaitsForMoreBytes() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        #expect(m.handle(.peeked(.client, Array(Self.connect.prefix(20)))) == [])
        #expect(m.phase == .readingRequest)
    }

    @Test func everyAddressFailingAnswers502WithTheLastError() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        _ = m.handle(.peeked(.client, Self.connect))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let out = m.handle(.connectFailed(.failed("connection refused")))
        #expect(out.contains(.refused(status: 502, reason: "cannot connect to example.com:443: connection refused")))
        #expect(m.phase == .lingering)
    }

    @Test func aDestinationThePolicyRefusesAnswers403WithoutConnecting() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        _ = m.handle(.peeked(.client, Self.connect))
        _ = m.handle(.vetted(nil))
        let out = m.handle(.destinationRefused("example.com:443 resolves to 169.254.169.254, link-local: not a destination"))
        #expect(out.contains(.refused(status: 403, reason: "example.com:443 resolves to 169.254.169.254, link-local: not a destination")))
        #expect(!out.contains { if case .connect = $0 { true } else { false } })
        #expect(m.phase == .lingering)
    }

    @Test func connectTimeoutAnswers504() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        _ = m.handle(.peeked(.client, Self.connect))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let out = m.handle(.timerFired(idleMilliseconds: 10_000))
        #expect(out.contains(.refused(status: 504, reason: "cannot connect to example.com:443: connect timed out")))
    }

    @Test func malformedRequestAnswers400AndLingers() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        let out = m.handle(.peeked(.client, Array("CONNECT nohostport HTTP/1.1\r\n\r\n".utf8)))
        guard case .refused(400, _) = out.first(where: { if case .refused = $0 { true } else { false } }) else {
            Issue.record("no 400: \(out)"); return
        }
        #expect(out.contains(.schedule(milliseconds: 2_000)))
        #expect(m.phase == .lingering)
        // The answer written, the client's write side is shut so it reads the answer and not a reset.
        #expect(m.handle(.queued(.client, 0)) == [.shutdownWrite(.client)])
        #expect(m.handle(.readable(.client, buffered: 10)) == [.discardInput(.client)])
        #expect(m.handle(.endOfStream(.client)) == [.cancelTimer, .close(resetting: [])])
    }

    @Test func portNotAllowedAnswers403() {
        var limits = ConnectionLimits()
        limits.allowedPorts = [8443]
        var m = ConnectionMachine(limits: limits)
        _ = m.handle(.started)
        let out = m.handle(.peeked(.client, Self.connect))
        #expect(out.contains(.refused(status: 403, reason: "CONNECT to port 443 is not allowed by --allow-port")))
    }

    @Test func plainHTTPToAPortNotAllowedAnswers403() {
        var limits = ConnectionLimits()
        limits.allowedPorts = [8443]
        var m = ConnectionMachine(limits: limits)
        _ = m.handle(.started)
        let out = m.handle(.peeked(.client, Array("GET http://example.com:6379/ HTTP/1.1\r\nHost: example.com:6379\r\n\r\n".utf8)))
        #expect(out.contains(.refused(status: 403, reason: "plain HTTP to port 6379 is not allowed by --allow-port")))
        #expect(!out.contains { if case .resolve = $0 { true } else { false } })
    }

    @Test func vettingRefusalAnswersWithItsStatus() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        _ = m.handle(.peeked(.client, Self.connect))
        let out = m.handle(.vetted(.init(status: 403, reason: "blocked by chainwatch: root_mismatch")))
        #expect(out.contains(.refused(status: 403, reason: "blocked by chainwatch: root_mismatch")))
        #expect(!out.contains(.resolve(Authority(host: "example.com", port: 443))))
    }

    @Test func eagerClientHelloIsFedAfterConnecting() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        var head = Self.connect
        head += [0x16, 0x03, 0x01]
        _ = m.handle(.readable(.client, buffered: head.count))
        _ = m.handle(.peeked(.client, head))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let out = m.handle(.connected)
        #expect(out.last == .feedInspection(.client, from: 0))
        #expect(m.handle(.inspected(.client)) == [.relay(from: .client, count: 3, eager: true)])
    }

    @Test func serverBytesAreHeldUntilTheVerdictThenReleased() {
        var m = Self.established()
        #expect(m.handle(.readable(.upstream, buffered: 100)) == [.feedInspection(.upstream, from: 0)])
        #expect(m.handle(.inspected(.upstream)) == [.takeHeldRoom(ConnectionMachine.heldRoomStep)])
        #expect(m.handle(.readable(.upstream, buffered: 150)) == [.feedInspection(.upstream, from: 100)])
        #expect(m.handle(.inspected(.upstream)) == [])
        #expect(m.handle(.decided(.release)) == [.returnHeldRoom, .relay(from: .upstream, count: 150, eager: true)])
        // After the verdict nothing is fed: bytes go straight through.
        _ = m.handle(.queued(.client, 0))
        #expect(m.handle(.readable(.upstream, buffered: 10)) == [.relay(from: .upstream, count: 10, eager: true)])
    }

    @Test func aBlockClosesWithoutPassingHeldBytes() {
        var m = Self.established()
        _ = m.handle(.readable(.upstream, buffered: 4000))
        _ = m.handle(.inspected(.upstream))
        let out = m.handle(.decided(.block("root_mismatch: not the pinned root")))
        #expect(out == [.log(.warning, "blocked: root_mismatch: not the pinned root"), .cancelTimer, .close(resetting: [])])
        #expect(m.handle(.readable(.upstream, buffered: 4000)) == [.ignored("readable(upstream) after the close")])
    }

    @Test func aVerdictDuringTheFeedRelaysOnce() {
        var m = Self.established()
        _ = m.handle(.readable(.upstream, buffered: 500))
        // The inspection decided while it was being fed: its verdict is queued before `.inspected`.
        #expect(m.handle(.decided(.release)) == [.relay(from: .upstream, count: 500, eager: true)])
        #expect(m.handle(.inspected(.upstream)) == [])
    }

    @Test func aHelloRetryRequestPassesWhileTheRestStaysHeld() {
        var m = Self.established()
        _ = m.handle(.readable(.upstream, buffered: 80))
        _ = m.handle(.hold(.upstream, passingUpTo: 50))
        #expect(m.handle(.inspected(.upstream)) == [.takeHeldRoom(ConnectionMachine.heldRoomStep), .relay(from: .upstream, count: 50, eager: true)])
        _ = m.handle(.queued(.client, 0))
        #expect(m.handle(.readable(.upstream, buffered: 90)) == [.feedInspection(.upstream, from: 30)])
        #expect(m.handle(.inspected(.upstream)) == [])
        #expect(m.handle(.decided(.release)) == [.returnHeldRoom, .relay(from: .upstream, count: 90, eager: true)])
    }

    @Test func alertRulesStopHoldingOnceTheClientHelloIsRead() {
        var m = Self.established()
        _ = m.handle(.readable(.upstream, buffered: 30))
        _ = m.handle(.inspected(.upstream))
        #expect(m.handle(.flowing(.upstream)) == [.relay(from: .upstream, count: 30, eager: true)])
    }

    @Test func heldBytesAtTheLimitPauseTheServer() {
        var limits = ConnectionLimits()
        limits.holdLimit = 1000
        var m = Self.established(limits)
        _ = m.handle(.readable(.upstream, buffered: 1200))
        #expect(m.handle(.inspected(.upstream)) == [.setReading(.upstream, false), .takeHeldRoom(ConnectionMachine.heldRoomStep)])
        #expect(m.isPaused(.upstream, for: .heldForVerdict))
        #expect(m.handle(.decided(.release)) == [.returnHeldRoom, .setReading(.upstream, true), .relay(from: .upstream, count: 1200, eager: true)])
    }

    /// A large Certificate message with room: the inspection raises that side's hold limit; reading resumes, and
    /// pauses again at the new limit. A lower limit changes nothing.
    @Test func holdUpToRaisesTheHoldLimitOfOneSide() {
        var limits = ConnectionLimits()
        limits.holdLimit = 1000
        var m = Self.established(limits)
        _ = m.handle(.readable(.upstream, buffered: 1200))
        #expect(m.handle(.inspected(.upstream)) == [.setReading(.upstream, false), .takeHeldRoom(ConnectionMachine.heldRoomStep)])
        #expect(m.handle(.holdUpTo(.upstream, bytes: 900)) == [])
        #expect(m.isPaused(.upstream, for: .heldForVerdict))
        #expect(m.handle(.holdUpTo(.upstream, bytes: 5000)) == [.setReading(.upstream, true)])
        #expect(!m.isPaused(.upstream, for: .heldForVerdict))
        _ = m.handle(.readable(.upstream, buffered: 4000))
        #expect(m.handle(.inspected(.upstream)) == [])   // under the new limit: still read
        _ = m.handle(.readable(.upstream, buffered: 5100))
        #expect(m.handle(.inspected(.upstream)) == [.setReading(.upstream, false)])
        #expect(m.handle(.decided(.release)) == [.returnHeldRoom, .setReading(.upstream, true), .relay(from: .upstream, count: 5100, eager: true)])
    }

    @Test func aFullOutputPausesTheReaderUntilItDrains() {
        var m = Self.established()
        _ = m.handle(.decided(.release))
        #expect(m.handle(.readable(.upstream, buffered: 1000)) == [.relay(from: .upstream, count: 1000, eager: true)])
        #expect(m.handle(.queued(.client, 300_000)) == [.setReading(.upstream, false), .setLowWatermark(.client, 131_072)])
        #expect(m.isPaused(.upstream, for: .peerBackedUp))
        #expect(m.handle(.drained(.client, queued: 100_000)) == [.setLowWatermark(.client, 0), .setReading(.upstream, true)])
    }

    @Test func halfClosesPassEachWayThenClose() {
        var m = Self.established()
        _ = m.handle(.decided(.release))
        #expect(m.handle(.endOfStream(.client)) == [.setReading(.client, false), .shutdownWrite(.upstream), .schedule(milliseconds: 30_000)])
        #expect(m.phase == .relaying)
        _ = m.handle(.readable(.upstream, buffered: 10))
        _ = m.handle(.queued(.client, 10))
        #expect(m.handle(.endOfStream(.upstream)) == [.setReading(.upstream, false)])   // 10 bytes still queued
        #expect(m.handle(.drained(.client, queued: 0)) == [.cancelTimer, .close(resetting: [])])
    }

    /// Each side's end reaches the inspection while it inspects (a handshake the client had not begun, or the rest of
    /// a server's, will not come), and the server's bytes held go once it releases; after the verdict there is
    /// nothing to tell.
    @Test func eachSidesEndIsToldToTheInspectionWhileItInspects() {
        var m = Self.established()
        #expect(m.handle(.endOfStream(.client)) == [.endedForInspection(.client), .setReading(.client, false), .shutdownWrite(.upstream),
                                                    .schedule(milliseconds: 30_000)])
        #expect(m.handle(.readable(.upstream, buffered: 7)) == [.feedInspection(.upstream, from: 0)])
        #expect(m.handle(.inspected(.upstream)) == [.takeHeldRoom(16_384)])   // held: no verdict yet
        #expect(m.handle(.endOfStream(.upstream)).first == .endedForInspection(.upstream))
        // Released: the 7 bytes go, and the tunnel closes once the executor says they are written (a close in the
        // same step discarded what a write had not taken: a held flight past the socket's buffer, or any bytes
        // after the first `eagerBytes`, which are not written at once).
        #expect(m.handle(.decided(.release)) == [.returnHeldRoom, .relay(from: .upstream, count: 7, eager: true)])
        #expect(m.handle(.queued(.client, 7)) == [])
        #expect(m.handle(.drained(.client, queued: 0)) == [.cancelTimer, .close(resetting: [])])

        var dropped = Self.established()   // a rule that holds: nothing unjudged passes, the tunnel closes, no block
        _ = dropped.handle(.endOfStream(.client))
        _ = dropped.handle(.readable(.upstream, buffered: 7))
        _ = dropped.handle(.inspected(.upstream))
        let closed = dropped.handle(.decided(.drop("the client ended before its hello")))
        #expect(closed.first == .log(.info, "closed: the client ended before its hello"))
        #expect(closed.last == .close(resetting: []) && !closed.contains { if case .relay = $0 { true } else { false } })

        var decided = Self.established()
        _ = decided.handle(.decided(.release))
        #expect(!decided.handle(.endOfStream(.client)).contains(.endedForInspection(.client)))
        #expect(!decided.handle(.endOfStream(.upstream)).contains(.endedForInspection(.upstream)))
    }

    @Test func endOfStreamWaitsForQueuedBytes() {
        var m = Self.established()
        _ = m.handle(.decided(.release))
        _ = m.handle(.readable(.client, buffered: 100))
        _ = m.handle(.inspected(.client))
        _ = m.handle(.queued(.upstream, 100))
        #expect(m.handle(.endOfStream(.client)) == [.setReading(.client, false), .schedule(milliseconds: 30_000)])
        #expect(m.handle(.drained(.upstream, queued: 0)) == [.shutdownWrite(.upstream)])
    }

    /// A client that half-closes while its upstream never answers held both sockets (its own in CLOSE-WAIT) for
    /// the whole idle timeout; once one side has ended, the half-closed timeout applies.
    @Test func aHalfClosedTunnelClosesAfterTheShorterTimeout() {
        var m = Self.established()
        _ = m.handle(.decided(.release))
        #expect(m.handle(.endOfStream(.client)).last == .schedule(milliseconds: 30_000))
        #expect(m.handle(.timerFired(idleMilliseconds: 10_000)) == [.schedule(milliseconds: 20_000)])
        #expect(m.handle(.timerFired(idleMilliseconds: 30_000)) == [.log(.info, "idle for 30 s, closing"), .cancelTimer, .close(resetting: [])])

        var open = Self.established()   // both sides open: the idle timeout
        _ = open.handle(.decided(.release))
        #expect(open.handle(.timerFired(idleMilliseconds: 30_000)) == [.schedule(milliseconds: 270_000)])
    }

    @Test func aResetIsPassedOnAsAReset() {
        var m = Self.established()
        _ = m.handle(.decided(.release))
        #expect(m.handle(.failed(.upstream, "connection reset by peer")) ==
                [.log(.info, "upstream reset: connection reset by peer"), .cancelTimer, .close(resetting: [.client])])
    }

    @Test func bulkDirectionsAreSplicedAfterTheVerdictOnly() {
        var limits = ConnectionLimits()
        limits.eagerBytes = 100
        var m = Self.established(limits)
        _ = m.handle(.readable(.client, buffered: 150))
        _ = m.handle(.inspected(.client))
        // Still inspecting: no splice, however much has moved.
        #expect(m.handle(.queued(.upstream, 0)) == [])
        _ = m.handle(.decided(.release))
        _ = m.handle(.readable(.client, buffered: 10))
        #expect(m.handle(.queued(.upstream, 0)) == [.setReading(.client, false), .splice(from: .client)])
        #expect(m.isPaused(.client, for: .spliced))
        #expect(m.handle(.spliceEnded(from: .client, .idle)) == [.setReading(.client, true)])
        // After an idle hand-back a burst must move `eagerBytes` again to get a pipe.
        _ = m.handle(.readable(.client, buffered: 10))
        #expect(m.handle(.queued(.upstream, 0)) == [])
    }

    @Test func noPipeMeansTheDirectionKeepsCopying() {
        var limits = ConnectionLimits()
        limits.eagerBytes = 100
        var m = Self.established(limits)
        _ = m.handle(.decided(.release))
        _ = m.handle(.readable(.upstream, buffered: 200))
        #expect(m.handle(.queued(.client, 0)) == [.setReading(.upstream, false), .splice(from: .upstream)])
        #expect(m.handle(.spliceEnded(from: .upstream, .unavailable)) == [.setReading(.upstream, true)])
    }

    @Test func noSpliceWithSpliceOff() {
        var limits = ConnectionLimits()
        limits.eagerBytes = 100
        limits.spliceBulk = false
        var m = Self.established(limits)
        _ = m.handle(.decided(.release))
        _ = m.handle(.readable(.upstream, buffered: 200))
        #expect(m.handle(.queued(.client, 0)) == [])
    }

    @Test func aSpliceErrorResetsBothSides() {
        var limits = ConnectionLimits()
        limits.eagerBytes = 100
        var m = Self.established(limits)
        _ = m.handle(.decided(.release))
        _ = m.handle(.readable(.upstream, buffered: 200))
        _ = m.handle(.queued(.client, 0))
        #expect(m.handle(.spliceEnded(from: .upstream, .error("broken pipe"))) ==
                [.log(.info, "downward splice failed: broken pipe"), .cancelTimer, .close(resetting: [.client, .upstream])])
    }

    @Test func timeouts() {
        var waiting = ConnectionMachine(limits: ConnectionLimits())
        _ = waiting.handle(.started)
        #expect(waiting.handle(.timerFired(idleMilliseconds: 10_000)).contains(.refused(status: 408, reason: "no complete request within 10 s")))

        var tunnel = Self.established()
        #expect(tunnel.handle(.timerFired(idleMilliseconds: 100_000)) == [.schedule(milliseconds: 200_000)])
        #expect(tunnel.handle(.timerFired(idleMilliseconds: 300_000)) == [.log(.info, "idle for 300 s, closing"), .cancelTimer, .close(resetting: [])])
    }

    @Test func overTheLimitIsRefusedBeforeReading() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        let out = m.refuseAtOnce(status: 503, reason: "connection limit reached (1)")
        #expect(out.first == .refused(status: 503, reason: "connection limit reached (1)"))
        #expect(m.phase == .lingering)
    }

    // MARK: - Redial: the probe before the tunnel's own handshake

    /// An established tunnel whose client sent its ClientHello (300 bytes) and whose inspection asked to redial.
    static func redialing(_ limits: ConnectionLimits = ConnectionLimits()) -> (ConnectionMachine, [ConnectionMachine.Action]) {
        var m = established(limits)
        #expect(m.handle(.readable(.client, buffered: 300)) == [.feedInspection(.client, from: 0)])
        let out = m.handle(.redial)
        #expect(m.handle(.inspected(.client)) == [.takeHeldRoom(ConnectionMachine.heldRoomStep)], "the client's bytes must wait for the upstream connection")
        return (m, out)
    }

    @Test func redialDropsTheUpstreamAndHoldsTheClientUntilReconnected() {
        var (m, dropped) = Self.redialing()
        #expect(dropped == [.dropUpstream, .setReading(.upstream, false)])
        #expect(m.redial == .waiting)
        #expect(m.isPaused(.upstream, for: .notConnected))
        #expect(m.handle(.reconnect) == [.schedule(milliseconds: 10_000), .connect(addressIndex: 0)])
        #expect(m.redial == .connecting)
        let up = m.handle(.connected)
        #expect(up == [.cancelTimer, .schedule(milliseconds: 300_000), .setReading(.upstream, true),
                       .copyForReplay(300), .relay(from: .client, count: 300, eager: true)])
        #expect(m.redial == nil)
        #expect(!up.contains(.write(.client, HTTPWriter.connectionEstablished)), "the client has its 200 already")
        // The server's bytes are still held for the verdict after the redial.
        #expect(m.handle(.readable(.upstream, buffered: 90)) == [.feedInspection(.upstream, from: 0)])
        #expect(m.handle(.inspected(.upstream)) == [])
        #expect(m.handle(.decided(.release)).contains(.relay(from: .upstream, count: 90, eager: true)))
    }

    /// A pair whose probe stalls behind the tunnel's connection: the client's hello went up on the reconnected
    /// upstream (a copy kept), nothing of the server's passed; a second redial is allowed, and the reconnect sends the
    /// copy before anything else. Once a server byte reaches the client, the copy goes and no redial is possible.
    @Test func aSecondRedialReplaysTheClientsBytes() {
        var (m, _) = Self.redialing()
        _ = m.handle(.reconnect)
        #expect(m.handle(.connected).contains(.copyForReplay(300)))
        #expect(m.replayCopy == 300)
        _ = m.handle(.readable(.upstream, buffered: 90))
        _ = m.handle(.inspected(.upstream))   // held: the server's bytes do not pass
        #expect(m.handle(.redial) == [.dropUpstream, .setReading(.upstream, false)])
        _ = m.handle(.reconnect)
        let up = m.handle(.connected)
        #expect(up.first(where: { if case .replay = $0 { true } else { false } }) == .replay(300))
        #expect(up.firstIndex(of: .replay(300))! < (up.firstIndex(of: .setReading(.upstream, true)) ?? up.count))
        #expect(!up.contains { if case .relay = $0 { true } else { false } }, "nothing new from the client to relay")
        // More client bytes are copied too, until a server byte passes.
        _ = m.handle(.readable(.client, buffered: 20))
        #expect(m.handle(.inspected(.client)).contains(.copyForReplay(20)))
        _ = m.handle(.readable(.upstream, buffered: 50))
        _ = m.handle(.inspected(.upstream))
        #expect(m.handle(.decided(.release)).contains(.dropReplayCopy))
        #expect(m.replayCopy == nil)
    }

    /// A probe beside the tunnel under a rule that holds (a spot check on a spare connection): the tunnel keeps its
    /// connection and its client's hello goes up at once, copied (`.keepReplayCopy`), so that a stall behind a
    /// one-connection server can still give the connection up and replay the hello. Too late once bytes went
    /// uncopied: then the redial is refused, as before.
    @Test func aCopyAskedForBeforeTheHelloGoesUpLetsARedialComeAfterIt() {
        var m = Self.established()
        _ = m.handle(.hold(.client, passingUpTo: 0))
        #expect(m.handle(.keepReplayCopy) == [])
        #expect(m.replayCopy == 0)
        #expect(m.handle(.readable(.client, buffered: 300)) == [.feedInspection(.client, from: 0)])
        _ = m.handle(.inspected(.client))
        #expect(m.handle(.flowing(.client)).contains(.copyForReplay(300)))
        _ = m.handle(.readable(.upstream, buffered: 90))
        _ = m.handle(.inspected(.upstream))   // held
        #expect(m.handle(.redial) == [.dropUpstream, .setReading(.upstream, false)])
        _ = m.handle(.reconnect)
        #expect(m.handle(.connected).contains(.replay(300)))

        var late = Self.established()
        _ = late.handle(.flowing(.client))
        _ = late.handle(.readable(.client, buffered: 300))
        _ = late.handle(.inspected(.client))
        #expect(late.handle(.keepReplayCopy) == [.ignored("keepReplayCopy in relaying")])
        #expect(late.handle(.redial) == [.ignored("redial once bytes have passed")])
    }

    /// The replay copy is held memory: past the room already taken it asks the held-bytes budget for more (where the
    /// process's limit and the client's quarter apply), and a copy past `replayLimit` is dropped.
    @Test func theReplayCopyTakesHeldRoom() {
        var (m, _) = Self.redialing()   // 300 client bytes held while redialing: one 16 KiB step of room
        _ = m.handle(.reconnect)
        _ = m.handle(.connected)
        _ = m.handle(.readable(.client, buffered: 20_000))
        let more = m.handle(.inspected(.client))
        #expect(more.contains(.copyForReplay(20_000)) && more.contains(.takeHeldRoom(ConnectionMachine.heldRoomStep)),
                "20 300 bytes kept: a second step of room")
        #expect(m.handle(.noHeldRoom).last == .close(resetting: []), "no room for the copy: closed, as for any held bytes")
        var (big, _) = Self.redialing()
        _ = big.handle(.reconnect)
        _ = big.handle(.connected)
        _ = big.handle(.readable(.client, buffered: ConnectionMachine.replayLimit))
        #expect(big.handle(.inspected(.client)).contains(.dropReplayCopy))
        #expect(big.replayCopy == nil)
    }

    @Test func redialReconnectsToTheAddressTheTunnelHad() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        _ = m.handle(.peeked(.client, Self.connect))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 3))
        _ = m.handle(.connectFailed(.failed("connection refused")))   // address 0 refused, address 1 answers
        _ = m.handle(.connected)
        _ = m.handle(.redial)
        #expect(m.handle(.reconnect).contains(.connect(addressIndex: 1)))
    }

    @Test func redialIsRefusedOnceBytesHavePassed() {
        var m = Self.established()
        _ = m.handle(.flowing(.upstream))
        _ = m.handle(.readable(.upstream, buffered: 10))
        _ = m.handle(.inspected(.upstream))   // 10 server bytes reached the client
        #expect(m.handle(.redial) == [.ignored("redial once bytes have passed")])
        #expect(m.redial == nil)
        #expect(m.handle(.reconnect) == [.ignored("reconnect in relaying")], "no reconnect without a redial")
    }

    @Test func blockWhileRedialingClosesWithoutReconnecting() {
        var (m, _) = Self.redialing()
        let out = m.handle(.decided(.block("untrusted_chain: forged")))
        #expect(out.contains(.close(resetting: [])))
        #expect(!out.contains { if case .connect = $0 { true } else { false } })
        #expect(m.phase == .closed)
    }

    @Test func releaseBeforeReconnectPassesTheClientOnlyOnceConnected() {
        var (m, _) = Self.redialing()
        _ = m.handle(.reconnect)
        let released = m.handle(.decided(.release))
        #expect(!released.contains { if case .relay = $0 { true } else { false } }, "no upstream to write to yet")
        #expect(m.handle(.connected).contains(.relay(from: .client, count: 300, eager: true)))
    }

    @Test func reconnectFailureOrTimeoutClosesTheClient() {
        var (failing, _) = Self.redialing()
        _ = failing.handle(.reconnect)
        let out = failing.handle(.connectFailed(.failed("connection refused")))
        #expect(out.contains(.close(resetting: [.client])))
        #expect(!out.contains { if case .refused = $0 { true } else { false } }, "the client has its 200: no status now")
        var (slow, _) = Self.redialing()
        _ = slow.handle(.reconnect)
        #expect(slow.handle(.timerFired(idleMilliseconds: 10_000)).contains(.close(resetting: [.client])))
    }

    @Test func clientBytesWhileRedialingStopAtTheHoldLimit() {
        let limits = ConnectionLimits()
        var (m, _) = Self.redialing(limits)
        let out = m.handle(.readable(.client, buffered: limits.holdLimit + 1))
        #expect(out == [.feedInspection(.client, from: 300)])
        // 256 KiB + 1 held: room up to the next step past it (16 KiB were taken for the first 300 bytes).
        #expect(m.handle(.inspected(.client)) == [.setReading(.client, false), .takeHeldRoom(limits.holdLimit)])
        #expect(m.isPaused(.client, for: .heldForVerdict))
        _ = m.handle(.reconnect)
        let up = m.handle(.connected)
        #expect(up.contains(.setReading(.client, true)))
        #expect(up.contains(.relay(from: .client, count: limits.holdLimit + 1, eager: limits.holdLimit + 1 <= limits.eagerBytes)))
    }

    /// An event the phase has no use for is named, not dropped: a resolver answering after the request was refused,
    /// a verdict for a connection whose inspection was never started, a response byte peeked while reading a request.
    @Test func eventsThatDoNotApplyAreNamed() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        #expect(m.handle(.resolved(addressCount: 1)) == [.ignored("resolved in readingRequest")])
        #expect(m.handle(.decided(.release)) == [.ignored("decided in readingRequest without an inspection")])
        #expect(m.handle(.peeked(.upstream, [1])) == [.ignored("peeked(upstream) in readingRequest")])
        #expect(m.handle(.connected) == [.ignored("connected in readingRequest")])
    }
}

extension ConnectionMachineTests {
    /// A plain-HTTP response that ends with `Connection: close`: its last bytes are relayed and the exchange finishes in
    /// the same step. The close must wait for the executor to say the bytes are written (`Connection.close` discards
    /// what is still queued). Here the head's write and the body's relay are both counted as queued, so this fails only
    /// when both are not (the relay's count alone: `theClientsEndIsToldToTheInspectionWhileItInspects`).
    @Test func aClosingExchangeWaitsForItsLastBytesToBeWritten() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        let request = Array("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n".utf8)
        _ = m.handle(.started)
        _ = m.handle(.readable(.client, buffered: request.count))
        _ = m.handle(.peeked(.client, request))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        _ = m.handle(.connected)
        _ = m.handle(.queued(.upstream, 0))
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".utf8)
        var out = m.handle(.readable(.upstream, buffered: response.count))
        for _ in 0..<4 {
            guard case .peek(.upstream, let from, let max)? = out.last else { break }
            out = m.handle(.peeked(.upstream, Array(response[min(from, response.count)..<min(response.count, from + max)])))
        }
        #expect(out.contains(.relay(from: .upstream, count: 5, eager: true)), "\(out)")
        #expect(!out.contains(.close(resetting: [])), "closed in the step that relayed the last bytes: \(out)")
        #expect(m.handle(.queued(.client, 5)).isEmpty)
        #expect(m.handle(.drained(.client, queued: 0)).last == .close(resetting: []))
    }
}
