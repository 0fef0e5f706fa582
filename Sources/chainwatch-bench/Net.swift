import CLibevent
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 host and port, as given on the command line (`127.0.0.1:3128`).
struct Endpoint: Sendable, Codable, Equatable, CustomStringConvertible {
    let host: String
    let port: UInt16

    init(host: String, port: UInt16) { self.host = host; self.port = port }

    init(parsing text: String) throws(BenchError) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw BenchError("expected HOST:PORT, got '\(text)'")
        }
        self.host = String(text[..<colon])
        self.port = port
        _ = try sockaddr()
    }

    var description: String { "\(host):\(port)" }

    /// The four bytes of a dotted IPv4 host; nil for anything else.
    var ipv4Bytes: [UInt8]? {
        let parts = host.split(separator: ".").compactMap { UInt8($0) }
        return parts.count == 4 && host.split(separator: ".").count == 4 ? parts : nil
    }

    /// The IPv4 socket address (the bench talks to literal addresses only: no DNS in the measurement).
    func sockaddr() throws(BenchError) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw BenchError("'\(host)' is not an IPv4 address (the bench uses literal addresses)")
        }
        return address
    }
}

/// Byte values the line-oriented parsers look for.
let crlfcrlf: [UInt8] = Array("\r\n\r\n".utf8)

/// Sets TCP_NODELAY on a connected socket: the bench's request/response exchanges are small writes.
func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}

/// Finds where an HTTP head ends in `buffer`: the offset just past CRLFCRLF, or nil when not there yet.
func headEnd(_ buffer: OpaquePointer) -> Int? {
    let found = crlfcrlf.withUnsafeBufferPointer { bytes in
        evbuffer_search(buffer, UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self), 4, nil)
    }
    return found.pos < 0 ? nil : found.pos + 4
}

/// Removes and returns the first `count` bytes of `buffer` as text.
func removeText(_ buffer: OpaquePointer, count: Int) -> String {
    var bytes = [UInt8](repeating: 0, count: count)
    let got = evbuffer_remove(buffer, &bytes, count)
    return String(decoding: bytes.prefix(Int(max(got, 0))), as: UTF8.self)
}

/// Removes one LF-terminated line (without the LF), or returns nil when none is complete.
func removeLine(_ buffer: OpaquePointer) -> String? {
    var length = 0
    guard let line = evbuffer_readln(buffer, &length, EVBUFFER_EOL_LF) else { return nil }
    defer { free(line) }
    return String(cString: line)
}

/// Adds text to a bufferevent's output.
func write(_ bev: OpaquePointer, _ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = bufferevent_write(bev, bytes.baseAddress, bytes.count) }
}

/// A non-blocking TCP socket bound to `address` (IPv4), port chosen by the kernel at connect.
func boundSocket(_ address: String) throws(BenchError) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
    var sin = sockaddr_in()
    sin.sin_family = sa_family_t(AF_INET)
    guard inet_pton(AF_INET, address, &sin.sin_addr) == 1 else { close(fd); throw BenchError("\(address) is not an IPv4 address") }
    // Connect picks the port: without this, bind would take one per socket, and the ephemeral range runs out sooner.
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_IP), 24 /* IP_BIND_ADDRESS_NO_PORT, linux/in.h */, &one, socklen_t(MemoryLayout<Int32>.size))
    let bound = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0 else {
        let message = String(cString: strerror(errno))
        close(fd)
        throw BenchError("bind to \(address): \(message)")
    }
    guard evutil_make_socket_nonblocking(fd) == 0 else {
        close(fd)
        throw BenchError("cannot make a socket non-blocking")
    }
    return fd
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
func freeLoopbackPort() throws(BenchError) -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = try Endpoint(host: "127.0.0.1", port: 0).sockaddr()
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw BenchError("bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
    return try boundPort(fd)
}

/// The local port a socket is bound to.
func boundPort(_ fd: Int32) throws(BenchError) -> UInt16 {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let got = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard got == 0 else { throw BenchError("getsockname: \(String(cString: strerror(errno)))") }
    return UInt16(bigEndian: address.sin_port)
}

/// True when something accepts TCP connections on `endpoint` now (blocking connect on loopback).
func accepts(_ endpoint: Endpoint) -> Bool {
    guard var address = try? endpoint.sockaddr() else { return false }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// Raises the open-file limit to its hard maximum (idle runs hold thousands of sockets).
func raiseFileLimit() {
    var limit = rlimit()
    if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// Libevent's option and event flags in the integer types its functions take.
enum EV {
    static let closeOnFree = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
    static let readWrite = Int16(EV_READ | EV_WRITE)
    static let connected = Int16(BEV_EVENT_CONNECTED)
    static let eof = Int16(BEV_EVENT_EOF)
    static let error = Int16(BEV_EVENT_ERROR)
    static let timeout = Int16(BEV_EVENT_TIMEOUT)
}
