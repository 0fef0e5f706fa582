import Testing
@testable import ChainwatchCore

/// Plain-HTTP exchanges through the connection machine, without sockets.
@Suite struct ExchangeMachineTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// A machine whose GET is forwarded and whose upstream is connected.
    static func forwarding(_ request: String = "GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\n\r\n") -> (ConnectionMachine, [ConnectionMachine.Action]) {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        let head = bytes(request)
        _ = m.handle(.readable(.client, buffered: head.count))
        _ = m.handle(.peeked(.client, head))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let connected = m.handle(.connected)
        return (m, connected)
    }

    /// Plays the executor for upstream bytes `bytes` arriving at once: answers each peek from a buffer that
    /// consumes and relays drain, until the machine asks for nothing more. Every action, in order.
    static func deliver(_ bytes: [UInt8], to m: inout ConnectionMachine) -> [ConnectionMachine.Action] {
        var buffer = bytes
        var all: [ConnectionMachine.Action] = []
        var pending = m.handle(.readable(.upstream, buffered: buffer.count))
        while !pending.isEmpty {
            all += pending
            var next: [ConnectionMachine.Action] = []
            for action in pending {
                switch action {
                case .consume(.upstream, let n), .relay(from: .upstream, let n, _):
                    buffer.removeFirst(min(n, buffer.count))
                case .peek(.upstream, let from, let max):
                    let end = min(buffer.count, from + max)
                    next += m.handle(.peeked(.upstream, from < end ? Array(buffer[from..<end]) : []))
                default:
                    break
                }
            }
            pending = next
        }
        return all
    }

    @Test func requestHeadIsRewrittenAndSent() {
        let (m, out) = Self.forwarding()
        #expect(m.phase == .exchanging)
        guard case .write(.upstream, let head) = out.first(where: { if case .write(.upstream, _) = $0 { true } else { false } }) else {
            Issue.record("no head written: \(out)"); return
        }
        let text = String(decoding: head, as: UTF8.self)
        #expect(text.hasPrefix("GET /a HTTP/1.1\r\n"))
        #expect(text.contains("Via: 1.1 chainwatch"))
    }

    @Test func responseIsForwardedAndTheConnectionKeptAlive() {
        var (m, _) = Self.forwarding()
        let response = Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        let out = Self.deliver(response, to: &m).filter { if case .peek = $0 { false } else { true } }
        let headLength = response.count - 5
        #expect(out.first == .consume(.upstream, headLength))
        guard case .write(.client, let head) = out.dropFirst().first else { Issue.record("no head: \(out)"); return }
        let text = String(decoding: head, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.contains("Connection: keep-alive"))
        #expect(out.contains(.relay(from: .upstream, count: 5, eager: true)))
        #expect(out.contains(.dropUpstream))
        #expect(out.contains(.schedule(milliseconds: 10_000)))
        #expect(m.phase == .readingRequest)
        #expect(m.exchangesServed == 1)
    }

    /// The head the client gets for `response` (its head and first body bytes).
    static func forwardedHead(_ response: String) -> String? {
        var (m, _) = Self.forwarding()
        let bytes = Self.bytes(response)
        _ = m.handle(.readable(.upstream, buffered: bytes.count))
        let out = m.handle(.peeked(.upstream, bytes))
        guard case .write(.client, let head) = out.first(where: { if case .write(.client, _) = $0 { true } else { false } }) else {
            return nil
        }
        return String(decoding: head, as: UTF8.self)
    }

    @Test func contentLengthBesideTransferEncodingIsRemoved() throws {
        let head = try #require(Self.forwardedHead("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
        #expect(head.contains("Transfer-Encoding: chunked"))
        #expect(!head.lowercased().contains("content-length"), "RFC 9112 6.3: a proxy removes Content-Length")
        let plain = try #require(Self.forwardedHead("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
        #expect(plain.contains("Content-Length: 5"))
    }

    @Test func controlCharactersInTheReasonPhraseAreDropped() throws {
        let head = try #require(Self.forwardedHead("HTTP/1.1 200 O\u{0}K\u{1B}[2J\rX\tY\r\nContent-Length: 0\r\n\r\n"))
        #expect(head.hasPrefix("HTTP/1.1 200 OK[2JX\tY\r\n"))
        #expect(!head.contains("\u{1B}") && !head.contains("\u{0}"))
    }

    @Test func aPipelinedRequestWaitsForTheResponse() {
        var (m, _) = Self.forwarding()
        #expect(m.isPaused(.client, for: .exchangeInProgress))
        let response = Self.bytes("HTTP/1.1 204 No Content\r\n\r\n")
        _ = m.handle(.readable(.client, buffered: 40))   // the next request, already here
        _ = m.handle(.readable(.upstream, buffered: response.count))
        let out = m.handle(.peeked(.upstream, response))
        #expect(out.last == .peek(.client, from: 0, max: RequestHeadParser.defaultLimit + 4))
    }

    @Test func closeFramedResponseEndsTheConnection() {
        var (m, _) = Self.forwarding()
        let response = Self.bytes("HTTP/1.1 200 OK\r\n\r\nstream")
        _ = m.handle(.readable(.upstream, buffered: response.count))
        let out = m.handle(.peeked(.upstream, response))
        guard case .write(.client, let head) = out.dropFirst().first else { Issue.record("no head: \(out)"); return }
        #expect(String(decoding: head, as: UTF8.self).contains("Connection: close"))
        _ = m.handle(.queued(.client, 6))
        #expect(m.handle(.endOfStream(.upstream)).contains(.dropUpstream))
        #expect(m.handle(.drained(.client, queued: 0)) == [.cancelTimer, .close(resetting: [])])
    }

    @Test func upstreamClosingBeforeAResponseIs502() {
        var (m, _) = Self.forwarding()
        let out = m.handle(.endOfStream(.upstream))
        #expect(out.contains(.refused(status: 502, reason: "upstream closed the connection without a response")))
    }

    @Test func upstreamClosingMidBodyResetsTheClient() {
        var (m, _) = Self.forwarding()
        let response = Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
        _ = m.handle(.peeked(.upstream, response))
        #expect(m.handle(.endOfStream(.upstream)) == [.log(.info, "upstream closed mid-response"), .cancelTimer, .close(resetting: [.client])])
    }

    @Test func malformedResponseIs502() {
        var (m, _) = Self.forwarding()
        let out = m.handle(.peeked(.upstream, Self.bytes("SMTP ready\r\n\r\n")))
        #expect(out.contains { if case .refused(502, _) = $0 { true } else { false } })
    }

    /// An upstream's response head over the limit, or over the field count, is named as the response's (it was
    /// called "request header exceeds 65536 bytes": the error type is shared with the request's head).
    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 70_000) + "\r\n\r\n", "response header exceeds 65536 bytes"),
        ("HTTP/1.1 200 OK\r\n" + (0...RequestHeadParser.maxHeaderCount).map { "X-\($0): v\r\n" }.joined() + "\r\n",
         "response header has more than 100 fields"),
    ])
    func anOversizedResponseHeadIsCalledAResponses(response: String, detail: String) {
        var (m, _) = Self.forwarding()
        let out = Self.deliver(Self.bytes(response), to: &m)
        #expect(out.contains(.refused(status: 502, reason: "upstream sent a malformed response: \(detail)")), "\(out.prefix(6))")
    }

    @Test func interimResponsesAreBoundedAndSkippedForHTTP10() {
        var (m, _) = Self.forwarding("GET http://example.com/ HTTP/1.0\r\nHost: example.com\r\n\r\n")
        let interim = Self.bytes("HTTP/1.1 103 Early Hints\r\n\r\n")
        let one = m.handle(.peeked(.upstream, interim))
        #expect(one == [.consume(.upstream, interim.count)])   // an HTTP/1.0 client gets no interim head
        var flood: [UInt8] = []
        for _ in 0..<9 { flood += interim }
        let out = Self.deliver(flood, to: &m)
        #expect(out.suffix(2) == [.cancelTimer, .close(resetting: [.client])])
    }

    /// A response head dripped a byte at a time reset the idle timer with each byte; once begun, it must be complete
    /// within the request timeout. A server still computing (no byte yet) gets the idle timeout.
    @Test func aBegunResponseHeadHasADeadline() {
        var (m, _) = Self.forwarding()
        #expect(m.handle(.timerFired(idleMilliseconds: 100_000)) == [.schedule(milliseconds: 200_000)], "no byte yet: idle rules")
        let start = Self.bytes("HTTP/1.1 200 OK\r\n")
        _ = m.handle(.readable(.upstream, buffered: start.count))
        #expect(m.handle(.peeked(.upstream, start)) == [.schedule(milliseconds: 10_000)])
        #expect(m.handle(.readable(.upstream, buffered: start.count + 1)) == [.peek(.upstream, from: start.count, max: ExchangeMachine.maxResponseHead + 4 - start.count)])
        _ = m.handle(.peeked(.upstream, Self.bytes("X")))
        let out = m.handle(.timerFired(idleMilliseconds: 0))
        #expect(out.contains(.refused(status: 504, reason: "upstream response head not complete within 10 s of its first byte")))

        var (done, _) = Self.forwarding()
        _ = done.handle(.peeked(.upstream, start))
        let rest = Self.bytes("Content-Length: 10\r\n\r\n")
        _ = done.handle(.readable(.upstream, buffered: start.count + rest.count))
        #expect(done.handle(.peeked(.upstream, rest)).contains(.schedule(milliseconds: 300_000)), "a complete head: the idle timer again")
        #expect(done.handle(.timerFired(idleMilliseconds: 20_000)) == [.schedule(milliseconds: 280_000)])
    }

    @Test func chunkedRequestBodyIsForwardedAndAMalformedOneIs400() {
        var (m, _) = Self.forwarding("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(!m.isPaused(.client, for: .exchangeInProgress))
        let body = Self.bytes("5\r\nhello\r\n0\r\n\r\n")
        let out = m.handle(.peeked(.client, body))
        #expect(out.first == .relay(from: .client, count: body.count, eager: true))
        #expect(m.isPaused(.client, for: .exchangeInProgress))

        var (bad, _) = Self.forwarding("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n")
        let refused = bad.handle(.peeked(.client, Self.bytes("zz\r\n")))
        #expect(refused.contains { if case .refused(400, _) = $0 { true } else { false } })
    }
}
