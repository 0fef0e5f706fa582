import Foundation
import Testing
@testable import ChainwatchCore

@Suite struct RequestHeadParserTests {
    let connect = Array("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: t\r\n\r\n".utf8)

    @Test func parsesACompleteConnectHead() throws {
        let (head, length) = try #require(try RequestHeadParser.parse(connect))
        #expect(head.method == "CONNECT")
        #expect(head.target == "example.com:443")
        #expect(head.value(of: "user-agent") == "t")
        #expect(length == connect.count)
    }

    @Test func everyTruncationNeedsMoreBytes() throws {
        for n in 0..<connect.count {
            #expect(try RequestHeadParser.parse(connect[..<n]) == nil, "prefix \(n)")
        }
    }

    @Test func leavesBytesAfterTheHeadAlone() throws {
        let bytes = connect + [0x16, 0x03, 0x01]
        let (_, length) = try #require(try RequestHeadParser.parse(bytes))
        #expect(length == connect.count)
    }

    /// 101 short fields: under the byte limit, over the field count. It was called "request header exceeds 16384
    /// bytes" (the head was 1.5 KB).
    @Test func moreFieldsThanTheCountAre431SaidAsSuch() {
        let fields = (0...RequestHeadParser.maxHeaderCount).map { "X-\($0): v\r\n" }.joined()
        let head = Array("GET http://a.test/ HTTP/1.1\r\n\(fields)\r\n".utf8)
        #expect(head.count < RequestHeadParser.defaultLimit)
        #expect(throws: RequestHeadError.tooManyFields(limit: RequestHeadParser.maxHeaderCount)) { try RequestHeadParser.parse(head) }
        let error = RequestHeadError.tooManyFields(limit: RequestHeadParser.maxHeaderCount)
        #expect(error.status == 431 && error.detail == "request header has more than 100 fields")
    }

    @Test func oversizedHeadIs431() {
        let big = Array("GET http://a/ HTTP/1.1\r\nX: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 20_000)
        #expect(throws: RequestHeadError.tooLarge(limit: RequestHeadParser.defaultLimit)) { try RequestHeadParser.parse(big) }
    }

    @Test(arguments: [
        "GET\r\n\r\n", "GET / HTTP/2.0\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\n folded: x\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
    ])
    func malformedHeadsAre400(text: String) {
        #expect(throws: RequestHeadError.self) { try RequestHeadParser.parse(Array(text.utf8)) }
        do { _ = try RequestHeadParser.parse(Array(text.utf8)) } catch { #expect(error.status == 400) }
    }

    @Test func aTLSClientHelloIsRejectedAtOnce() {
        #expect(throws: RequestHeadError.self) { try RequestHeadParser.parse([0x16, 0x03, 0x01, 0x00]) }
    }
}

@Suite struct AuthorityTests {
    @Test func parsesNamesV4AndBracketedV6() {
        #expect(Authority.parse("Example.COM.:443") == Authority(host: "example.com", port: 443))
        #expect(Authority.parse("127.0.0.1:8443") == Authority(host: "127.0.0.1", port: 8443))
        #expect(Authority.parse("[::1]:443") == Authority(host: "::1", port: 443))
        #expect(Authority.parse("[::1]:443")?.description == "[::1]:443")
        #expect(Authority.parse("example.com", defaultPort: 80) == Authority(host: "example.com", port: 80))
        #expect(Authority.parse("EXAMPLE.com:00443") == Authority(host: "example.com", port: 443))
        #expect(Authority.parse("[FE80::1]:8443") == Authority(host: "fe80::1", port: 8443))
        #expect(Authority.parse("[::ffff:1.2.3.4]:65535") == Authority(host: "::ffff:1.2.3.4", port: 65535))
        #expect(Authority.parse("a_b-c.test.", defaultPort: 443) == Authority(host: "a_b-c.test", port: 443))
        #expect(Authority.parse("example.com:443"[...]) == Authority(host: "example.com", port: 443))   // a Substring
    }

    /// A DNS name is at most 253 bytes, its labels at most 63: longer went to the resolver (a 502 that echoed it).
    @Test func namesLongerThanDNSAllowsAreRefused() {
        let label63 = String(repeating: "a", count: 63)
        let longest = [label63, label63, label63, String(repeating: "b", count: 61)].joined(separator: ".")   // 253
        #expect(Authority.parse("\(label63).test:443") != nil)
        #expect(Authority.parse("\(longest):443")?.host.utf8.count == 253)
        #expect(Authority.parse("\(longest).:443") != nil, "one trailing dot off first")
        #expect(Authority.parse("\(label63)a.test:443") == nil)
        #expect(Authority.parse("\(longest)b:443") == nil)
        #expect(Authority.parse(String(repeating: "a", count: 3_000) + ":443") == nil)
    }

    /// Only ASCII: a name with a non-ASCII letter, fullwidth digits in an IPv6 literal or a port, a NUL.
    @Test(arguments: ["exämple.com:443", "[\u{FF21}\u{FF22}::1]:443", "example.com:\u{FF14}43", "example.com\u{0}:443",
                      "example.com:00000", "example.com:+443", "example.com:-1", "[::1]:", "[]:443", "[1.2.3.4]:443"])
    func rejectsWhatIsNotPlainASCII(text: String) {
        #expect(Authority.parse(text) == nil)
    }

    @Test(arguments: ["example.com", ":443", "example.com:", "example.com:0", "example.com:65536", "[::1", "::1:443",
                      "[zz]:1", "a b:1", "example.com:44x", "[::1]443"])
    func rejectsBadTargets(text: String) {
        #expect(Authority.parse(text) == nil)
    }
}

@Suite struct ProxyRequestTests {
    func head(_ text: String) throws -> RequestHead { try #require(try RequestHeadParser.parse(Array(text.utf8))).head }

    @Test func absoluteFormIsRewrittenToOriginForm() throws {
        let h = try head("GET http://Example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nProxy-Connection: keep-alive\r\nConnection: X-Drop\r\nX-Drop: 1\r\nX-Keep: 2\r\n\r\n")
        guard case .forward(let authority, let out) = try ProxyRequest.classify(h) else { Issue.record("not forwarded"); return }
        #expect(authority == Authority(host: "example.com", port: 8080))
        #expect(out.target == "/a?b=1")
        #expect(out.value(of: "X-Keep") == "2")
        #expect(out.value(of: "X-Drop") == nil)
        #expect(out.value(of: "Proxy-Connection") == nil)
        #expect(out.value(of: "Via") == "1.1 chainwatch")
        #expect(out.value(of: "Connection") == "close")
    }

    @Test func theURLsAuthorityReplacesTheClientsHost() throws {
        guard case .forward(_, let out) = try ProxyRequest.classify(try head("GET http://other.test/ HTTP/1.1\r\nHost: bank.test\r\n\r\n")) else { return }
        #expect(out.headers.filter { $0.name.lowercased() == "host" }.map(\.value) == ["other.test"])
    }

    @Test func missingPathAndHostAreFilledIn() throws {
        guard case .forward(_, let out) = try ProxyRequest.classify(try head("GET http://a.test HTTP/1.0\r\n\r\n")) else { return }
        #expect(out.target == "/")
        #expect(out.value(of: "Host") == "a.test")
        #expect(out.value(of: "Via") == "1.0 chainwatch")
    }

    /// The status a head is refused with, or nil when it is accepted.
    func refusalStatus(_ text: String) throws -> Int? {
        let h = try head(text)
        do throws(ProxyRequest.Refusal) {
            _ = try ProxyRequest.classify(h)
            return nil
        } catch {
            return error.status
        }
    }

    @Test func refusals() throws {
        #expect(try refusalStatus("TRACE http://a/ HTTP/1.1\r\n\r\n") == 405)
        #expect(try refusalStatus("GET /x HTTP/1.1\r\n\r\n") == 400)
        #expect(try refusalStatus("GET https://a/ HTTP/1.1\r\n\r\n") == 400)
        #expect(try refusalStatus("GET http://u@a/ HTTP/1.1\r\n\r\n") == 400)
        #expect(try refusalStatus("POST http://a/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n") == 400)
        #expect(try refusalStatus("CONNECT a:b HTTP/1.1\r\n\r\n") == 400)
        #expect(try refusalStatus("CONNECT a:443 HTTP/1.1\r\n\r\n") == nil)
        // A port out of range says so (it was called a target that is not host:port).
        let zero = try head("CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n")
        do throws(ProxyRequest.Refusal) { _ = try ProxyRequest.classify(zero); Issue.record("accepted") } catch {
            #expect(error.status == 400 && error.reason.contains("port must be 1 to 65535"), "\(error.reason)")
        }
    }

    /// Framing a proxy must not pass on as it came (an operator review sent each through): Transfer-Encoding in an
    /// HTTP/1.0 request is faulty framing (RFC 9112 §6.1), refused; a Content-Length repeated with one value goes on
    /// as one field (RFC 9110 §8.6); a Content-Length that is no number says so.
    @Test func framingThatCannotBeForwardedAsSent() throws {
        #expect(try refusalStatus("POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400)
        #expect(try refusalStatus("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == nil)
        for repeated in ["Content-Length: 5, 5\r\n", "Content-Length: 5\r\nContent-Length: 5\r\n"] {
            guard case .forward(_, let out) = try ProxyRequest.classify(try head("POST http://a/ HTTP/1.1\r\n\(repeated)\r\n")) else {
                Issue.record("not forwarded"); continue
            }
            #expect(out.headers.filter { $0.name.lowercased() == "content-length" }.map(\.value) == ["5"])
        }
        let bad = try head("POST http://a/ HTTP/1.1\r\nContent-Length: abc\r\n\r\n")
        do throws(ProxyRequest.Refusal) {
            _ = try ProxyRequest.classify(bad)
            Issue.record("accepted")
        } catch {
            #expect(error.status == 400 && error.reason.contains("bad Content-Length"), "\(error.reason)")
        }
    }

    @Test func keepAliveRules() throws {
        #expect(ProxyRequest.clientKeepsAlive(try head("GET http://a/ HTTP/1.1\r\n\r\n")))
        #expect(!ProxyRequest.clientKeepsAlive(try head("GET http://a/ HTTP/1.1\r\nConnection: close\r\n\r\n")))
        #expect(!ProxyRequest.clientKeepsAlive(try head("GET http://a/ HTTP/1.0\r\n\r\n")))
        #expect(ProxyRequest.clientKeepsAlive(try head("GET http://a/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n")))
    }
}

@Suite struct BodyScannerTests {
    @Test func fixedLengthStopsAtTheEnd() throws {
        var s = BodyScanner(.length(5))
        #expect(try s.consume(Array("abc".utf8)) == 3)
        #expect(try s.consume(Array("deGET".utf8)) == 2)
        #expect(s.isComplete)
    }

    @Test func chunkedWithExtensionsAndTrailersDripFed() throws {
        let body = Array("4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n".utf8)
        let next = Array("GET".utf8)
        var whole = BodyScanner(.chunked)
        #expect(try whole.consume(body + next) == body.count)
        #expect(whole.isComplete)
        var drip = BodyScanner(.chunked)
        var used = 0
        for b in body + next where !drip.isComplete { used += try drip.consume([b]) }
        #expect(used == body.count)
    }

    /// A request's chunked body (`strict`) must end its lines in CRLF: a bare LF another parser may read otherwise
    /// is refused; a response's is read leniently, as before.
    @Test(arguments: ["4\nWiki\r\n0\r\n\r\n", "4\r\nWiki\n0\r\n\r\n", "4\r\nWiki\r\n0\n\r\n", "4\r\nWiki\r\n0\r\nT: x\n\r\n"])
    func aBareLineFeedInARequestsChunkedBodyIsRefused(_ body: String) throws {
        var strict = BodyScanner(.chunked, strict: true)
        #expect(throws: BodyScanner.ScanError.bareLineFeed) { try strict.consume(Array(body.utf8)) }
        var lenient = BodyScanner(.chunked)
        #expect(try lenient.consume(Array(body.utf8)) == body.utf8.count)
        #expect(lenient.isComplete)
        var proper = BodyScanner(.chunked, strict: true)
        let crlf = body.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try proper.consume(Array(crlf.utf8)) == crlf.utf8.count && proper.isComplete)
    }

    @Test func badChunkSizeIsAnError() {
        var s = BodyScanner(.chunked)
        #expect(throws: BodyScanner.ScanError.badChunkSize) { try s.consume(Array("zz\r\n".utf8)) }
        var t = BodyScanner(.chunked)
        #expect(throws: BodyScanner.ScanError.badChunkTerminator) { try t.consume(Array("1\r\nab".utf8)) }
        var u = BodyScanner(.chunked)   // a CR inside the size line would let the proxy and the client disagree on 0x1 vs 0x10
        #expect(throws: BodyScanner.ScanError.badChunkSize) { try u.consume(Array("1\r0\r\n".utf8)) }
    }

    @Test func responseFramingRules() throws {
        let r = { (text: String) in try #require(try ResponseHead.parse(Array(text.utf8))).head }
        #expect(BodyFraming.response(try r("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n"), requestMethod: "GET") == .length(7))
        #expect(BodyFraming.response(try r("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n"), requestMethod: "HEAD") == .length(0))
        #expect(BodyFraming.response(try r("HTTP/1.1 204 No Content\r\n\r\n"), requestMethod: "GET") == .length(0))
        #expect(BodyFraming.response(try r("HTTP/1.1 200 OK\r\n\r\n"), requestMethod: "GET") == .untilClose)
        #expect(BodyFraming.response(try r("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), requestMethod: "GET") == .chunked)
        #expect(BodyFraming.response(try r("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), requestMethod: "GET") == nil)
    }

    /// `Fixtures/fuzz/request-forwarded-over-field-limit`: a GET in absolute form with 100 header fields, the most
    /// the parser takes, and no Host. Rewritten for its upstream it gained Host, Via and Connection: 103 fields, a head
    /// this proxy itself (and Apache, LimitRequestFields 100) refuses. Now it is refused here, 431, with the count.
    @Test func aRequestThatWouldBeForwardedOverTheFieldLimitIs431() throws {
        let (head, _) = try #require(try RequestHeadParser.parse(try FuzzFixture.bytes("request-forwarded-over-field-limit")))
        #expect(head.headers.count == RequestHeadParser.maxHeaderCount)
        do throws(ProxyRequest.Refusal) {
            _ = try ProxyRequest.classify(head)
            Issue.record("forwarded")
        } catch {
            #expect(error.status == 431 && error.reason.contains("103 header fields"), "\(error)")
        }
        // With a Host (replaced, not added) and 97 more fields: forwarded with exactly the limit; one more is refused.
        func forwarded(extraFields n: Int) throws -> RequestHead? {
            let fields = (0..<n).map { "X-Field-\($0): \($0)\r\n" }.joined()
            let text = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\(fields)\r\n"
            let (head, _) = try #require(try RequestHeadParser.parse(Array(text.utf8)))
            guard case .forward(_, let out)? = try? ProxyRequest.classify(head) else { return nil }
            return out
        }
        #expect(try forwarded(extraFields: RequestHeadParser.maxHeaderCount - 3)?.headers.count == RequestHeadParser.maxHeaderCount)
        #expect(try forwarded(extraFields: RequestHeadParser.maxHeaderCount - 2) == nil)
    }

    /// `Fixtures/fuzz/request-te-kelvin-sign`: curl's chunked upload with `Transfer-Encoding: chun\u{212A}ed`, a KELVIN
    /// SIGN for the k. Unicode lowercasing made it `chunked`, so the proxy framed a chunked body that a server reading
    /// bytes does not (and, in a response, kept the client connection while the client read until close). Now
    /// tokens are read as bytes: the request is refused, the response read until close.
    @Test func transferCodingsAreReadAsBytes() throws {
        let (head, _) = try #require(try RequestHeadParser.parse(try FuzzFixture.bytes("request-te-kelvin-sign")))
        #expect(head.tokens(of: "transfer-encoding") == ["chun\u{212A}ed"])
        #expect(BodyFraming.request(head) == nil)
        let response = ResponseHead(version: "HTTP/1.1", status: 200, reasonPhrase: "OK", headers: head.headers)
        #expect(BodyFraming.response(response, requestMethod: "POST") == .untilClose)
        // A comma is a separator even where Unicode joins it to the mark before it (U+0600, a prepended mark).
        let joined = try #require(try RequestHeadParser.parse(Array("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip\u{600},chunked\r\n\r\n".utf8)))
        #expect(joined.head.tokens(of: "Transfer-Encoding") == ["gzip\u{600}", "chunked"])
        #expect(BodyFraming.request(joined.head) == .chunked)
        #expect(RequestHead(method: "GET", target: "/", version: "HTTP/1.1", headers: [("Connection", " Keep-Alive ,\tClose")])
            .tokens(of: "connection") == ["keep-alive", "close"])
    }
}

@Suite struct CIDRTests {
    @Test func matching() throws {
        let net = try #require(CIDR("10.1.0.0/16"))
        #expect(net.contains([10, 1, 200, 3]))
        #expect(!net.contains([10, 2, 0, 1]))
        #expect(net.contains([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 1, 0, 9]))   // v4-mapped
        let v6 = try #require(CIDR("fd00::/8"))
        #expect(v6.contains(IPAddressText.parse("fd12::1")!))
        #expect(!v6.contains(IPAddressText.parse("fe80::1")!))
        #expect(CIDR("::1")!.contains(IPAddressText.parse("::1")!))
        #expect(CIDR("1.2.3.4/33") == nil)
        #expect(CIDR("1.2.3/8") == nil)
        #expect(CIDR("::ffff:1.2.3.4")!.description == "::ffff:102:304/128")
    }
}

/// Numeric hosts other than the dotted quad mean different addresses to different parsers (0177.0.0.1 is 127.0.0.1 to
/// inet_aton and curl, 177.0.0.1 to a decimal reader): refused, so a policy or a destination rule cannot be dodged.
@Test(arguments: ["0177.0.0.1:443", "2130706433:443", "127.1:443", "0x7f.0.0.1:443", "127.0.0.01:443", "1.2.3.4.5:443",
                  "a.0x10:443"])
func ambiguousNumericHostsAreRefused(target: String) {
    #expect(Authority.parse(target) == nil)
}

@Test(arguments: ["127.0.0.1:443", "example.com:443", "1e100.net:443", "host-1.example:8443", "[::1]:443", "a.123b:443",
                  "[::ffff:127.0.0.1]:443"])
func ordinaryHostsStillParse(target: String) {
    #expect(Authority.parse(target) != nil)
}
