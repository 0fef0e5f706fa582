internal import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TLS protocol version, spelled as OpenSSL's `SSL_get_version` spells it.
public enum TLSProtocolVersion: String, Sendable, Hashable, CaseIterable {
    case tls1_0 = "TLSv1"
    case tls1_1 = "TLSv1.1"
    case tls1_2 = "TLSv1.2"
    case tls1_3 = "TLSv1.3"

    var opensslValue: Int32 {
        switch self {
        case .tls1_0: TLS1_VERSION
        case .tls1_1: TLS1_1_VERSION
        case .tls1_2: TLS1_2_VERSION
        case .tls1_3: TLS1_3_VERSION
        }
    }
}

/// What a server presented to `ChainFetcher`.
public struct FetchedChain: Sendable, Hashable {
    /// The peer's certificates as DER, as sent: leaf first.
    public var chain: [[UInt8]]
    /// Negotiated version, e.g. `TLSv1.3` (`SSL_get_version`).
    public var version: String
    /// Negotiated cipher suite, OpenSSL's name, e.g. `TLS_AES_256_GCM_SHA384`, `ECDHE-ECDSA-AES128-GCM-SHA256`.
    public var cipher: String
    /// The ALPN protocol the server chose, if any.
    public var alpn: String?
    /// The address connected to, printed (`127.0.0.1`, `::1`).
    public var address: String
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

/// A blocking TLS client handshake that returns the server's certificate chain: `chainwatch pin` and the
/// TLS 1.3 probe (run it on a worker thread, never on an event loop).
///
/// It connects (non-blocking socket, `poll` against one deadline for connect and handshake together), does
/// the handshake through memory BIOs (so a reset peer is an error, never a SIGPIPE: sends use
/// `MSG_NOSIGNAL`), sends no application data, and closes with a close_notify. The server's certificate is
/// not verified here (`SSL_VERIFY_NONE`): `PathValidator` judges it. To see whatever a server presents, the
/// client accepts every version from TLS 1.0 and runs at security level 0 (anonymous suites excluded, so a
/// certificate is always asked for).
public enum ChainFetcher {
    /// Connects to `host` (an IP literal, or a name resolved with `getaddrinfo`; each address is tried in
    /// turn) on `port` and handshakes with SNI `serverName` (nil, or an IP literal: no SNI), offering `alpn`
    /// protocols, with `maxVersion` as the highest version offered (nil: TLS 1.3).
    /// The whole exchange must end within `timeoutMilliseconds`.
    public static func fetch(host: String, port: UInt16, serverName: String?, alpn: [String] = [],
                             maxVersion: TLSProtocolVersion? = nil,
                             timeoutMilliseconds: Int) throws(ChainFetchError) -> FetchedChain {
        let deadline = Deadline(afterMilliseconds: timeoutMilliseconds)
        let context = try ClientContext.shared.get()
        let (socket, address) = try openConnection(host: host, port: port, deadline: deadline)
        defer { close(socket) }
        let session = try Session(context: context, socket: socket, deadline: deadline)
        try session.configure(serverName: serverName, alpn: alpn, maxVersion: maxVersion)
        try session.handshake()
        var fetched = try session.peerChain()
        fetched.address = address
        session.closeNotify()
        return fetched
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
        nanoseconds = Deadline.now() &+ UInt64(max(0, milliseconds)) &* 1_000_000
    }

    var remainingMilliseconds: Int {
        let now = Deadline.now()
        return now >= nanoseconds ? 0 : Int((nanoseconds - now + 999_999) / 1_000_000)
    }

    private static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}

/// The client `SSL_CTX` every fetch shares (`SSL_new` on a shared context is thread-safe). Owns the context.
final class ClientContext: @unchecked Sendable {
    let raw: OpaquePointer  // SSL_CTX *

    static let shared: Result<ClientContext, ChainFetchError> = Result { () throws(ChainFetchError) in try ClientContext() }

    private init() throws(ChainFetchError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw ClientContext.failure("SSL_CTX_new") }
        raw = context
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        SSL_CTX_set_security_level(context, 0)
        _ = c_openssl_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        _ = SSL_CTX_set_options(context, UInt64(c_openssl_SSL_OP_NO_TICKET()))
        guard c_openssl_SSL_CTX_set_min_proto_version(context, TLS1_VERSION) == 1 else {
            throw ClientContext.failure("SSL_CTX_set_min_proto_version")
        }
        guard SSL_CTX_set_cipher_list(context, "ALL:!aNULL:!eNULL:@SECLEVEL=0") == 1 else {
            throw ClientContext.failure("SSL_CTX_set_cipher_list")
        }
    }

    deinit { SSL_CTX_free(raw) }

    static func failure(_ call: String) -> ChainFetchError {
        let error = OpenSSLError.drainingQueue(call: call)
        return .tls(call: call, queue: error.queue)
    }
}

/// One client `SSL` over memory BIOs, moving bytes to and from a socket it borrows. Owns the `SSL *`
/// (which owns the two BIOs).
private final class Session {
    let ssl: OpaquePointer
    let network: OpaquePointer   // BIO the SSL writes to: bytes for the socket
    let socket: Int32
    let deadline: Deadline

    init(context: ClientContext, socket: Int32, deadline: Deadline) throws(ChainFetchError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.raw) else { throw ClientContext.failure("SSL_new") }
        guard let incoming = BIO_new(BIO_s_mem()) else { SSL_free(ssl); throw ClientContext.failure("BIO_new") }
        guard let outgoing = BIO_new(BIO_s_mem()) else {
            BIO_free(incoming); SSL_free(ssl); throw ClientContext.failure("BIO_new")
        }
        _ = c_openssl_BIO_set_mem_eof_return(incoming, -1)  // empty means "retry", not EOF
        SSL_set_bio(ssl, incoming, outgoing)                 // the SSL takes ownership of both
        self.ssl = ssl
        self.network = outgoing
        self.socket = socket
        self.deadline = deadline
    }

    deinit { SSL_free(ssl) }

    func configure(serverName: String?, alpn: [String], maxVersion: TLSProtocolVersion?) throws(ChainFetchError) {
        SSL_set_connect_state(ssl)
        if let serverName, !serverName.isEmpty, !Certificate.isIPLiteral(serverName) {
            guard c_openssl_SSL_set_tlsext_host_name(ssl, serverName) == 1 else {
                throw ClientContext.failure("SSL_set_tlsext_host_name")
            }
        }
        if !alpn.isEmpty {
            var wire: [UInt8] = []
            for protocolName in alpn where (1...255).contains(protocolName.utf8.count) {
                wire.append(UInt8(protocolName.utf8.count))
                wire.append(contentsOf: protocolName.utf8)
            }
            // SSL_set_alpn_protos returns 0 on success.
            guard SSL_set_alpn_protos(ssl, wire, UInt32(wire.count)) == 0 else {
                throw ClientContext.failure("SSL_set_alpn_protos")
            }
        }
        if let maxVersion {
            guard c_openssl_SSL_set_max_proto_version(ssl, maxVersion.opensslValue) == 1 else {
                throw ClientContext.failure("SSL_set_max_proto_version")
            }
        }
    }

    func handshake() throws(ChainFetchError) {
        while true {
            ERR_clear_error()
            let result = SSL_connect(ssl)
            let code = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, result)
            let failure: ChainFetchError? = switch code {
            case SSL_ERROR_NONE, SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: nil
            case SSL_ERROR_SYSCALL where ERR_peek_error() == 0: .closedByPeer(stage: "handshake")
            default: ClientContext.failure("SSL_connect")
            }
            // Send what OpenSSL wrote (the next flight, or the alert that explains a failure).
            do throws(ChainFetchError) { try flush() } catch { throw failure ?? error }
            if let failure { throw failure }
            if code == SSL_ERROR_NONE { return }
            if code == SSL_ERROR_WANT_READ { try receive() }
        }
    }

    func peerChain() throws(ChainFetchError) -> FetchedChain {
        var chain: [[UInt8]] = []
        // Client side: the peer chain includes the leaf.
        if let stack = SSL_get_peer_cert_chain(ssl) {
            for index in 0..<c_openssl_sk_X509_num(stack) {
                if let x509 = c_openssl_sk_X509_value(stack, index), let der = try? Certificate.encode(x509) {
                    chain.append(der)
                }
            }
        }
        if let leaf = SSL_get0_peer_certificate(ssl), let der = try? Certificate.encode(leaf), chain.first != der {
            chain.insert(der, at: 0)
        }
        guard !chain.isEmpty else { throw .noCertificate }
        let version = SSL_get_version(ssl).map { String(cString: $0) } ?? ""
        let cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? ""
        var selected: UnsafePointer<UInt8>? = nil
        var selectedLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &selectedLength)
        let alpn = selected.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(selectedLength)), as: UTF8.self) }
        ERR_clear_error()
        return FetchedChain(chain: chain, version: version, cipher: cipher, alpn: alpn, address: "")
    }

    /// Queues a close_notify and sends it if the socket takes it now; never waits for the server's.
    func closeNotify() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = BIO_read(network, &buffer, Int32(buffer.count))
        if count > 0 { _ = send(socket, buffer, Int(count), ChainFetcher.sendFlags) }
        ERR_clear_error()
    }

    /// Sends everything the SSL has written, waiting for the socket as needed.
    private func flush() throws(ChainFetchError) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while BIO_ctrl_pending(network) > 0 {
            let count = Int(BIO_read(network, &buffer, Int32(buffer.count)))
            guard count > 0 else { return }
            var offset = 0
            while offset < count {
                let sent = buffer.withUnsafeBytes { bytes in
                    send(socket, bytes.baseAddress! + offset, count - offset, ChainFetcher.sendFlags)
                }
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
    }

    /// Waits for bytes from the server and hands them to the SSL.
    private func receive() throws(ChainFetchError) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count > 0 {
                guard BIO_write(SSL_get_rbio(ssl), buffer, Int32(count)) == Int32(count) else {
                    throw ClientContext.failure("BIO_write")
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
