import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `openssl s_server` on 127.0.0.1, started per test on a free port and stopped by its PID.
final class OpenSSLServer {
    let process = Process()
    let port: UInt16

    init(_ arguments: [String]) throws {
        port = try freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-www", "-quiet"] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Ready when it accepts a TCP connection.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if canConnect(port: port) { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        stop()
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "openssl s_server did not start"])
    }

    /// SIGKILL, not SIGTERM: the child inherits the test runner's signal mask, in which SIGTERM is blocked,
    /// so a SIGTERM stays pending forever (seen: waitUntilExit hung).
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A port nobody listens on right now (bind to port 0, read it, close).
func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopback(port: 0)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return UInt16(bigEndian: address.sin_port)
}

func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

func canConnect(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopback(port: port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// A listening socket on 127.0.0.1 that never accepts: connects succeed (kernel backlog), nothing answers.
final class SilentListener {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }
}

@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/openssl")))
struct ChainFetcherTests {
    @Test func fetchesTheChainOverTLS12AndTLS13() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"),
                                        "-cert_chain", PKI.path("genuine.chain.pem"), "-alpn", "h2,http/1.1"])
        defer { server.stop() }
        let expected = try PKI.certificates("genuine.fullchain.pem").map(\.der)

        let tls12 = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: "genuine.test",
                                           maxVersion: .tls1_2, timeoutMilliseconds: 5_000)
        #expect(tls12.version == "TLSv1.2")
        #expect(tls12.chain == expected)
        #expect(tls12.cipher.hasPrefix("ECDHE-ECDSA-"))
        #expect(tls12.address == "127.0.0.1")
        #expect(tls12.alpn == nil)

        let tls13 = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: "genuine.test",
                                           alpn: ["h2"], timeoutMilliseconds: 5_000)
        #expect(tls13.version == "TLSv1.3")
        #expect(tls13.chain == expected)
        #expect(tls13.cipher.hasPrefix("TLS_"))
        #expect(tls13.alpn == "h2")

        // What was fetched validates like any other chain.
        let result = PathValidator.validate(chain: tls13.chain, store: try PKI.store("genuine-root"), at: PKI.now)
        #expect(result.error == nil && result.path.count == 3)
    }

    @Test func serverNameSelectsTheCertificate() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"),
                                        "-servername", "other.test",
                                        "-cert2", PKI.path("otherhost.pem"), "-key2", PKI.path("otherhost.key")])
        defer { server.stop() }
        let other = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: "other.test", timeoutMilliseconds: 5_000)
        #expect(other.chain.first == (try PKI.der("otherhost")))
        let noSNI = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: nil, timeoutMilliseconds: 5_000)
        #expect(noSNI.chain.first == (try PKI.der("genuine")))
        // An IP literal is never sent as SNI.
        let ip = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: "127.0.0.1", timeoutMilliseconds: 5_000)
        #expect(ip.chain.first == (try PKI.der("genuine")))
    }

    @Test func serverThatOnlySpeaksTLS13RefusesATLS12Client() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"), "-tls1_3"])
        defer { server.stop() }
        let error = #expect(throws: ChainFetchError.self) {
            try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: "genuine.test",
                                   maxVersion: .tls1_2, timeoutMilliseconds: 5_000)
        }
        guard case .tls(let call, _) = error else { Issue.record("expected a TLS error, got \(String(describing: error))"); return }
        #expect(call == "SSL_connect")
    }

    @Test func silentServerTimesOut() throws {
        let listener = try SilentListener()
        let start = Date()
        let error = #expect(throws: ChainFetchError.self) {
            try ChainFetcher.fetch(host: "127.0.0.1", port: listener.port, serverName: "genuine.test", timeoutMilliseconds: 300)
        }
        #expect(error == .timedOut(stage: "handshake"))
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed >= 0.25 && elapsed < 3)
    }

    @Test func refusedConnectionNamesConnect() throws {
        let port = try freePort()
        let error = #expect(throws: ChainFetchError.self) {
            try ChainFetcher.fetch(host: "127.0.0.1", port: port, serverName: nil, timeoutMilliseconds: 2_000)
        }
        #expect(error == .system(call: "connect", errno: ECONNREFUSED))
    }

    @Test func unresolvableNameNamesGetaddrinfo() throws {
        let error = #expect(throws: ChainFetchError.self) {
            try ChainFetcher.fetch(host: "no such host", port: 443, serverName: nil, timeoutMilliseconds: 2_000)
        }
        guard case .resolve(let host, _) = error else { Issue.record("expected resolve, got \(String(describing: error))"); return }
        #expect(host == "no such host")
    }
}
