import ArgumentParser
import ChainwatchCore
import ChainwatchEventLoop
import Foundation
import Glibc

/// `chainwatch ctl`: the admin listener from the command line, for an operator at a shell.
struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Ask a running proxy's admin listener (--admin): its state, metrics, health, or clear a known-bad mark or a cache.",
        discussion: """
            Actions:
              state                     the policy, known-bad marks, probe cache and probes in flight (JSON)
              metrics                   the Prometheus metrics
              health                    /healthz and /readyz
              clear-known-bad [HOST[:PORT]]   forget known-bad marks (all, a host's, or one port's): its clients stop getting 403
              clear-verdicts            forget cached verdicts (the next connection to each server is judged afresh)
              clear-probes              forget cached probe results

            Before the action, ctl asks the listener which process it is (GET /process) and prints it on standard \
            error: pid, proxy address, admin address, start time. Another process may hold the default admin \
            address; --pid makes ctl refuse to act on any process but that one.
            """)

    @Option(name: .customLong("admin"), help: "The admin listener's ADDR:PORT.")
    var admin = Run.defaultAdmin

    @Option(help: "Act only if the admin listener belongs to this process (its pid, as `run` prints it at start).")
    var pid: Int32?

    @Argument(help: "state, metrics, health, clear-known-bad, clear-verdicts or clear-probes.")
    var action: String

    @Argument(help: "For clear-known-bad: HOST or HOST:PORT.")
    var target: String?

    func validate() throws {
        guard SocketAddress(numeric: admin) != nil else { throw ValidationError("--admin: \(admin) is not ADDR:PORT or [V6]:PORT") }
        guard ["state", "metrics", "health", "clear-known-bad", "clear-verdicts", "clear-probes"].contains(action) else {
            throw ValidationError("unknown action \(action): state, metrics, health, clear-known-bad, clear-verdicts or clear-probes")
        }
        if target != nil && action != "clear-known-bad" { throw ValidationError("\(action) takes no argument") }
    }

    func run() throws {
        try identify()
        switch action {
        case "state": try show("GET", "/state")
        case "metrics": try show("GET", "/metrics")
        case "health":
            let live = try show("GET", "/healthz", failOnError: false)
            let ready = try show("GET", "/readyz", failOnError: false)
            if live != 200 || ready != 200 { throw ExitCode(1) }
        case "clear-known-bad":
            var path = "/known-bad/clear"
            if let target {
                let (host, port) = Self.hostAndPort(target)
                path += "?host=" + Self.encode(host)
                if let port {
                    guard UInt16(port) != nil else { throw ValidationError("\(target): the port is not a number") }
                    path += "&port=" + port
                }
            }
            try show("POST", path)
        case "clear-verdicts": try show("POST", "/verdicts/clear")
        default: try show("POST", "/probes/clear")
        }
    }

    /// Says which process the admin listener belongs to (stderr: stdout stays the answer's); with --pid, refuses
    /// another. A listener that does not say (an older chainwatch, or something else) is named as such.
    private func identify() throws {
        let address = SocketAddress(numeric: admin)!
        let (status, body) = try AdminClient.request(method: "GET", path: "/process", to: address)
        let process = status == 200 ? (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] : nil
        let found = (process?["pid"] as? Int).map(Int32.init)
        if let process, let found {
            let listen = process["listen"] as? String ?? "?", started = process["start_time"] as? String ?? "?"
            FileHandle.standardError.write(Data("chainwatch ctl: \(admin) is chainwatch pid \(found), proxy on \(listen), started \(started)\n".utf8))
        } else {
            FileHandle.standardError.write(Data("chainwatch ctl: \(admin) does not say which process it is (HTTP \(status) for /process)\n".utf8))
        }
        if let pid, found != pid {
            FileHandle.standardError.write(Data("chainwatch ctl: not acting: --pid \(pid), but \(admin) is \(found.map { "pid \($0)" } ?? "an unknown process")\n".utf8))
            throw ExitCode(1)
        }
    }

    /// Sends one request, prints the body; fails on a non-2xx answer unless told not to. Returns the status.
    @discardableResult
    private func show(_ method: String, _ path: String, failOnError: Bool = true) throws -> Int {
        let (status, body) = try AdminClient.request(method: method, path: path, to: SocketAddress(numeric: admin)!)
        FileHandle.standardOutput.write(Data(body))
        if failOnError, !(200..<300).contains(status) {
            FileHandle.standardError.write(Data("chainwatch ctl: \(method) \(path): HTTP \(status)\n".utf8))
            throw ExitCode(1)
        }
        return status
    }

    /// `HOST`, `HOST:PORT`, `[V6]:PORT`, or a bare IPv6 address (more than one colon: no port).
    static func hostAndPort(_ target: String) -> (host: String, port: String?) {
        if target.hasPrefix("["), let close = target.firstIndex(of: "]") {
            let host = String(target[target.index(after: target.startIndex)..<close])
            let rest = target[target.index(after: close)...]
            return (host, rest.hasPrefix(":") ? String(rest.dropFirst()) : nil)
        }
        let parts = target.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 2 ? (String(parts[0]), String(parts[1])) : (target, nil)
    }

    static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }
}

/// A one-request HTTP/1.0 client over a plain socket (the admin listener is local; no TLS, no redirects).
enum AdminClient {
    static func request(method: String, path: String, to address: SocketAddress) throws -> (Int, [UInt8]) {
        let fd = socket(Int32(address.family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CLIError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard address.connect(fd) else {
            throw CLIError("cannot reach the admin listener at \(address): \(String(cString: strerror(errno))) (is chainwatch running with --admin \(address)?)")
        }
        let request = Array(("\(method) \(path) HTTP/1.0\r\nHost: \(address)\r\nContent-Length: 0\r\n"
            + "\(AdminRequestCheck.headerName): \(AdminRequestCheck.headerValue)\r\n\r\n").utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
            throw CLIError("sending to \(address): \(String(cString: strerror(errno)))")
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { throw CLIError("reading from \(address): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            response += chunk[..<n]
        }
        guard let end = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw CLIError("\(address): not an HTTP answer") }
        let statusLine = String(decoding: response[..<(response.firstIndex(of: 0x0D) ?? end.lowerBound)], as: UTF8.self)
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw CLIError("\(address): bad status line \(statusLine)") }
        return (status, Array(response[end.upperBound...]))
    }
}
