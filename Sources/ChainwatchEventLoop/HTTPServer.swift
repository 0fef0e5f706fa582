internal import CLibevent
import ChainwatchLock
import Glibc

/// A small HTTP/1.1 server on a loop (libevent's evhttp): for the admin endpoints, never for proxied traffic. Owns its
/// listening socket and its `evhttp`. Loop thread only. Requests are small and answered at once: heads and bodies
/// are capped, and a connection idle for 10 s is closed.
public final class HTTPServer {
    public struct Request: Sendable {
        public var method: String
        /// The path without the query.
        public var path: String
        /// The query's `name=value` pairs, decoded.
        public var query: [String: String]
        public var peer: SocketAddress?
        /// The `Host`, `Origin` and `X-Chainwatch-Admin` headers, when sent (the admin listener's checks).
        public var host: String?
        public var origin: String?
        public var adminHeader: String?
    }

    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]
        public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8]) {
            self.status = status; self.contentType = contentType; self.body = body
        }
        public init(status: Int, text: String) { self.init(status: status, body: Array(text.utf8)) }
    }

    private var http: OpaquePointer?   // evhttp *
    private var socket: Int32 = -1
    private let handler: (Request) -> Response
    public let address: SocketAddress
    /// evhttp's listener (owned by `http`), paused while accepting fails for want of descriptors.
    private var listener: OpaquePointer?   // evconnlistener *
    private var acceptFailures = AcceptBackoff()
    private var backoff: Timer?
    private let log: (String) -> Void

    /// Binds `address` (no SO_REUSEPORT: one process owns it) and serves each request with `handler`.
    /// `log` gets a line when accepting fails (out of descriptors), once per burst (`AcceptBackoff`).
    public init(loop: EventLoop, address: SocketAddress, log: @escaping (String) -> Void = { _ in },
                handler: @escaping (Request) -> Response) throws(EventLoopError) {
        self.handler = handler
        self.log = log
        let fd = Socket.stream(family: address.family)
        guard fd >= 0 else { throw .fromErrno("socket") }
        socket = fd
        Socket.set(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        guard address.withSockaddr({ sa, len in bind(fd, sa, len) }) == 0, listen(fd, 64) == 0 else {
            let error = EventLoopError(call: "bind \(address)", errno: Glibc.errno)
            Glibc.close(fd)
            throw error
        }
        // The port the kernel chose for port 0.
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> SocketAddress? in
                getsockname(fd, sa, &length) == 0 ? SocketAddress(sa, length: length) : nil
            }
        }
        self.address = bound ?? address
        guard let http = evhttp_new(loop.base) else { Glibc.close(fd); throw .fromErrno("evhttp_new") }
        self.http = http
        evhttp_set_timeout(http, 10)
        evhttp_set_max_headers_size(http, 8192)
        evhttp_set_max_body_size(http, 4096)
        evhttp_set_allowed_methods(http, UInt16(EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_POST.rawValue | EVHTTP_REQ_HEAD.rawValue))
        evhttp_set_gencb(http, { request, ctx in
            guard let request, let ctx else { return }
            Unmanaged<HTTPServer>.fromOpaque(ctx).takeUnretainedValue().serve(request)
        }, Unmanaged.passUnretained(self).toOpaque())
        guard let bound = evhttp_accept_socket_with_handle(http, fd) else {
            evhttp_free(http)
            self.http = nil
            Glibc.close(fd)
            throw .fromErrno("evhttp_accept_socket")
        }
        // Without an error callback libevent logs every failed accept and retries at once: out of descriptors, the
        // admin loop spun and wrote millions of lines. Pause accepting instead, and say so once per burst.
        listener = evhttp_bound_socket_get_listener(bound)
        backoff = Timer(loop: loop) { [unowned self] in
            if let listener { evconnlistener_enable(listener) }
        }
        // The callback's argument is evhttp's own (its accept callback shares it): servers are found by listener.
        if let listener {
            let me = UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())
            Self.byListener.withLock { $0[UInt(bitPattern: listener)] = me }
        }
        evconnlistener_set_error_cb(listener, { listener, _ in
            let code = errno
            guard let listener, let me = HTTPServer.byListener.withLock({ $0[UInt(bitPattern: listener)] }),
                  let pointer = UnsafeMutableRawPointer(bitPattern: me) else { return }
            Unmanaged<HTTPServer>.fromOpaque(pointer).takeUnretainedValue().acceptFailed(code)
        })
    }

    /// Each server by its listener's address, for libevent's error callback. Entries leave at `close`.
    private static let byListener = Lock<[UInt: UInt]>([:])

    private func acceptFailed(_ code: Int32) {
        guard let listener else { return }
        evconnlistener_disable(listener)
        let (pause, line) = acceptFailures.failed(describeErrno(code))
        if let line { log("admin listener: \(line)") }
        backoff?.schedule(milliseconds: pause)
    }

    private func serve(_ raw: OpaquePointer) {
        acceptFailures.accepted()
        let method: String
        switch evhttp_request_get_command(raw) {
        case EVHTTP_REQ_GET: method = "GET"
        case EVHTTP_REQ_POST: method = "POST"
        case EVHTTP_REQ_HEAD: method = "HEAD"
        default: method = "OTHER"
        }
        let uri = evhttp_request_get_uri(raw).map { String(cString: $0) } ?? "/"
        let (path, query) = Self.split(uri)
        var peer: SocketAddress?
        if let connection = evhttp_request_get_connection(raw), let sa = evhttp_connection_get_addr(connection) {
            peer = SocketAddress(sa, length: socklen_t(MemoryLayout<sockaddr_storage>.size))
        }
        let input = evhttp_request_get_input_headers(raw)
        func header(_ name: String) -> String? { evhttp_find_header(input, name).map { String(cString: $0) } }
        let response = handler(Request(method: method, path: path, query: query, peer: peer, host: header("Host"),
                                       origin: header("Origin"), adminHeader: header("X-Chainwatch-Admin")))
        let headers = evhttp_request_get_output_headers(raw)
        evhttp_add_header(headers, "Content-Type", response.contentType)
        evhttp_add_header(headers, "Cache-Control", "no-store")
        let body = evbuffer_new()
        if method != "HEAD" { response.body.withUnsafeBytes { _ = evbuffer_add(body, $0.baseAddress, $0.count) } }
        evhttp_send_reply(raw, Int32(response.status), nil, body)   // nil: libevent's standard reason phrase
        evbuffer_free(body)
    }

    /// Splits a request target into its path and decoded query pairs.
    static func split(_ uri: String) -> (String, [String: String]) {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0])
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = decode(String(kv[0])), value = kv.count == 2 ? decode(String(kv[1])) : ""
                query[name] = value
            }
        }
        return (path, query)
    }

    private static func decode(_ text: String) -> String {
        guard let decoded = evhttp_uridecode(text, 1, nil) else { return text }
        defer { free(decoded) }
        return String(cString: decoded)
    }

    /// Stops serving and closes the socket (connections in progress are dropped). Idempotent.
    public func close() {
        backoff?.cancel()
        backoff = nil
        if let listener { _ = Self.byListener.withLock { $0.removeValue(forKey: UInt(bitPattern: listener)) } }
        listener = nil
        if let http { evhttp_free(http) }   // frees the bound socket's listener and closes it
        http = nil
        socket = -1
    }

    deinit { close() }
}
