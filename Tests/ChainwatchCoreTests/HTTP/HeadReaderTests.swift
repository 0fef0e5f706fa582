import Testing
@testable import ChainwatchCore

/// A head read in pieces gives what the whole head gives, and the machine asks for each byte once.
@Suite struct HeadReaderTests {
    static let request = Array("GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\nX-A: 1\r\n\r\nbody".utf8)
    static let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-B: 2\n\nbody".utf8)

    /// Feeds `bytes` in pieces cut at `cuts`, as a peek from `nextPeek` would deliver them.
    static func pieces(_ bytes: [UInt8], every size: Int) -> [ArraySlice<UInt8>] {
        stride(from: 0, to: bytes.count, by: size).map { bytes[$0..<min(bytes.count, $0 + size)] }
    }

    @Test(arguments: [1, 2, 3, 5, 64])
    func aRequestHeadInPiecesIsTheWholeHead(size: Int) throws {
        let whole = try #require(try RequestHeadParser.parse(Self.request))
        var reader = HeadReader(limit: RequestHeadParser.defaultLimit)
        var offset = 0
        var found: (head: RequestHead, length: Int)?
        for piece in Self.pieces(Self.request, every: size) where found == nil {
            #expect(reader.nextPeek.from == offset, "the next peek starts past the bytes held")
            found = try reader.request(adding: piece)
            offset += piece.count
        }
        let got = try #require(found)
        #expect(got.head == whole.head && got.length == whole.length)
        #expect(reader.bytes.isEmpty, "a reader starts afresh after a head")
    }

    @Test(arguments: [1, 2, 3, 7])
    func aResponseHeadInPiecesIsTheWholeHead(size: Int) throws {
        let whole = try #require(try ResponseHead.parse(Self.response))
        var reader = HeadReader(limit: ExchangeMachine.maxResponseHead)
        var found: (head: ResponseHead, length: Int)?
        for piece in Self.pieces(Self.response, every: size) where found == nil {
            found = try reader.response(adding: piece)
        }
        let got = try #require(found)
        #expect(got.length == whole.length && got.head.status == 200)
        #expect(got.head.headers.map(\.name) == ["Content-Length", "X-B"])
    }

    @Test func aBlankLineSplitAcrossPiecesIsFound() throws {
        for cut in ["GET / HTTP/1.1\r\nHost: a\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r", "GET / HTTP/1.1\r\nHost: a\r"] {
            let full = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            var reader = HeadReader(limit: 1024)
            #expect(try reader.request(adding: Array(cut.utf8)) == nil)
            let got = try #require(try reader.request(adding: full[cut.utf8.count...]), "cut after \(cut.debugDescription)")
            #expect(got.length == full.count)
        }
    }

    @Test func limitsAndEarlyErrorsHold() {
        var big = HeadReader(limit: 100)
        #expect(throws: RequestHeadError.tooLarge(limit: 100)) {
            for _ in 0..<200 { _ = try big.request(adding: [UInt8(ascii: "a")]) }
        }
        #expect(big.bytes.isEmpty, "and starts afresh")
        var tls = HeadReader(limit: 100)
        #expect(throws: RequestHeadError.malformed("request does not start with a method")) { try tls.request(adding: [0x16, 0x03]) }
        var smtp = HeadReader(limit: 100)
        #expect(throws: RequestHeadError.malformed("response does not start with HTTP/")) {
            for b in "220 smtp".utf8 { _ = try smtp.response(adding: [b]) }
        }
        var capped = HeadReader(limit: 10)
        _ = try? capped.request(adding: Array("GET /aaaa".utf8))
        #expect(capped.nextPeek.max == 14 - 9, "a peek never asks past the limit and the four bytes that show it")
    }

    /// The machine reading a head sent one byte per segment: each peek starts where the last ended and takes only
    /// the new byte, so the executor copies every byte once (it copied all of them on every read).
    @Test func theMachineCopiesEachHeadByteOnce() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        let head = Array("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n".utf8)
        var copied = 0
        for n in 1...head.count {
            let out = m.handle(.readable(.client, buffered: n))
            guard case .peek(.client, let from, let max)? = out.first else { Issue.record("no peek at \(n): \(out)"); return }
            #expect(from == n - 1)
            let piece = Array(head[from..<min(n, from + max)])
            copied += piece.count
            _ = m.handle(.peeked(.client, piece))
        }
        #expect(copied == head.count)
        #expect(m.phase == .connecting)
    }
}
