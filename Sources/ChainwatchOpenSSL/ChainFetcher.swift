import ChainwatchCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a server presented to `ChainFetcher`.
public struct FetchedChain: Sendable, Hashable {
    /// The peer's certificates as DER, as sent: leaf first.
    public var chain: [[UInt8]]
    /// Negotiated version, OpenSSL's spelling (`TLSv1.3`).
    public var version: String
    /// Negotiated cipher suite, OpenSSL's name, e.g. `TLS_AES_256_GCM_SHA384`, `ECDHE-ECDSA-AES128-GCM-SHA256`.
    public var cipher: String
    /// The ALPN protocol the server chose, if any.
    public var alpn: String?
    /// The address connected to, printed (`127.0.0.1`, `::1`).
    public var address: String
    /// Everything the handshake engine recorded (the ClientHello sent, the ServerHello, message and record sizes).
    public var handshake: TLSClientResult
}

/// Why `ChainFetcher.fetch` got no chain. Each case names the C call or the stage that failed.
public enum ChainFetchError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `getaddrinfo` failed (`gai_strerror` text).
    case resolve(host: String, message: String)
    /// A system call failed (`socket`, `connect`, `poll`, `send`, `recv`) with this errno.
    case system(call: String, errno: Int32)
    /// The deadline passed during `stage` (`connect` or `handshake`).
    case timedOut(stage: String)
    /// The server closed the connection during `stage`.
    case closedByPeer(stage: String)
    /// OpenSSL refused (the handshake failed: alert, protocol error).
    case tls(call: String, queue: [String])
    /// The handshake completed without a server certificate (anonymous or PSK suites).
    case noCertificate

    public var description: String {
        switch self {
        case .resolve(let host, let message): "getaddrinfo(\(host)) failed: \(message)"
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
        case .timedOut(let stage): "timed out during \(stage)"
        case .closedByPeer(let stage): "connection closed by the server during \(stage)"
        case .tls(let call, let queue): OpenSSLError(call: call, queue: queue).description
        case .noCertificate: "the server sent no certificate"
        }
    }
}

/// A blocking TLS client handshake that returns the server's certificate chain, for `chainwatch pin` (the
/// proxy's probe drives the same `TLSClient` on its event loop). Run it on a thread that may block.
///
/// It connects (non-blocking socket, `poll` against one deadline for connect and handshake together), runs a
/// `TLSClient` over the socket (so a reset peer is an error, never a SIGPIPE: sends use `MSG_NOSIGNAL`), sends no
/// application data, and closes with a close_notify. The server's certificate is not verified here:
/// `PathValidator` judges it.
public enum ChainFetcher {
    /// Connects to `host` (an IP literal, or a name resolved with `getaddrinfo`; each address is tried in
    /// turn) on `port` and handshakes with SNI `serverName` (nil, or an IP literal: no SNI), offering `alpn`
    /// protocols, with `maxVersion` as the highest version offered (nil: TLS 1.3) and otherwise OpenSSL's full
    /// default offer. The whole exchange must end within `timeoutMilliseconds`.
    public static func fetch(host: String, port: UInt16, serverName: String?, alpn: [String] = [],
                             maxVersion: TLSVersion? = nil,
                             timeoutMilliseconds: Int) throws(ChainFetchError) -> FetchedChain {
        try fetch(host: host, port: port, offer: .minimal(serverName: serverName, alpn: alpn, maxVersion: maxVersion),
                  timeoutMilliseconds: timeoutMilliseconds)
    }

    /// As above, with the ClientHello repeating `offer` (see `TLSClient`).
    public static func fetch(host: String, port: UInt16, offer: ClientOffer,
                             timeoutMilliseconds: Int) throws(ChainFetchError) -> FetchedChain {
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        let client: TLSClient
        do { client = try TLSClient(offer: offer) } catch { throw .tls(call: error.call, queue: error.queue) }
        let (socket, address) = try openConnection(host: host, port: port, deadline: deadline)
        defer { close(socket) }
        let session = Session(client: client, socket: socket, deadline: deadline)
        let result = try session.handshake()
        guard !result.chainDER.isEmpty else { throw .noCertificate }
        session.sendNow(client.closeNotify())
        return FetchedChain(chain: result.chainDER, version: result.version.name,
                            cipher: TLSClient.openSSLName(of: result.cipher) ?? result.cipher.description,
                            alpn: result.alpn, address: address, handshake: result)
    }

    // MARK: Connecting

    /// A non-blocking TCP connection to the first address of `host` that answers before the deadline.
    private static func openConnection(host: String, port: UInt16, deadline: Deadline) throws(ChainFetchError) -> (Int32, String) {
        var hints = addrinfo()
        hints.ai_socktype = streamType
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw .resolve(host: host, message: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var lastError = ChainFetchError.resolve(host: host, message: "no address")
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            entry = current.pointee.ai_next
            do throws(ChainFetchError) {
                let socket = try openConnection(current.pointee, deadline: deadline)
                return (socket, printedAddress(current.pointee))
            } catch {
                lastError = error
                if case .timedOut = error { throw error }  // the deadline is shared: no time for the next one
            }
        }
        throw lastError
    }

    private static func openConnection(_ address: addrinfo, deadline: Deadline) throws(ChainFetchError) -> Int32 {
        let fd = socket(address.ai_family, streamType, address.ai_protocol)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        do throws(ChainFetchError) {
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { throw .system(call: "fcntl", errno: errno) }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if connect(fd, address.ai_addr, address.ai_addrlen) != 0 {
                guard errno == EINPROGRESS else { throw .system(call: "connect", errno: errno) }
                try wait(fd, for: Int16(POLLOUT), until: deadline, stage: "connect")
                var pending: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &pending, &length) == 0 else {
                    throw .system(call: "getsockopt(SO_ERROR)", errno: errno)
                }
                guard pending == 0 else { throw .system(call: "connect", errno: pending) }
            }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// Polls `fd` for `events` until the deadline; EINTR restarts with the time left.
    static func wait(_ fd: Int32, for events: Int16, until deadline: Deadline, stage: String) throws(ChainFetchError) {
        while true {
            let remaining = deadline.remainingMilliseconds
            guard remaining > 0 else { throw .timedOut(stage: stage) }
            var request = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&request, 1, Int32(clamping: remaining))
            if ready > 0 { return }  // readable, writable, or an error/hang-up the next call reports
            if ready == 0 { throw .timedOut(stage: stage) }
            guard errno == EINTR else { throw .system(call: "poll", errno: errno) }
        }
    }

    private static func printedAddress(_ address: addrinfo) -> String {
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address.ai_addr, address.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else {
            return "?"
        }
        return Certificate.cString(text)
    }

    #if os(Linux)
    private static let streamType = Int32(SOCK_STREAM.rawValue)
    static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    private static let streamType = SOCK_STREAM
    static let sendFlags: Int32 = 0
    #endif
}

/// A point on the monotonic clock.
struct Deadline {
    private let nanoseconds: UInt64

    init(afterMilliseconds milliseconds: Int) {
        nanoseconds = MonotonicClock.nanoseconds() &+ UInt64(max(0, milliseconds)) &* 1_000_000
    }

    var remainingMilliseconds: Int {
        let now = MonotonicClock.nanoseconds()
        return now >= nanoseconds ? 0 : Int((nanoseconds - now + 999_999) / 1_000_000)
    }
}

/// A `TLSClient` moving bytes to and from a blocking-style socket it borrows (non-blocking, waited on with `poll`).
private struct Session {
    let client: TLSClient
    let socket: Int32
    let deadline: Deadline

    func handshake() throws(ChainFetchError) -> TLSClientResult {
        while true {
            let progress: TLSClient.Progress
            do {
                progress = try client.advance()
            } catch {
                // Send the alert that explains the failure, if the socket takes it.
                sendNow(client.takeOutgoing())
                throw .tls(call: error.call, queue: error.queue)
            }
            try flush()
            if case .done(let result) = progress { return result }
            try receive()
        }
    }

    /// Sends everything the client has written, waiting for the socket as needed.
    private func flush() throws(ChainFetchError) {
        let bytes = client.takeOutgoing()
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(socket, $0.baseAddress! + offset, $0.count - offset, ChainFetcher.sendFlags) }
            if sent > 0 { offset += sent; continue }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                try ChainFetcher.wait(socket, for: Int16(POLLOUT), until: deadline, stage: "handshake")
            } else if errno == EPIPE || errno == ECONNRESET {
                throw .closedByPeer(stage: "handshake")
            } else if errno != EINTR {
                throw .system(call: "send", errno: errno)
            }
        }
    }

    /// Sends `bytes` if the socket takes them now; never waits, reports nothing (a close_notify, an alert).
    func sendNow(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, ChainFetcher.sendFlags) }
    }

    /// Waits for bytes from the server and hands them to the client.
    private func receive() throws(ChainFetchError) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count > 0 {
                do throws(OpenSSLError) {
                    try client.receive(Array(buffer[..<count]))
                } catch {
                    throw .tls(call: error.call, queue: error.queue)
                }
                return
            }
            if count == 0 { throw .closedByPeer(stage: "handshake") }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                try ChainFetcher.wait(socket, for: Int16(POLLIN), until: deadline, stage: "handshake")
            } else if errno == ECONNRESET {
                throw .closedByPeer(stage: "handshake")
            } else if errno != EINTR {
                throw .system(call: "recv", errno: errno)
            }
        }
    }
}
