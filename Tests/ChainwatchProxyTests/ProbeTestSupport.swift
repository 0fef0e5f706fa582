import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import ChainwatchProxy
import Foundation
import ChainwatchLock
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The test PKI, made once per machine by Tests/pki/make-pki.sh (the openssl CLI) into a temporary directory.
enum ProbePKI {
    static let directory: String = {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("pki/make-pki.sh").path
        let out = NSTemporaryDirectory() + "chainwatch-prober-tests-pki"
        let status = (try? run("/bin/bash", [script, out]).status) ?? -1
        precondition(status == 0, "make-pki.sh failed (\(status))")
        return out
    }()

    static func path(_ file: String) -> String { directory + "/" + file }

    /// The DER of certificate NAME.pem, converted by the openssl CLI (not by the code under test).
    static func der(_ name: String) throws -> [UInt8] {
        let (status, output) = try run("/usr/bin/openssl", ["x509", "-in", path(name + ".pem"), "-outform", "DER"])
        guard status == 0, !output.isEmpty else { throw POSIXError(.EIO) }
        return output
    }

    private static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: [UInt8]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, Array(output))
    }
}

/// `openssl s_server` on 127.0.0.1, on a free port; stopped by its PID.
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
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, process.isRunning {
            if canConnect(port: port) { return }   // one readiness connection, before any probe is counted
            usleep(20_000)
        }
        stop()
        throw POSIXError(.ECONNREFUSED)
    }

    /// The genuine.test leaf with its intermediate, plus `extra` arguments.
    convenience init(genuine extra: [String]) throws {
        try self.init(["-cert", ProbePKI.path("genuine.pem"), "-key", ProbePKI.path("genuine.key"),
                       "-cert_chain", ProbePKI.path("genuine.chain.pem")] + extra)
    }

    /// SIGKILL: the test runner's children may inherit a mask in which SIGTERM is blocked.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// An event loop running on its own thread, as a worker's does.
final class LoopThread: @unchecked Sendable {
    let loop: EventLoop
    /// Written once before `init` returns, read-only afterwards.
    private var thread = pthread_t()
    private let finished = DispatchSemaphore(value: 0)

    init(index: Int) throws {
        loop = try EventLoop(index: index)
        let started = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            thread = pthread_self()
            started.signal()
            loop.run()
            finished.signal()
        }
        started.wait()
    }

    /// Whether the calling thread is this loop's.
    var isCurrent: Bool { pthread_equal(pthread_self(), thread) != 0 }

    /// Stops the loop from inside (a loopbreak before `run` starts would be lost) and waits for its thread.
    func stop() {
        loop.execute { [loop] in loop.stop() }
        finished.wait()
    }
}

/// What a completion saw.
struct Answer: Sendable {
    var result: ProbeResult
    /// Whether it ran on the thread of the loop it was asked for.
    var onOwnLoop: Bool
    /// Whether `probe` had already returned.
    var afterReturn: Bool
    var seconds: Double
}

/// Collects completions from any thread.
final class Answers: Sendable {
    private let answers = Lock<[Answer]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func add(_ answer: Answer) {
        answers.withLock { $0.append(answer) }
        arrived.signal()
    }

    /// Waits for `count` answers in all (nil after `seconds` without them).
    func wait(for count: Int, seconds: Double = 15) -> [Answer]? {
        let deadline = DispatchTime.now() + seconds
        while answers.withLock({ $0.count }) < count {
            if arrived.wait(timeout: deadline) == .timedOut { return nil }
        }
        return answers.withLock { $0 }
    }
}

extension Prober {
    /// Asks from `loopThread`'s own thread (as a tunnel does); the answer lands in `answers`.
    func probe(_ key: ProbeKey, from loopThread: LoopThread, fresh: Bool = false, into answers: Answers) {
        let start = Date()
        loopThread.loop.execute { [self] in
            let returned = Atomic<Bool>(false)
            probe(key, on: loopThread.loop, fresh: fresh) { result, _ in
                answers.add(Answer(result: result, onOwnLoop: loopThread.isCurrent, afterReturn: returned.load(ordering: .relaxed),
                                   seconds: Date().timeIntervalSince(start)))
            }
            returned.store(true, ordering: .relaxed)
        }
    }

    /// One probe, waited for.
    func probeAndWait(_ key: ProbeKey, from loopThread: LoopThread, fresh: Bool = false) -> Answer? {
        let answers = Answers()
        probe(key, from: loopThread, fresh: fresh, into: answers)
        return answers.wait(for: 1)?.first
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    let milliseconds = Atomic<Int64>(1_000_000)
    func advance(_ delta: Int64) { milliseconds.add(delta, ordering: .relaxed) }
    var read: @Sendable () -> Int64 { { [self] in milliseconds.load(ordering: .relaxed) } }
}

/// A TCP relay on 127.0.0.1 in front of an upstream port that counts the connections it accepts: the honest
/// count of handshakes that reached the server. Optionally waits before connecting upstream, to keep a probe
/// in flight for a while. Blocking sockets, a thread per connection.
final class CountingRelay: @unchecked Sendable {
    let port: UInt16
    private let listenFD: Int32
    private let upstreamPort: Atomic<UInt16>
    private let delayMicroseconds: UInt32
    private let acceptedCount = Atomic<Int>(0)
    private let acceptorDone = DispatchSemaphore(value: 0)

    var accepted: Int { acceptedCount.load(ordering: .relaxed) }

    init(upstreamPort: UInt16, delayMilliseconds: Int = 0) throws {
        self.upstreamPort = Atomic(upstreamPort)
        delayMicroseconds = UInt32(delayMilliseconds * 1000)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: 0)
        guard withSockaddr(&address, { bind(fd, $0, $1) }) == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listenFD = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listenFD, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    break   // shut down by `stop`
                }
                acceptedCount.add(1, ordering: .relaxed)
                Thread.detachNewThread { [self] in relay(client) }
            }
            acceptorDone.signal()
        }
    }

    /// Sends the connections accepted from now on to `port` (a pool's other member behind the same address).
    func route(to port: UInt16) { upstreamPort.store(port, ordering: .relaxed) }

    private func relay(_ client: Int32) {
        defer { close(client) }
        if delayMicroseconds > 0 { usleep(delayMicroseconds) }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(upstream) }
        var address = loopback(port: upstreamPort.load(ordering: .relaxed))
        guard withSockaddr(&address, { connect(upstream, $0, $1) }) == 0 else { return }
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while poll(&fds, 2, 10_000) > 0 {
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = entry.fd, to = fds[1 - index].fd
                let count = read(from, &buffer, buffer.count)
                guard count > 0 else { return }
                var sent = 0
                while sent < count {
                    let n = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                    guard n > 0 else { return }
                    sent += n
                }
            }
        }
    }

    func stop() {
        shutdown(listenFD, Int32(SHUT_RDWR))   // wakes the blocked accept
        acceptorDone.wait()
        close(listenFD)
    }
}

/// A socket that listens on 127.0.0.1 and never accepts: connects complete (the kernel's backlog), nothing answers.
final class SilentListener {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(port: 0)
        guard withSockaddr(&address, { bind(fd, $0, $1) }) == 0, listen(fd, 8) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }
}

func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

func withSockaddr<R>(_ address: inout sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
}

/// A port nobody listens on right now.
func freePort() throws -> UInt16 {
    let listener = try SilentListener()
    return listener.port   // closed on return
}

func canConnect(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopback(port: port)
    return withSockaddr(&address) { connect(fd, $0, $1) } == 0
}

func key(port: UInt16, serverName: String? = "genuine.test", alpn: [String] = [], maxVersion: TLSVersion? = nil) -> ProbeKey {
    ProbeKey(address: SocketAddress(numeric: "127.0.0.1", port: port)!,
             offer: .minimal(serverName: serverName, alpn: alpn, maxVersion: maxVersion))
}
