/// One plain-HTTP exchange (an absolute-form request forwarded to its origin): the request head and body going up,
/// interim responses, the final response head and its body coming down, and whether the client connection can
/// carry the next request. Pure; `ConnectionMachine` drives it with the bytes it peeks and turns its results
/// into actions.
public struct ExchangeMachine: Sendable {
    /// The request as forwarded (hop-by-hop fields removed, origin-form target).
    public let request: RequestHead
    public let method: String
    /// `HTTP/1.0` clients get no interim (1xx) responses.
    public let clientVersion: String
    public private(set) var keepAlive: Bool
    public private(set) var requestBody: BodyScanner
    public private(set) var responseBody: BodyScanner?
    public private(set) var interimResponses = 0
    /// The response head read so far (each head: interim ones, then the final one).
    public private(set) var responseHead = HeadReader(limit: maxResponseHead)
    let limits: ConnectionLimits

    /// The longest response head read.
    public static let maxResponseHead = 64 * 1024

    public init(request: RequestHead, originalHead: RequestHead, limits: ConnectionLimits) {
        self.request = request
        method = originalHead.method
        clientVersion = originalHead.version
        keepAlive = ProxyRequest.clientKeepsAlive(originalHead)
        requestBody = BodyScanner(BodyFraming.request(originalHead) ?? .length(0), strict: true)
        self.limits = limits
    }

    var requestHeadBytes: [UInt8] { HTTPWriter.bytes(of: request) }
    /// Whether the final response head has been read (after it, failures can only reset the client).
    public var responseStarted: Bool { responseBody != nil }

    /// What reading response bytes gave.
    enum ResponseStep {
        /// Consume `headLength` bytes and write `head` to the client (an interim head when `interim`).
        case head(ResponseHead, headLength: Int, interim: Bool)
        /// Move `count` body bytes to the client.
        case body(count: Int)
        /// Needs more bytes.
        case wait
        case malformedHead(String)
        case ambiguousLength
        case tooManyInterim
        case malformedBody(String)
    }

    /// The next step for the response bytes in `bytes`: while a head is read, the bytes after those `responseHead`
    /// holds (`responseHead.nextPeek`); in the body, the start of upstream's input.
    mutating func nextResponseStep(_ bytes: ArraySlice<UInt8>) -> ResponseStep {
        guard var body = responseBody else {
            let parsed: (head: ResponseHead, length: Int)?
            do { parsed = try responseHead.response(adding: bytes) } catch {
                return .malformedHead(error.detail(of: "response"))
            }
            guard let (head, length) = parsed else { return .wait }
            guard let framing = BodyFraming.response(head, requestMethod: method) else { return .ambiguousLength }
            var headers = ProxyRequest.endToEnd(head.headers)
            if !head.tokens(of: "Transfer-Encoding").isEmpty {
                // Transfer-Encoding overrides Content-Length, and a proxy removes the latter (RFC 9112 §6.3): a
                // client downstream must not pick the other framing.
                headers.removeAll { $0.name.lowercased() == "content-length" }
            }
            let reason = Self.reasonPhrase(head.reasonPhrase)
            if (100..<200).contains(head.status) {
                // A few interim responses are normal (100 Continue, 103 Early Hints); an endless stream is an attack
                // on the proxy's memory.
                interimResponses += 1
                guard interimResponses <= limits.maxInterimResponses else { return .tooManyInterim }
                let interim = ResponseHead(version: "HTTP/1.1", status: head.status, reasonPhrase: reason, headers: headers)
                return .head(interim, headLength: length, interim: true)
            }
            if framing == .untilClose { keepAlive = false }
            headers.append(("Via", "1.1 chainwatch"))
            headers.append(("Connection", keepAlive ? "keep-alive" : "close"))
            responseBody = BodyScanner(framing)
            let final = ResponseHead(version: "HTTP/1.1", status: head.status, reasonPhrase: reason, headers: headers)
            return .head(final, headLength: length, interim: false)
        }
        guard !bytes.isEmpty else { return .wait }
        do {
            let used = try body.consume(bytes)
            responseBody = body
            return used == 0 ? .wait : .body(count: used)
        } catch {
            return .malformedBody("\(error)")
        }
    }

    /// The reason phrase as RFC 9112 §4 allows it (tab, space, visible characters, obs-text): a CR, NUL or ESC from
    /// the upstream is dropped, not passed to the client.
    static func reasonPhrase(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.filter { ($0.value >= 0x20 || $0 == "\t") && $0.value != 0x7F }))
    }

    /// How many of `bytes` (the start of the client's input) belong to the request body.
    mutating func requestBodyBytes(_ bytes: ArraySlice<UInt8>) throws(BodyScanner.ScanError) -> Int {
        try requestBody.consume(bytes)
    }

    /// The upstream closed: whether that ends the response normally.
    mutating func upstreamClosed() -> Bool {
        guard let body = responseBody, body.endsAtClose || body.isComplete else { return false }
        keepAlive = false
        return true
    }
}
