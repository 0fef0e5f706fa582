import ArgumentParser
import ChainwatchEventLoop
import ChainwatchProcess
import Foundation
import Glibc

/// `chainwatch selftest`: proves end to end, with real TLS servers on loopback, that the proxy passes a genuine
/// chain, blocks and alerts on a forged one, and fails closed when a handshake never shows its chain.
struct Selftest: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Prove pass, block, alert and fail-closed end to end, with TLS servers of its own (TLS 1.2 and 1.3), against its own proxy or a running one.",
        discussion: """
            Without --against, it makes a genuine chain and a forgery (a root with the genuine root's name, a leaf with \
            its names) with the openssl command, serves each over TLS 1.2 and 1.3 on loopback, starts this binary as a \
            proxy with a policy for them, and checks through the proxy, as a client that validates nothing:

              pass: the genuine chain, block rule; the page arrives, no line
              block: the forgery, block rule; no server byte reaches the client
              known-bad: the same host again; 403 to its CONNECT
              alert: the forgery, alert rule; the page arrives with an alert line
              fail-closed: ServerHello, then a stall, block rule; no server byte

            With --transparent (root, the nft command), the same cases once more through a --transparent listener of \
            its proxy, as a gateway's clients reach it: an nftables table of its own (chainwatch_selftest_PID, hook \
            output) redirects its client's connections (from 127.0.0.2, with no proxy setting) to its servers onto \
            that listener; the proxy reads each one's original destination and the ClientHello's name. The forgery's \
            second connection is blocked again (a redirected connection with a name is judged anew: it marks no \
            address known-bad), the lines and access lines must say `transparent`, a connection straight to the \
            listener is refused (its destination is the proxy itself), and on a port the table redirects for every \
            source, the proxy's own connections included (no exemption), the loop guard must reset the proxy's own \
            connection. The table is deleted at the end, and on SIGINT or SIGTERM. Run it in a network namespace of \
            its own (ip netns exec) to leave the machine's ruleset alone altogether.

            With --against ADDR:PORT, it checks a running proxy, whose policy it does not know: a forgery (from a root \
            no policy can know) and a stalled TLS 1.3 handshake must each be blocked (no server byte reaches the client) \
            or reported (a verdict other than pass counted by the admin listener's /metrics, --admin). The proxy must \
            be allowed to reach --server-address (a proxy listening on a non-loopback address refuses loopback \
            destinations unless --allow-destination says otherwise): it first opens a tunnel to each of its servers without a \
            handshake, and a proxy that refuses those (a 403 before any chain) is a set-up failure, not a block. Count-based: other traffic's findings during \
            the run can make a passed forgery look reported; run it when the proxy is quiet, or read the lines.

            Exit status: 0 when every check passed, 1 when one failed, 2 when the test could not be set up.
            """)

    @Option(help: "Check this running proxy (ADDR:PORT) instead of starting one.")
    var against: String?

    @Option(help: "With --against: the proxy's admin listener (ADDR:PORT), where findings are counted; `off` to count only blocks.")
    var admin = Run.defaultAdmin

    @Option(help: "IPv4 address the selftest's TLS servers listen on (the proxy must be allowed to reach it).")
    var serverAddress = "127.0.0.1"

    @Option(help: "Seconds a client waits for the proxy or a server before giving up.")
    var timeout = 10.0

    @Flag(help: "Also check transparent mode: the same cases through a --transparent listener, reached by an nftables redirect rule of its own (needs root and the nft command; not with --against).")
    var transparent = false

    @Flag(help: "Keep the temporary directory (certificates, policy, the proxy's logs) and print its path.")
    var keep = false

    func validate() throws {
        if let against, SocketAddress(numeric: against) == nil { throw ValidationError("--against: \(against) is not ADDR:PORT") }
        if against != nil, admin != "off", SocketAddress(numeric: admin) == nil { throw ValidationError("--admin: \(admin) is not ADDR:PORT or off") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        if transparent, against != nil {
            throw ValidationError("--transparent checks the selftest's own proxy, not one given with --against (a gateway's rule redirects other hosts' connections, which the selftest cannot make)")
        }
    }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        // mkdtemp: a new directory of its own (mode 0700, an unpredictable name). A fixed name under /tmp could be
        // made first by another local user, and root would then write through that user's symbolic links.
        var template = Array((NSTemporaryDirectory() + "chainwatch-selftest.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            FileHandle.standardError.write(Data("chainwatch selftest: cannot run: mkdtemp: \(String(cString: strerror(errno)))\n".utf8))
            throw ExitCode(2)
        }
        let directory = URL(fileURLWithPath: String(cString: made), isDirectory: true)
        defer {
            if keep { print("kept: \(directory.path)") } else { try? FileManager.default.removeItem(at: directory) }
        }
        let passed: Bool
        do {
            if transparent { try SelftestRedirect.checkAllowed() }   // before any certificate or server is made
            var run = try SelftestRun(directory: directory, serverAddress: serverAddress, timeout: timeout)
            defer { run.stop() }
            if let against {
                let adminAddress = admin == "off" ? nil : SocketAddress(numeric: admin)
                passed = try run.checkRunningProxy(SocketAddress(numeric: against)!, admin: adminAddress)
            } else {
                passed = try run.checkOwnProxy(transparent: transparent)
            }
        } catch let error as SelftestError {
            FileHandle.standardError.write(Data("chainwatch selftest: cannot run: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        print(passed ? "selftest: ok" : "selftest: FAILED")
        if !passed { throw ExitCode(1) }
    }
}

/// The servers of one selftest run and the checks made through a proxy.
struct SelftestRun {
    static let domain = "selftest.chainwatch.test"
    let directory: URL
    let certificates: SelftestCertificates
    let genuine: SelftestTLSServer
    let forged: SelftestTLSServer
    let stall: SelftestStallServer
    let timeout: Double
    private var proxy: Spawned?
    private var redirect: SelftestRedirect?
    /// With --transparent: a port its table redirects for every source (the loop guard's check).
    private var loopPort: UInt16?

    static let genuinePage = "chainwatch selftest: the genuine server\n"
    static let forgedPage = "chainwatch selftest: the forgery\n"

    /// The names the leaves carry: one per case and TLS version, so no verdict, cache entry or mark is shared.
    static func name(_ version: String, _ what: String, _ rule: String) -> String { "\(version).\(what).\(rule).\(domain)" }
    static let names: [String] = ["tls12", "tls13"].flatMap { v in
        [name(v, "genuine", "block"), name(v, "forged", "block"), name(v, "forged", "alert"), name(v, "stall", "block"),
         name(v, "forged", "against"), name(v, "stall", "against")]
            + [name(v, "genuine-transparent", "block"), name(v, "forged-transparent", "block"),
               name(v, "forged-transparent", "alert"), name(v, "stall-transparent", "block"),
               name(v, "listener-transparent", "block"), name(v, "loop-transparent", "block")]
    }

    init(directory: URL, serverAddress: String, timeout: Double) throws {
        self.directory = directory
        self.timeout = timeout
        certificates = try SelftestCertificates(in: directory, names: Self.names)
        genuine = try SelftestTLSServer(address: serverAddress, chain: certificates.genuineChain, key: certificates.genuineKey, page: Self.genuinePage)
        forged = try SelftestTLSServer(address: serverAddress, chain: certificates.forgedChain, key: certificates.forgedKey, page: Self.forgedPage)
        stall = try SelftestStallServer(address: serverAddress, upstreamPort: genuine.port)
        for server in [genuine, forged, stall] as [SelftestListener] { server.start() }
    }

    mutating func stop() {
        for server in [genuine, forged, stall] as [SelftestListener] { server.stop() }
        proxy?.stop(grace: 5)
        proxy = nil
        redirect?.remove()
        redirect = nil
    }

    // MARK: - Own proxy

    mutating func checkOwnProxy(transparent: Bool) throws -> Bool {
        let policy = directory.appendingPathComponent("policy.yaml")
        let hosts = directory.appendingPathComponent("hosts")
        let alerts = directory.appendingPathComponent("alerts.jsonl")
        let access = directory.appendingPathComponent("access.jsonl")
        let log = directory.appendingPathComponent("proxy.log")
        try """
            version: 1
            defaults:
              action: alert
              anchors: [system]
            rules:
              - name: selftest-block
                match: [.block.\(Self.domain)]
                action: block
                anchors: [\(certificates.genuineRoot.path)]
              - name: selftest-alert
                match: [.alert.\(Self.domain)]
                action: alert
                anchors: [\(certificates.genuineRoot.path)]

            """.write(to: policy, atomically: false, encoding: .utf8)
        try Self.names.map { "\(genuine.address) \($0)\n" }.joined().write(to: hosts, atomically: false, encoding: .utf8)
        let port = try freePort()
        var arguments = ["run", "--listen", "127.0.0.1:\(port)", "--policy", policy.path, "--hosts", hosts.path,
                         "--alert-log", alerts.path, "--access-log", access.path, "--admin", "off", "--probe-timeout", "2", "--threads", "1"]
        let transparentPort = transparent ? try freePort() : nil
        if let transparentPort { arguments += ["--transparent", "127.0.0.1:\(transparentPort)"] }
        FileManager.default.createFile(atPath: log.path, contents: nil)
        proxy = try Spawned("/proc/self/exe", arguments, outputPath: log.path)
        try waitUntilListening(port: port, log: log)
        print("proxy: 127.0.0.1:\(port) (this binary, pid \(proxy?.pid ?? 0)); servers: genuine \(genuine.address):\(genuine.port), forged :\(forged.port), stalling :\(stall.port)")
        if let transparentPort {
            let loopPort = try freePort()
            self.loopPort = loopPort
            try waitUntilListening(port: transparentPort, log: log)
            redirect = try SelftestRedirect(directory: directory, serverAddress: genuine.address, ports: [genuine.port, forged.port, stall.port],
                                            loopPort: loopPort, listenerPort: transparentPort, proxyPID: proxy?.pid)
            print("transparent: 127.0.0.1:\(transparentPort); nftables table \(redirect!.table) redirects \(SelftestRedirect.clientAddress) to the servers there")
        }

        let client = SelftestClient(proxyHost: "127.0.0.1", proxyPort: port, timeout: timeout)
        var results: [(String, Bool, String)] = []
        var expectedLines: [(name: String, action: String?, transparent: Bool)] = []
        for transparent in transparent ? [false, true] : [false] {
            let suffix = transparent ? "-transparent" : ""
            let via = transparent ? " (transparent)" : ""
            /// One tunnel to `server` for `name`: CONNECT through the proxy, or straight to the server from the
            /// redirected client address.
            func fetch(_ name: String, _ server: SelftestListener, tls13: Bool) -> SelftestOutcome {
                transparent
                    ? client.fetchDirect(address: server.address, port: server.port, source: SelftestRedirect.clientAddress, serverName: name, tls13: tls13)
                    : client.fetch(target: "\(name):\(server.port)", serverName: name, tls13: tls13)
            }
            for (version, tls13) in [("tls12", false), ("tls13", true)] {
                let label = (tls13 ? "TLS 1.3" : "TLS 1.2") + via
                let passName = Self.name(version, "genuine" + suffix, "block")
                let pass = fetch(passName, genuine, tls13: tls13)
                results.append(("\(label) pass", pageIs(pass, Self.genuinePage), pass.summary))
                expectedLines.append((passName, nil, transparent))

                let blockName = Self.name(version, "forged" + suffix, "block")
                let block = fetch(blockName, forged, tls13: tls13)
                results.append(("\(label) block", isNoServerBytes(block), block.summary))
                expectedLines.append((blockName, "block", transparent))
                // Known bad: a 403 to its CONNECT. A redirected connection has no CONNECT, and its upstream is named
                // by address while its hello names the host: it marks nothing (KnownBadRule), and is judged again.
                let again = fetch(blockName, forged, tls13: tls13)
                results.append(transparent ? ("\(label) blocked again", isNoServerBytes(again), again.summary)
                                           : ("\(label) known-bad", again == .refused(status: 403), again.summary))

                let alertName = Self.name(version, "forged" + suffix, "alert")
                let alert = fetch(alertName, forged, tls13: tls13)
                results.append(("\(label) alert", pageIs(alert, Self.forgedPage), alert.summary))
                expectedLines.append((alertName, "alert", transparent))

                let stallName = Self.name(version, "stall" + suffix, "block")
                let stalled = fetch(stallName, stall, tls13: tls13)
                results.append(("\(label) fail-closed", isNoServerBytes(stalled), stalled.summary))
                expectedLines.append((stallName, "block", transparent))
            }
        }
        if let transparentPort, let loopPort {
            // Names of their own: the loop guard's tunnel is blocked probe_failed with a line (its probe is reset
            // too), written asynchronously; under the genuine case's name it could be read as that case's false alarm.
            let listenerName = Self.name("tls13", "listener-transparent", "block")
            let loopName = Self.name("tls13", "loop-transparent", "block")
            // Straight to the listener: its original destination is the proxy itself, which is never a destination.
            // (Counted from here: the start-up check of the listener was such a connection too.)
            let refusal = "source.ip=\(SelftestRedirect.clientAddress) tunnel.id="
            let own = client.fetchDirect(address: "127.0.0.1", port: transparentPort, source: SelftestRedirect.clientAddress, serverName: listenerName, tls13: true)
            let refused = waitFor(log, containing: "the proxy's transparent listener: not a destination", from: refusal)
            results.append(("transparent: the listener itself refused", isNoServerBytes(own) && refused,
                            "\(own.summary); \(refused ? "the proxy refused itself as the destination" : "no refusal in its log")"))
            // A port the rule redirects for every source, the proxy's own connection included (a gateway without the
            // exemption): the tunnel's upstream connection comes back to the listener, and the loop guard resets it.
            let loop = client.fetchDirect(address: genuine.address, port: loopPort, source: SelftestRedirect.clientAddress, serverName: loopName, tls13: true)
            let reset = waitFor(log, containing: "chainwatch's own", from: nil)
            results.append(("transparent loop guard", isNoServerBytes(loop) && reset,
                            "\(loop.summary); \(reset ? "the proxy reset its own connection redirected back" : "no reset of its own connection in its log")"))
        }
        // The lines: each expected one within 3 s (the writer is asynchronous), and none for a genuine chain.
        var lines: [[String: Any]] = []
        var accessLines: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(3)
        repeat {
            lines = readLines(alerts)
            accessLines = readLines(access)
            let missing = expectedLines.contains { expected in
                (expected.action != nil && line(for: expected.name, in: lines) == nil) || (expected.transparent && line(for: expected.name, in: accessLines) == nil)
            }
            if !missing { break }
            usleep(100_000)
        } while Date() < deadline
        for expected in expectedLines {
            let found = line(for: expected.name, in: lines)
            let event = found?["event"] as? [String: Any]
            let action = event?["action"] as? String, reason = event?["reason"] as? String
            let label = "line for \(expected.name.split(separator: ".").prefix(3).joined(separator: "."))"
            if let wanted = expected.action {
                let via = ((found?["chainwatch"] as? [String: Any])?["client"] as? [String: Any])?["via"] as? String
                let viaRight = !expected.transparent || via == "transparent"
                results.append((label, action == wanted && viaRight,
                                found == nil ? "no line" : "\(action ?? "?") \(reason ?? "?")\(expected.transparent ? ", via \(via ?? "nothing")" : "")"))
            } else {
                results.append((label, found == nil, found == nil ? "none, as for a genuine chain" : "a false alarm: \(action ?? "?") \(reason ?? "?")"))
            }
            if expected.transparent {
                // The access line: the tunnel went through the proxy (a redirect that missed would reach the server
                // straight, and a genuine page would prove nothing), with the original destination and the method.
                let entry = line(for: expected.name, in: accessLines)
                let method = ((entry?["http"] as? [String: Any])?["request"] as? [String: Any])?["method"] as? String
                let destination = entry?["destination"] as? [String: Any]
                let port = destination?["port"] as? Int, ip = destination?["ip"] as? String
                let server: SelftestListener = expected.name.contains(".genuine") ? genuine : expected.name.contains(".stall") ? stall : forged
                results.append(("access line for \(expected.name.split(separator: ".").prefix(3).joined(separator: "."))",
                                method == "TRANSPARENT" && ip == server.address && port == Int(server.port),
                                entry == nil ? "no access line: the connection did not reach the proxy" : "\(method ?? "?") to \(ip ?? "?"):\(port.map(String.init) ?? "?")"))
            }
        }
        return report(results, log: log)
    }

    // MARK: - A running proxy

    mutating func checkRunningProxy(_ address: SocketAddress, admin: SocketAddress?) throws -> Bool {
        print("proxy: \(address); servers: forged \(forged.address):\(forged.port), stalling :\(stall.port); findings counted at: \(admin.map { "\($0)" } ?? "nowhere (--admin off): only blocks count")")
        let client = SelftestClient(proxyHost: address.ip, proxyPort: address.port, timeout: timeout)
        // A 403 counts as a block only if the proxy lets a tunnel to the same server open at all: one that refuses
        // the destination itself (loopback, say) never sees a chain there, and proves nothing.
        for port in Set([forged.port, stall.port]).sorted() {
            switch client.refusal(target: "\(forged.address):\(port)") {
            case .refused(403)?:   // chainwatch's answer to a destination its rules refuse
                throw SelftestError("the proxy does not open a tunnel to the selftest's server \(forged.address):\(port) (the proxy answered 403) before any handshake, so it cannot judge a chain there: allow that destination (chainwatch run --allow-destination \(forged.address)/32) or give --server-address an address it may reach")
            case .refused(let status)?:
                throw SelftestError("\(address) answered the selftest's CONNECT with \(status), where an HTTP proxy opens the tunnel (200) and chainwatch refuses a destination with 403: is it an HTTP proxy? (chainwatch run listens on 127.0.0.1:3128)")
            case .proxyError(let why)?:
                throw SelftestError("cannot use \(address) as a proxy: \(why)")
            default:
                break
            }
        }
        var results: [(String, Bool, String)] = []
        let cases: [(String, String, UInt16, Bool)] = [
            ("TLS 1.2 forgery flagged", Self.name("tls12", "forged", "against"), forged.port, false),
            ("TLS 1.3 forgery flagged", Self.name("tls13", "forged", "against"), forged.port, true),
            ("TLS 1.3 stalled handshake flagged", Self.name("tls13", "stall", "against"), stall.port, true),
        ]
        for (label, name, port, tls13) in cases {
            let before = admin.flatMap(findingCount)
            let outcome = client.fetch(target: "\(forged.address):\(port)", serverName: name, tls13: tls13)
            if case .proxyError = outcome { results.append((label, false, outcome.summary)); continue }
            if isNoServerBytes(outcome) || outcome == .refused(status: 403) {
                results.append((label, true, "blocked: \(outcome.summary)"))
                continue
            }
            if case .refused = outcome { results.append((label, false, outcome.summary)); continue }
            // Passed to the client: it must have been reported. The count may lag the tunnel by the writer's moment.
            var after = admin.flatMap(findingCount)
            let deadline = Date().addingTimeInterval(3)
            while let b = before, let a = after, a <= b, Date() < deadline {
                usleep(100_000)
                after = admin.flatMap(findingCount)
            }
            if let b = before, let a = after, a > b {
                results.append((label, true, "reported (\(a - b) finding(s) counted); \(outcome.summary)"))
            } else {
                results.append((label, false, "passed unflagged: \(outcome.summary)\(admin == nil ? "" : before == nil ? "; the admin listener did not answer" : "")"))
            }
        }
        return report(results, log: nil)
    }

    /// Verdicts other than pass counted so far (`chainwatch_verdicts_total` without `action="pass"`).
    private func findingCount(_ admin: SocketAddress) -> Int? {
        guard let (status, body) = try? AdminClient.request(method: "GET", path: "/metrics", to: admin), status == 200 else { return nil }
        var total = 0
        for line in String(decoding: body, as: UTF8.self).split(separator: "\n") where line.hasPrefix("chainwatch_verdicts_total{") {
            guard !line.contains("action=\"pass\""), let value = line.split(separator: " ").last.flatMap({ Double($0) }) else { continue }
            total += Int(value)
        }
        return total
    }

    // MARK: - Helpers

    private func report(_ results: [(String, Bool, String)], log: URL?) -> Bool {
        for (label, ok, detail) in results {
            print("\(ok ? "ok  " : "FAIL") \(label): \(detail)")
        }
        let passed = results.allSatisfy(\.1)
        if !passed, let log, let text = try? String(contentsOf: log, encoding: .utf8) {
            print("the proxy's log:\n" + text.split(separator: "\n").suffix(20).joined(separator: "\n"))
        }
        return passed
    }

    private func isNoServerBytes(_ outcome: SelftestOutcome) -> Bool {
        if case .noServerBytes = outcome { return true }
        return false
    }

    private func pageIs(_ outcome: SelftestOutcome, _ page: String) -> Bool {
        if case .page(let body, _) = outcome { return body == page }
        return false
    }

    private func readLines(_ file: URL) -> [[String: Any]] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    private func line(for name: String, in lines: [[String: Any]]) -> [String: Any]? {
        lines.first { (($0["tls"] as? [String: Any])?["client"] as? [String: Any])?["server_name"] as? String == name }
    }

    /// Whether `file` has a line with `text` (and `source`, when given) within 3 s.
    private func waitFor(_ file: URL, containing text: String, from source: String?) -> Bool {
        let deadline = Date().addingTimeInterval(3)
        repeat {
            if let content = try? String(contentsOf: file, encoding: .utf8),
               content.split(separator: "\n").contains(where: { line in line.contains(text) && (source == nil || line.contains(source!)) }) {
                return true
            }
            usleep(100_000)
        } while Date() < deadline
        return false
    }

    private func freePort() throws -> UInt16 {
        let probe = try SelftestListener(address: "127.0.0.1")
        defer { probe.stop() }
        return probe.port
    }

    private mutating func waitUntilListening(port: UInt16, log: URL) throws {
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            guard proxy?.running() == true else {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw SelftestError("the proxy exited at start (status \(proxy?.exitCode ?? -1)):\n\(text)")
            }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr)
            let ok = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
            if ok { shutdown(fd, Int32(SHUT_WR)); var b: UInt8 = 0; setTimeouts(fd, seconds: 2); _ = read(fd, &b, 1) }
            close(fd)
            if ok { return }
            usleep(50_000)
        }
        throw SelftestError("the proxy did not listen on 127.0.0.1:\(port) within 15 s")
    }
}
