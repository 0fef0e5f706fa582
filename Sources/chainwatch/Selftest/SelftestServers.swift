import ChainwatchOpenSSL
import Foundation
import Glibc

/// A listening TCP socket on an IPv4 address, port chosen by the kernel.
private func listenSocket(address: String) throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SelftestError("socket: \(String(cString: strerror(errno)))") }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var sin = sockaddr_in()
    sin.sin_family = sa_family_t(AF_INET)
    guard inet_pton(AF_INET, address, &sin.sin_addr) == 1 else { close(fd); throw SelftestError("\(address): not an IPv4 address") }
    let bound = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0, listen(fd, 64) == 0 else {
        let message = String(cString: strerror(errno))
        close(fd)
        throw SelftestError("cannot listen on \(address): \(message)")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return (fd, UInt16(bigEndian: sin.sin_port))
}

/// Reads and writes on `fd` give up after `seconds` (the selftest's servers never wait for ever).
func setTimeouts(_ fd: Int32, seconds: Double) {
    var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
}

/// Accepts connections on a thread of its own and serves each on another, until `stop`.
class SelftestListener: @unchecked Sendable {
    let address: String
    let port: UInt16
    private let fd: Int32
    private let stopping = NSLock()
    private var stopped = false

    init(address: String) throws {
        self.address = address
        (fd, port) = try listenSocket(address: address)
    }

    func start() {
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return   // shut down by stop()
                }
                setTimeouts(client, seconds: 30)
                Thread.detachNewThread { [self] in
                    serve(client)
                    close(client)
                }
            }
        }
    }

    /// Serves one accepted connection (closed by the caller afterwards).
    func serve(_ client: Int32) {}

    func stop() {
        stopping.lock()
        defer { stopping.unlock() }
        guard !stopped else { return }
        stopped = true
        shutdown(fd, Int32(SHUT_RDWR))   // wakes the accept
        close(fd)
    }
}

/// A TLS server (TLS 1.2 and 1.3) that answers any request with one page: the genuine server, or the forgery.
final class SelftestTLSServer: SelftestListener, @unchecked Sendable {
    private let server: BlockingTLS.Server
    private let answer: [UInt8]

    init(address: String, chain: URL, key: URL, page: String) throws {
        do { server = try BlockingTLS.Server(chainFile: chain.path, keyFile: key.path) } catch {
            throw SelftestError("cannot load \(chain.path): \(error)")
        }
        answer = Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(page.utf8.count)\r\nConnection: close\r\n\r\n\(page)".utf8)
        try super.init(address: address)
    }

    override func serve(_ client: Int32) { server.serve(client, answer: answer) }
}

/// A server that stalls its handshake: it relays to the genuine server but lets only the first handshake message
/// (the ServerHello) back to the client, then nothing. No chain is ever shown: a `block` rule must fail closed.
final class SelftestStallServer: SelftestListener, @unchecked Sendable {
    private let upstreamPort: UInt16

    init(address: String, upstreamPort: UInt16) throws {
        self.upstreamPort = upstreamPort
        try super.init(address: address)
    }

    override func serve(_ client: Int32) {
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard upstream >= 0 else { return }
        defer { close(upstream) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = upstreamPort.bigEndian
        inet_pton(AF_INET, address, &sin.sin_addr)
        let connected = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { return }
        setTimeouts(upstream, seconds: 30)
        // Client to server: everything, on a thread of its own; it ends when the client closes (or in 30 s).
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 16384)
            while true {
                let n = read(client, &buffer, buffer.count)
                if n <= 0 || write(upstream, buffer, n) != n { break }
            }
            shutdown(upstream, Int32(SHUT_RDWR))
            done.signal()
        }
        // Server to client: the first record, cut to its first handshake message; then the rest is read and dropped.
        var header = [UInt8](repeating: 0, count: 5)
        if readFully(upstream, &header, 5) {
            let length = Int(header[3]) << 8 | Int(header[4])
            var body = [UInt8](repeating: 0, count: length)
            if readFully(upstream, &body, length) {
                var first = body
                if header[0] == 22, body.count >= 4 {   // a handshake record: keep its first message only
                    let messageLength = min(4 + (Int(body[1]) << 16 | Int(body[2]) << 8 | Int(body[3])), body.count)
                    first = Array(body[..<messageLength])
                }
                let record = [header[0], header[1], header[2], UInt8(first.count >> 8), UInt8(first.count & 0xff)] + first
                _ = write(client, record, record.count)
            }
        }
        var sink = [UInt8](repeating: 0, count: 16384)
        while read(upstream, &sink, sink.count) > 0 {}
        done.wait()
    }

    private func readFully(_ fd: Int32, _ buffer: inout [UInt8], _ count: Int) -> Bool {
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n <= 0 { return false }
            got += n
        }
        return true
    }
}

extension Array where Element == UInt8 {
    /// Whether the bytes end with `suffix` (a head's blank line).
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && self[(count - suffix.count)...].elementsEqual(suffix) }
}
