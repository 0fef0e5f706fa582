import ChainwatchOpenSSL
import Foundation
import Glibc

/// What a client of the proxy saw for one tunnel.
enum SelftestOutcome: Equatable {
    /// The proxy answered the CONNECT with this status instead of 200.
    case refused(status: Int)
    /// The handshake ended before a single server byte reached the client (a block).
    case noServerBytes(String)
    /// Server bytes came, but no page: the handshake failed or stalled after them.
    case handshakeFailed(serverBytes: Int, String)
    /// The page arrived, from the server whose leaf has this SHA-256.
    case page(String, leafSHA256: String)
    /// The proxy could not be reached or spoke no HTTP.
    case proxyError(String)

    var summary: String {
        switch self {
        case .refused(let status): "the proxy answered \(status)"
        case .noServerBytes(let why): "no server byte reached the client (\(why))"
        case .handshakeFailed(let n, let why): "\(n) server bytes, then no page (\(why))"
        case .page(_, let leaf): "the page arrived (leaf \(leaf.prefix(16))…)"
        case .proxyError(let why): why
        }
    }
}

/// A client that trusts nothing (as the legacy clients chainwatch protects): CONNECT through the proxy, a TLS
/// handshake of one version with the given SNI, a GET, the page. Every read gives up after `timeout` seconds.
struct SelftestClient {
    var proxyHost: String
    var proxyPort: UInt16
    var timeout: Double

    func fetch(target: String, serverName: String, tls13: Bool) -> SelftestOutcome {
        switch openTunnel(target: target) {
        case .success(let fd):
            defer { close(fd) }
            return handshake(fd, serverName: serverName, tls13: tls13)
        case .failure(let refusal):
            return refusal.outcome
        }
    }

    /// As a client with no proxy setting behind a gateway: a connection from `source` straight to `address:port`
    /// (which the gateway's rule redirects to the proxy's transparent listener), then the same handshake. A
    /// connection that cannot be made at all is `.proxyError`; one reset before a server byte is `.noServerBytes`.
    func fetchDirect(address: String, port: UInt16, source: String, serverName: String, tls13: Bool) -> SelftestOutcome {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .proxyError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        setTimeouts(fd, seconds: timeout)
        var local = sockaddr_in(), remote = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        guard inet_pton(AF_INET, source, &local.sin_addr) == 1, inet_pton(AF_INET, address, &remote.sin_addr) == 1 else {
            return .proxyError("\(source) or \(address) is not an IPv4 address")
        }
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        guard withUnsafePointer(to: &local, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }) == 0 else {
            return .proxyError("cannot bind to \(source): \(String(cString: strerror(errno)))")
        }
        guard withUnsafePointer(to: &remote, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, size) } }) == 0 else {
            return .proxyError("cannot connect to \(address):\(port) from \(source): \(String(cString: strerror(errno)))")
        }
        return handshake(fd, serverName: serverName, tls13: tls13)
    }

    /// Whether the proxy opens a tunnel to `target` at all: nil when it answers 200 (the tunnel is closed before a
    /// byte of TLS), else what it did. A proxy that refuses the destination itself never judges a chain there.
    func refusal(target: String) -> SelftestOutcome? {
        switch openTunnel(target: target) {
        case .success(let fd): close(fd); return nil
        case .failure(let refusal): return refusal.outcome
        }
    }

    private struct Refusal: Error { var outcome: SelftestOutcome }

    /// CONNECT, and the proxy's answer read a byte at a time: the socket, positioned at the tunnel's first byte.
    private func openTunnel(target: String) -> Result<Int32, Refusal> {
        let fd: Int32
        switch connectToProxy() {
        case .success(let socket): fd = socket
        case .failure(let error): return .failure(Refusal(outcome: .proxyError(error.description)))
        }
        var handedOver = false
        defer { if !handedOver { close(fd) } }
        let connect = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\nUser-Agent: chainwatch-selftest\r\n\r\n"
        guard write(fd, connect, connect.utf8.count) == connect.utf8.count else { return .failure(Refusal(outcome: .proxyError("cannot write to the proxy"))) }
        // The response head, a byte at a time: nothing of the server's may be read here.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.ends(with: Array("\r\n\r\n".utf8)) {
            guard head.count < 8192, read(fd, &byte, 1) == 1 else {
                return .failure(Refusal(outcome: .proxyError(head.isEmpty ? "the proxy closed the connection without an answer" : "the proxy's answer ended inside its head")))
            }
            head.append(byte)
        }
        let statusLine = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return .failure(Refusal(outcome: .proxyError("not an HTTP answer: \(statusLine.prefix(60))")))
        }
        guard status == 200 else { return .failure(Refusal(outcome: .refused(status: status))) }
        handedOver = true
        return .success(fd)
    }

    private func handshake(_ fd: Int32, serverName: String, tls13: Bool) -> SelftestOutcome {
        let get = Array("GET / HTTP/1.1\r\nHost: \(serverName)\r\nConnection: close\r\n\r\n".utf8)
        let exchange: BlockingTLS.Exchange
        do { exchange = try BlockingTLS.exchange(on: fd, version: tls13 ? .tls1_3 : .tls1_2, serverName: serverName, request: get) } catch {
            return .proxyError("\(error)")
        }
        let serverBytes = exchange.serverBytesInHandshake
        guard exchange.handshakeSucceeded else {
            let why = errno == EAGAIN || errno == EWOULDBLOCK ? "nothing for \(Int(timeout)) s" : "the connection was closed"
            return serverBytes == 0 ? .noServerBytes(why) : .handshakeFailed(serverBytes: serverBytes, why)
        }
        let leaf = exchange.leafSHA256.map { String(format: "%02x", $0) }.joined()
        let text = String(decoding: exchange.answer, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 200"), let split = text.range(of: "\r\n\r\n") else {
            return .handshakeFailed(serverBytes: serverBytes, "no page after the handshake")
        }
        return .page(String(text[split.upperBound...]), leafSHA256: leaf)
    }

    private func connectToProxy() -> Result<Int32, SelftestError> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(proxyHost, String(proxyPort), &hints, &found) == 0, let first = found else {
            return .failure(SelftestError("cannot resolve the proxy \(proxyHost)"))
        }
        defer { freeaddrinfo(found) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        var lastError = "no address"
        while let info = entry {
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd >= 0 {
                setTimeouts(fd, seconds: timeout)
                if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return .success(fd) }
                lastError = String(cString: strerror(errno))
                close(fd)
            }
            entry = info.pointee.ai_next
        }
        return .failure(SelftestError("cannot connect to the proxy \(proxyHost):\(proxyPort): \(lastError)"))
    }
}
