/// A request to the admin listener, as its routes read it.
public struct AdminRequest: Sendable, Equatable {
    /// `GET`, `HEAD` or `POST` (the exchange answers any other method itself, `501`).
    public var method: String
    /// The path without the query.
    public var path: String
    /// The query's `name=value` pairs, decoded (`%XX`, and `+` as a space).
    public var query: [String: String]
    /// The `Host`, `Origin` and `X-Chainwatch-Admin` headers, when sent (`AdminRequestCheck` reads them).
    public var host: String?
    public var origin: String?
    public var adminHeader: String?

    public init(method: String, path: String, query: [String: String] = [:], host: String? = nil,
                origin: String? = nil, adminHeader: String? = nil) {
        self.method = method; self.path = path; self.query = query
        self.host = host; self.origin = origin; self.adminHeader = adminHeader
    }

    /// The request a parsed head makes.
    public init(head: RequestHead) {
        let (path, query) = Self.split(head.target)
        self.init(method: head.method, path: path, query: query, host: head.value(of: "Host"),
                  origin: head.value(of: "Origin"), adminHeader: head.value(of: AdminRequestCheck.headerName))
    }

    /// Splits a request target into its path and decoded query pairs (a later pair of the same name wins).
    static func split(_ target: String) -> (String, [String: String]) {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                query[decode(kv[0])] = kv.count == 2 ? decode(kv[1]) : ""
            }
        }
        return (String(parts[0]), query)
    }

    /// `%XX` (two hex digits) as its byte and `+` as a space; anything else, a lone `%` included, as it is.
    static func decode(_ text: Substring) -> String {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = BodyScanner.hexValue(bytes[i + 1]),
               let low = BodyScanner.hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
                continue
            }
            out.append(bytes[i] == UInt8(ascii: "+") ? UInt8(ascii: " ") : bytes[i])
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The admin listener's answer to one request.
public struct AdminResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8]) {
        self.status = status; self.contentType = contentType; self.body = body
    }
    public init(status: Int, text: String) { self.init(status: status, body: Array(text.utf8)) }

    /// The bytes sent: status line, `Content-Type`, `Cache-Control: no-store`, `Content-Length`, `Connection:
    /// close`, and the body unless the request was a `HEAD` (its `Content-Length` is the body's all the same).
    public func bytes(forHead: Bool = false) -> [UInt8] {
        var out = Array(("HTTP/1.1 \(status) \(HTTPWriter.reasonPhrase(status))\r\nContent-Type: \(contentType)\r\n"
            + "Cache-Control: no-store\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n").utf8)
        if !forHead { out += body }
        return out
    }
}

/// One connection to the admin listener, from its first byte to its close: one request, one answer with
/// `Connection: close`. Pure: bytes and events in, actions out; the executor owns the socket and the timer.
///
/// The request head must be complete, and its body (at most `bodyLimit` bytes, framing included) in, within
/// `headDeadlineMilliseconds` of the accept, or the connection gets a `408` and is closed: a head dripped a byte every
/// few seconds holds a connection for hours otherwise (issue 26, item 10). A head over `headLimit` is `431`, one that
/// is not HTTP/1.x (or frames its body ambiguously) `400`, a body over `bodyLimit` `413`, a method other than GET,
/// HEAD and POST `501`. Bytes after the request (pipelined requests, junk) are read and discarded, never answered.
/// Once the answer is written the write side is shut and the client's bytes are discarded until it closes (so that
/// closing with unread bytes does not reset the answer away), within `answerDeadlineMilliseconds`.
public struct AdminExchange: Sendable {
    /// The largest request head (evhttp's limit here before).
    public static let headLimit = 8192
    /// The largest request body (read and discarded: no route takes one).
    public static let bodyLimit = 4096
    /// From the accept to the end of the request (head and body).
    public static let headDeadlineMilliseconds = 5_000
    /// From the answer to the close: writing it, then discarding until the client closes.
    public static let answerDeadlineMilliseconds = 5_000

    public enum Event: Sendable, Equatable {
        /// Bytes read from the client, in order (at most `wantedBytes` of each read are needed; the executor
        /// discards the rest).
        case received([UInt8])
        /// The client closed its sending side.
        case endOfStream
        /// A socket error: nothing more can be sent or read.
        case failed
        /// Everything written has left for the socket.
        case outputDrained
        /// The deadline the executor armed (`headDeadlineMilliseconds` at the accept, then `.rearm`) passed.
        case deadlinePassed
    }

    public enum Action: Sendable, Equatable {
        /// Answer this request (the routes), then tell the exchange with `answered(_:)`.
        case serve(AdminRequest)
        case write([UInt8])
        /// Replace the deadline with one this far from now.
        case rearm(milliseconds: Int)
        /// No more bytes will be sent (FIN).
        case shutdownWrite
        case close
    }

    enum State: Sendable {
        case readingHead(HeadReader)
        /// The head is in and its body is being read (`taken` bytes so far, framing included), to be discarded.
        case readingBody(AdminRequest, BodyScanner, taken: Int)
        /// `serve` is out; `answered` comes next. `peerEnded`: the client has closed its sending side.
        case serving(AdminRequest, peerEnded: Bool)
        /// The answer is being written.
        case writing(peerEnded: Bool)
        /// The answer is out and the write side shut: discarding until the client closes.
        case lingering
        case closed
    }

    private(set) var state = State.readingHead(HeadReader(limit: headLimit))

    public init() {}

    public var isClosed: Bool { if case .closed = state { true } else { false } }

    /// How many bytes of the next read the exchange needs (0: none; the executor discards what it reads).
    public var wantedBytes: Int {
        switch state {
        case .readingHead(let reader): reader.nextPeek.max + Self.bodyLimit   // a body may follow in the same read
        case .readingBody(_, _, let taken): Self.bodyLimit + 1 - taken   // one more shows a body over the limit
        case .serving, .writing, .lingering, .closed: 0
        }
    }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .received(let bytes): received(bytes)
        case .endOfStream: endOfStream()
        case .failed: close()
        case .outputDrained: outputDrained()
        case .deadlinePassed: deadlinePassed()
        }
    }

    /// The routes' answer to the request of the last `serve`.
    public mutating func answered(_ response: AdminResponse) -> [Action] {
        guard case .serving(let request, let peerEnded) = state else { return [] }   // closed meanwhile: nobody to answer
        return answer(response, forHead: request.method == "HEAD", peerEnded: peerEnded)
    }

    // MARK: - Events

    private mutating func received(_ bytes: [UInt8]) -> [Action] {
        switch state {
        case .readingHead(var reader):
            let held = reader.nextPeek.from
            let parsed: (head: RequestHead, length: Int)?
            do {
                parsed = try reader.request(adding: bytes)
            } catch {
                return answer(AdminResponse(status: error.status, text: error.detail + "\n"), forHead: false)
            }
            guard let (head, length) = parsed else {
                state = .readingHead(reader)
                return []
            }
            return headComplete(head, following: bytes.dropFirst(max(0, length - held)))
        case .readingBody(let request, let scanner, let taken):
            return body(bytes[...], of: request, scanner, taken: taken)
        case .serving, .writing, .lingering, .closed:
            return []   // after the request: discarded
        }
    }

    private mutating func headComplete(_ head: RequestHead, following: ArraySlice<UInt8>) -> [Action] {
        let forHead = head.method == "HEAD"
        guard ["GET", "HEAD", "POST"].contains(head.method) else {
            return answer(AdminResponse(status: 501, text: "\(head.method.prefix(20)): use GET, HEAD or POST\n"), forHead: forHead)
        }
        // One Host, one Origin, one X-Chainwatch-Admin: the checks read the first, so a second could disagree.
        for name in ["Host", "Origin", AdminRequestCheck.headerName]
        where head.headers.lazy.filter({ $0.name.lowercased() == name.lowercased() }).count > 1 {
            return answer(AdminResponse(status: 400, text: "\(name) given twice\n"), forHead: forHead)
        }
        guard let framing = BodyFraming.request(head) else {
            return answer(AdminResponse(status: 400, text: "ambiguous body framing (Content-Length, Transfer-Encoding)\n"), forHead: forHead)
        }
        if case .length(let n) = framing, n > Self.bodyLimit {
            return answer(AdminResponse(status: 413, text: "a body over \(Self.bodyLimit) bytes\n"), forHead: forHead)
        }
        return body(following, of: AdminRequest(head: head), BodyScanner(framing), taken: 0)
    }

    /// Reads the body (`Content-Length` or chunked, at most `bodyLimit` bytes with its framing) and discards it.
    private mutating func body(_ bytes: ArraySlice<UInt8>, of request: AdminRequest, _ scanner: BodyScanner,
                               taken: Int) -> [Action] {
        var scanner = scanner
        var taken = taken
        if !scanner.isComplete {
            do { taken += try scanner.consume(bytes.prefix(Self.bodyLimit + 1 - taken)) } catch {   // one more: over the limit
                return answer(AdminResponse(status: 400, text: "bad chunked body\n"), forHead: request.method == "HEAD")
            }
        }
        guard taken <= Self.bodyLimit else {
            return answer(AdminResponse(status: 413, text: "a body over \(Self.bodyLimit) bytes\n"), forHead: request.method == "HEAD")
        }
        guard scanner.isComplete else {
            state = .readingBody(request, scanner, taken: taken)
            return []
        }
        return serve(request)
    }

    private mutating func serve(_ request: AdminRequest) -> [Action] {
        state = .serving(request, peerEnded: false)
        return [.serve(request)]
    }

    private mutating func answer(_ response: AdminResponse, forHead: Bool, peerEnded: Bool = false) -> [Action] {
        state = .writing(peerEnded: peerEnded)
        return [.rearm(milliseconds: Self.answerDeadlineMilliseconds), .write(response.bytes(forHead: forHead))]
    }

    private mutating func endOfStream() -> [Action] {
        switch state {
        case .readingHead, .readingBody:
            return close()   // gone before its request was whole: nobody to answer
        case .serving(let request, _):
            state = .serving(request, peerEnded: true)   // a half-closed client still reads its answer
            return []
        case .writing:
            state = .writing(peerEnded: true)
            return []
        case .lingering:
            return close()
        case .closed:
            return []
        }
    }

    private mutating func outputDrained() -> [Action] {
        guard case .writing(let peerEnded) = state else { return [] }   // nothing was being written
        if peerEnded { return close() }
        state = .lingering
        return [.shutdownWrite]
    }

    private mutating func deadlinePassed() -> [Action] {
        switch state {
        case .readingHead, .readingBody:
            state = .closed
            let text = "the request was not complete within \(Self.headDeadlineMilliseconds / 1000) s\n"
            return [.write(AdminResponse(status: 408, text: text).bytes()), .close]
        case .serving, .writing, .lingering:
            return close()
        case .closed:
            return []
        }
    }

    private mutating func close() -> [Action] {
        if case .closed = state { return [] }
        state = .closed
        return [.close]
    }
}

/// How many connections the admin listener holds at once. Past `limit`, a new connection gets `refusal` and is
/// closed at once, so a flood of connections (each held up to the exchange's deadlines) costs at most `limit`
/// descriptors and never starves the proxy's loops. Pure.
public struct AdminConnectionCap: Sendable, Equatable {
    public static let defaultLimit = 64
    /// Connections one client address may hold at once: one client cannot take every slot and starve the kubelet's
    /// or the operator's `/healthz`, `/metrics` and `ctl` (a slot is held until the answer or the head deadline).
    public static let defaultPerClient = 8

    public let limit: Int
    public let perClient: Int
    public private(set) var open = 0
    private var byClient: [[UInt8]: Int] = [:]

    public init(limit: Int = defaultLimit, perClient: Int = defaultPerClient) {
        self.limit = limit
        self.perClient = perClient
    }

    /// A connection from `client` (its address bytes) was accepted: true when it is held (counted until `closed`),
    /// false when it is to be refused (the listener's slots, or the client's share of them, are all taken).
    public mutating func admit(client: [UInt8]) -> Bool {
        guard open < limit, byClient[client, default: 0] < perClient else { return false }
        open += 1
        byClient[client, default: 0] += 1
        return true
    }

    /// A held connection from `client` closed.
    public mutating func closed(client: [UInt8]) {
        open = max(0, open - 1)
        switch byClient[client] {
        case let count? where count > 1: byClient[client] = count - 1
        case .some: byClient[client] = nil
        case nil: break
        }
    }

    /// What a refused connection is sent before its close.
    public var refusal: [UInt8] {
        AdminResponse(status: 503, text: "the admin listener holds \(limit) connections, or \(perClient) of this client's, already; try again\n").bytes()
    }
}
