/// What a client asked the proxy to do, decided from its request head alone.
public enum ProxyRequest: Sendable, Equatable {
    /// `CONNECT host:port`: open a tunnel.
    case connect(Authority)
    /// An absolute-form request (`GET http://host/path`): forward it to `authority`, sending `head` (rewritten).
    case forward(Authority, head: RequestHead)

    /// Methods forwarded in absolute form.
    public static let forwardedMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]

    /// A refusal: the status, and one line of text for the body and the log.
    public struct Refusal: Error, Sendable, Equatable {
        public var status: Int
        public var reason: String
        public init(status: Int, reason: String) { self.status = status; self.reason = reason }
    }

    /// Classifies a head: a tunnel, a request to forward, or a refusal with its status.
    public static func classify(_ head: RequestHead, via: String = "chainwatch") throws(Refusal) -> ProxyRequest {
        if head.method == "CONNECT" {
            guard let authority = Authority.parse(head.target) else {
                let port = head.target.split(separator: ":").last.map(String.init) ?? ""
                if head.target.contains(":"), !port.isEmpty, port.allSatisfy(\.isASCIIDigit),
                   Authority.parse(head.target.dropLast(port.count) + "443") != nil {
                    throw Refusal(status: 400, reason: "CONNECT port must be 1 to 65535, got \"\(port.prefix(20))\"")
                }
                throw Refusal(status: 400, reason: "CONNECT target must be host:port, got \"\(head.target.prefix(100))\"")
            }
            return .connect(authority)
        }
        guard forwardedMethods.contains(head.method) else {
            throw Refusal(status: 405, reason: "method \(head.method.prefix(32)) is not supported by this proxy")
        }
        let target = head.target
        guard target.lowercased().hasPrefix("http://") else {
            if target.lowercased().hasPrefix("https://") {
                throw Refusal(status: 400, reason: "https:// URLs must be requested through CONNECT")
            }
            throw Refusal(status: 400, reason: "a proxy request needs an absolute http:// URL")
        }
        let rest = target.dropFirst("http://".count)
        let slash = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authorityText = rest[..<slash]
        guard !authorityText.contains("@"), let authority = Authority.parse(authorityText, defaultPort: 80) else {
            throw Refusal(status: 400, reason: "bad host in URL")
        }
        var path = String(rest[slash...])
        if path.isEmpty { path = "/" } else if path.first == "?" { path = "/" + path }
        // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing; forwarded as HTTP/1.1, its
        // body would be framed one way here and maybe another by the upstream.
        guard head.version != "HTTP/1.0" || head.tokens(of: "Transfer-Encoding").isEmpty else {
            throw Refusal(status: 400, reason: "Transfer-Encoding in an HTTP/1.0 request (faulty framing, RFC 9112 §6.1)")
        }
        guard let framing = BodyFraming.request(head) else {
            throw Refusal(status: 400, reason: Self.framingProblem(head))
        }
        var forwarded = rewritten(head, path: path, authority: authorityText, via: via)
        // RFC 9110 §8.6: a Content-Length of one value repeated (`5, 5`, or two equal fields) goes on as one field.
        if case .length(let length) = framing, let at = forwarded.headers.firstIndex(where: { $0.name.lowercased() == "content-length" }) {
            forwarded.headers.removeAll { $0.name.lowercased() == "content-length" }
            forwarded.headers.insert(("Content-Length", String(length)), at: min(at, forwarded.headers.count))
        }
        // The rewrite adds up to three fields (Host, Via, Connection): a head at the field limit would go upstream
        // over it, where a server with the same limit (Apache's LimitRequestFields is 100 too) refuses it.
        guard forwarded.headers.count <= RequestHeadParser.maxHeaderCount else {
            throw Refusal(status: 431, reason: "the request would be forwarded with \(forwarded.headers.count) header fields, "
                          + "over the \(RequestHeadParser.maxHeaderCount) this proxy takes")
        }
        return .forward(authority, head: forwarded)
    }

    /// Why a request's body framing was refused, as its client will read it.
    static func framingProblem(_ head: RequestHead) -> String {
        let te = head.tokens(of: "Transfer-Encoding")
        let hasLength = head.headers.contains { $0.name.lowercased() == "content-length" }
        if !te.isEmpty && hasLength { return "ambiguous request body length (Content-Length and Transfer-Encoding)" }
        if !te.isEmpty { return "Transfer-Encoding '\(te.joined(separator: ", "))' does not end in chunked" }
        return "bad Content-Length (one decimal number, the same in every copy)"
    }

    /// Hop-by-hop fields (RFC 9110 §7.6.1) that a proxy must not forward, plus those named in `Connection`.
    /// `Transfer-Encoding` stays: bodies are streamed in their original coding.
    static let hopByHop: Set<String> = ["connection", "keep-alive", "proxy-connection", "proxy-authorization",
                                        "proxy-authenticate", "te", "trailer", "upgrade"]

    /// Removes hop-by-hop fields from a header list.
    public static func endToEnd(_ headers: [(name: String, value: String)]) -> [(name: String, value: String)] {
        let named = Set(headers.filter { $0.name.lowercased() == "connection" || $0.name.lowercased() == "proxy-connection" }
            .flatMap { $0.value.split(separator: ",") }
            .map { String($0).trimmedHTTPWhitespace().lowercased() })
            .subtracting(["transfer-encoding", "content-length", "host"])
        return headers.filter { !hopByHop.contains($0.name.lowercased()) && !named.contains($0.name.lowercased()) }
    }

    /// The head sent upstream: origin-form target, end-to-end fields, a Host, `Via`, and `Connection: close`
    /// (one upstream connection per request; keep-alive is kept with the client).
    static func rewritten(_ head: RequestHead, path: String, authority: Substring, via: String) -> RequestHead {
        var headers = endToEnd(head.headers)
        // RFC 9112 §3.2.2: the URL's authority wins; a different Host would let the upstream serve another site
        // than the one the policy judged.
        headers.removeAll { $0.name.lowercased() == "host" }
        headers.insert(("Host", String(authority)), at: 0)
        headers.append(("Via", "\(head.version.dropFirst("HTTP/".count)) \(via)"))
        headers.append(("Connection", "close"))
        return RequestHead(method: head.method, target: path, version: "HTTP/1.1", headers: headers)
    }

    /// Whether the client wants its connection kept after this exchange.
    public static func clientKeepsAlive(_ head: RequestHead) -> Bool {
        let tokens = head.tokens(of: "Connection") + head.tokens(of: "Proxy-Connection")
        if tokens.contains("close") { return false }
        return head.version == "HTTP/1.1" || tokens.contains("keep-alive")
    }
}

/// Serialises heads and the proxy's own short answers.
public enum HTTPWriter {
    public static func bytes(of head: RequestHead) -> [UInt8] {
        var s = "\(head.method) \(head.target) \(head.version)\r\n"
        for h in head.headers { s += "\(h.name): \(h.value)\r\n" }
        s += "\r\n"
        return Array(s.utf8)
    }

    public static func bytes(of head: ResponseHead) -> [UInt8] {
        var s = "\(head.version) \(head.status) \(head.reasonPhrase)\r\n"
        for h in head.headers { s += "\(h.name): \(h.value)\r\n" }
        s += "\r\n"
        return Array(s.utf8)
    }

    /// A complete response from the proxy itself: status line, a one-line text body, and `Connection: close`.
    public static func proxyResponse(status: Int, body: String) -> [UInt8] {
        let text = body + "\n"
        return Array("HTTP/1.1 \(status) \(reasonPhrase(status))\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(text.utf8.count)\r\nConnection: close\r\nVia: 1.1 chainwatch\r\n\r\n\(text)".utf8)
    }

    public static let connectionEstablished = Array("HTTP/1.1 200 Connection Established\r\n\r\n".utf8)

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Error"
        }
    }
}
