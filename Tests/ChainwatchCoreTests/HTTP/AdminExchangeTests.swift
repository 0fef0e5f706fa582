import Testing
@testable import ChainwatchCore

/// One connection to the admin listener, fed bytes and events as its executor would (issue 26, item 10: a dripped
/// head held a connection for hours, and nothing capped how many were held).
@Suite struct AdminExchangeTests {
    typealias Action = AdminExchange.Action

    /// Feeds each read as the executor does (at most `wantedBytes` of it) and returns every action, answering each
    /// `serve` with `answer`.
    static func feed(_ reads: [[UInt8]], to exchange: inout AdminExchange,
                     answer: AdminResponse = AdminResponse(status: 200, text: "ok\n")) -> [Action] {
        var all: [Action] = []
        for read in reads {
            let wanted = Array(read.prefix(exchange.wantedBytes))
            let actions = wanted.isEmpty ? [] : exchange.handle(.received(wanted))
            all += actions
            if case .serve = actions.last { all += exchange.answered(answer) }
        }
        return all
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    static func served(_ actions: [Action]) -> [AdminRequest] {
        actions.compactMap { if case .serve(let request) = $0 { request } else { nil } }
    }

    static func written(_ actions: [Action]) -> String {
        String(decoding: actions.flatMap { action -> [UInt8] in if case .write(let bytes) = action { bytes } else { [] } }, as: UTF8.self)
    }

    static let request = "GET /known-bad/clear?host=a%2Eb+c&port=8443 HTTP/1.1\r\nHost: 127.0.0.1:9128\r\nX-Chainwatch-Admin: 1\r\n\r\n"

    @Test func aRequestIsServedOnceAnsweredAndClosedAfterTheClientCloses() {
        var m = AdminExchange()
        let actions = Self.feed([Self.bytes(Self.request)], to: &m)
        #expect(Self.served(actions) == [AdminRequest(method: "GET", path: "/known-bad/clear", query: ["host": "a.b c", "port": "8443"],
                                                      host: "127.0.0.1:9128", adminHeader: "1")])
        let answer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nContent-Length: 3\r\n"
            + "Connection: close\r\n\r\nok\n"
        #expect(Array(actions.dropFirst()) == [.rearm(milliseconds: AdminExchange.answerDeadlineMilliseconds), .write(Self.bytes(answer))])
        #expect(m.wantedBytes == 0, "nothing after the request is read into the exchange")
        #expect(m.handle(.outputDrained) == [.shutdownWrite])
        #expect(m.handle(.received(Self.bytes("junk"))) == [], "discarded while lingering")
        #expect(m.handle(.endOfStream) == [.close])
        #expect(m.isClosed)
        #expect(m.handle(.deadlinePassed) == [])
    }

    @Test func aHeadFedAByteAtATimeGivesTheSameRequest() {
        var whole = AdminExchange(), dripped = AdminExchange()
        let once = Self.served(Self.feed([Self.bytes(Self.request)], to: &whole))
        let byByte = Self.served(Self.feed(Self.bytes(Self.request).map { [$0] }, to: &dripped))
        #expect(once.count == 1 && byByte == once)
    }

    @Test func aHeadIncompleteAtTheDeadlineGets408AndIsClosed() {
        var m = AdminExchange()
        #expect(Self.feed([Self.bytes("GET /healthz HTTP/1.1\r\nHo")], to: &m) == [])
        let actions = m.handle(.deadlinePassed)
        #expect(actions.last == .close)
        #expect(Self.written(actions).hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
        #expect(m.isClosed)
        #expect(m.handle(.received(Self.bytes("st: x\r\n\r\n"))) == [], "nothing served after the cut")
    }

    @Test func aBodyNotInByTheDeadlineIsCutToo() {
        var m = AdminExchange()
        #expect(Self.feed([Self.bytes("POST /probes/clear HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345")], to: &m) == [])
        #expect(m.wantedBytes == AdminExchange.bodyLimit + 1 - 5)
        let actions = m.handle(.deadlinePassed)
        #expect(Self.written(actions).hasPrefix("HTTP/1.1 408 ") && actions.last == .close)
    }

    @Test func aSmallBodyIsReadAndDiscardedBeforeTheAnswer() {
        var m = AdminExchange()
        let actions = Self.feed([Self.bytes("POST /probes/clear HTTP/1.1\r\nContent-Length: 6\r\n\r\nab"), Self.bytes("cd"),
                                 Self.bytes("efGET / HTTP/1.1\r\n\r\n")], to: &m)
        #expect(Self.served(actions).map(\.path) == ["/probes/clear"])
        var chunked = AdminExchange()
        let pieces = Self.bytes("POST /verdicts/clear HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n")
        let served = Self.served(Self.feed(pieces.map { [$0] }, to: &chunked))
        #expect(served.map(\.path) == ["/verdicts/clear"], "a chunked body, a byte at a time")
    }

    @Test func anOversizeHeadIs431AndNeverServed() {
        var m = AdminExchange()
        let head = "GET / HTTP/1.1\r\nX-Fill: " + String(repeating: "a", count: AdminExchange.headLimit) + "\r\n\r\n"
        let actions = Self.feed(Self.bytes(head).chunks(of: 1000), to: &m)
        #expect(Self.served(actions).isEmpty)
        #expect(Self.written(actions).hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"))
    }

    @Test func pipelinedRequestsAndJunkAfterTheFirstAreNeverServed() {
        var m = AdminExchange()
        let reads = [Self.bytes(Self.request + "POST /known-bad/clear HTTP/1.1\r\nX-Chainwatch-Admin: 1\r\n\r\n\u{16}\u{03}\u{01}"),
                     Self.bytes("DELETE / HTTP/1.1\r\n\r\n"), [0, 0xFF, 0x0A, 0x0A]]
        let actions = Self.feed(reads, to: &m)
        #expect(Self.served(actions).map(\.path) == ["/known-bad/clear"])
        #expect(Self.served(actions).first?.method == "GET")
    }

    @Test func malformedHeadsAndUnsupportedRequestsGetTheirStatus() {
        let cases: [(String, String)] = [
            ("\u{16}\u{03}\u{01}\u{02}", "400 Bad Request"),
            ("GET /metrics HTTP/2.0\r\n\r\n", "400 Bad Request"),
            ("PUT /metrics HTTP/1.1\r\n\r\n", "501 Not Implemented"),
            ("OPTIONS /known-bad/clear HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n", "501 Not Implemented"),
            ("POST /probes/clear HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "400 Bad Request"),
            ("POST /probes/clear HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", "400 Bad Request"),
            ("POST /probes/clear HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400 Bad Request"),
            ("POST /probes/clear HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1001\r\n" + String(repeating: "a", count: 4200), "413 Content Too Large"),
            ("POST /probes/clear HTTP/1.1\r\nContent-Length: 4097\r\n\r\n", "413 Content Too Large"),
            ("POST /probes/clear HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "400 Bad Request"),
            ("POST /probes/clear HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400 Bad Request"),
            ("GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n", "400 Bad Request"),
            ("POST /known-bad/clear HTTP/1.1\r\nOrigin: null\r\norigin: null\r\n\r\n", "400 Bad Request"),
            ("POST /known-bad/clear HTTP/1.1\r\nX-Chainwatch-Admin: 1\r\nx-chainwatch-admin: 1\r\n\r\n", "400 Bad Request"),
        ]
        for (request, status) in cases {
            var m = AdminExchange()
            let actions = Self.feed([Self.bytes(request)], to: &m)
            #expect(Self.served(actions).isEmpty, "\(request)")
            #expect(Self.written(actions).hasPrefix("HTTP/1.1 \(status)\r\n"), "\(request)")
        }
    }

    @Test func aHeadRequestGetsTheLengthWithoutTheBody() {
        var m = AdminExchange()
        let actions = Self.feed([Self.bytes("HEAD /metrics HTTP/1.0\r\n\r\n")], to: &m, answer: AdminResponse(status: 200, text: "0123456789"))
        #expect(Self.written(actions).hasSuffix("Content-Length: 10\r\nConnection: close\r\n\r\n"))
    }

    @Test func aClientGoneBeforeItsRequestIsClosedAndOneHalfClosedAfterItIsAnswered() {
        var gone = AdminExchange()
        _ = Self.feed([Self.bytes("GET /hea")], to: &gone)
        #expect(gone.handle(.endOfStream) == [.close])

        var halfClosed = AdminExchange()
        _ = halfClosed.handle(.received(Self.bytes("GET /healthz HTTP/1.0\r\n\r\n")))
        #expect(halfClosed.handle(.endOfStream) == [], "it still reads the answer")
        let actions = halfClosed.answered(AdminResponse(status: 200, text: "ok\n"))
        #expect(Self.written(actions).hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(halfClosed.handle(.outputDrained) == [.close])
    }

    @Test func aClientThatDoesNotReadTheAnswerIsClosedAtTheAnswerDeadline() {
        var m = AdminExchange()
        _ = Self.feed([Self.bytes(Self.request)], to: &m)
        #expect(m.handle(.deadlinePassed) == [.close])
        var lingering = AdminExchange()
        _ = Self.feed([Self.bytes(Self.request)], to: &lingering)
        _ = lingering.handle(.outputDrained)
        #expect(lingering.handle(.deadlinePassed) == [.close])
        var failed = AdminExchange()
        #expect(failed.handle(.failed) == [.close] && failed.handle(.failed) == [])
    }

    @Test func theCapHoldsItsLimitAndASlotFreesAtAClose() {
        var cap = AdminConnectionCap(limit: 3, perClient: 3)
        let one: [UInt8] = [10, 0, 0, 1]
        #expect((0..<5).map { _ in cap.admit(client: one) } == [true, true, true, false, false])
        cap.closed(client: one)
        #expect(cap.admit(client: one) && !cap.admit(client: one))
        #expect(cap.open == 3)
        #expect(String(decoding: cap.refusal, as: UTF8.self).hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(AdminConnectionCap().limit == 64 && AdminConnectionCap().perClient == 8)
    }

    /// One client address holds at most its share: the others (the kubelet, the operator) still get slots.
    @Test func oneClientHoldsAtMostItsShare() {
        var cap = AdminConnectionCap(limit: 10, perClient: 4)
        let greedy: [UInt8] = [10, 0, 0, 1], other: [UInt8] = [10, 0, 0, 2]
        #expect((0..<6).map { _ in cap.admit(client: greedy) } == [true, true, true, true, false, false])
        #expect((0..<4).allSatisfy { _ in cap.admit(client: other) })
        cap.closed(client: greedy)
        #expect(cap.admit(client: greedy) && !cap.admit(client: greedy))
        #expect(cap.admit(client: [10, 0, 0, 3]) && cap.admit(client: [10, 0, 0, 3]))
        #expect(cap.open == 10 && !cap.admit(client: [10, 0, 0, 4]), "the listener's own limit still holds")
    }

    @Test func queryDecoding() {
        #expect(AdminRequest.split("/a?x=%41%2b+b&y&z=%zz%&=v&x=2").1 == ["x": "2", "y": "", "z": "%zz%", "": "v"])
        #expect(AdminRequest.split("/a?x=%41%2b+b").1 == ["x": "A+ b"])
        #expect(AdminRequest.split("/a").0 == "/a" && AdminRequest.split("/a").1.isEmpty)
    }
}

extension Array {
    fileprivate func chunks(of size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
