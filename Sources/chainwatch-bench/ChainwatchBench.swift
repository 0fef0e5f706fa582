import ArgumentParser
import CBuildInfo
import ChainwatchCore
import Foundation

/// `chainwatch-bench`: load generator for chainwatch and other CONNECT proxies.
@main
struct ChainwatchBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chainwatch-bench",
        abstract: "Load-test a CONNECT proxy (chainwatch, or any other) against a direct baseline.",
        discussion: """
            Every run is bounded by --count or --duration. With --direct and a proxy, the direct baseline runs \
            first, in the same invocation. The bench starts its own upstream on 127.0.0.1 (builtin, or nginx for \
            HTTPS) and, with --start-proxy, the proxy too; interrupted, it stops what it started.

            Exit status: 0 when every byte was right and no session failed; 1 when any session failed or any byte \
            was wrong; 2 on a setup error (a value it cannot use, a report file it cannot write); 64 when an option \
            cannot be read at all.
            """,
        version: Observer.version + (String(cString: c_chainwatch_commit()).isEmpty ? "" : " (commit \(String(cString: c_chainwatch_commit())))"),
        subcommands: [Handshake.self, Bulk.self, Idle.self, Mixed.self, Plot.self, Costs.self])
}

/// Options every scenario takes.
struct CommonOptions: ParsableArguments {
    @Option(help: "A running proxy to measure (HOST:PORT).")
    var proxy: String?
    @Option(help: "The proxy's PID, to read its CPU time and RSS from /proc (with --proxy).")
    var proxyPid: Int32?
    @Option(help: "Start this proxy executable on a free 127.0.0.1 port, measure it, stop it by its PID.")
    var startProxy: String?
    @Option(help: ArgumentHelp("Arguments for --start-proxy, space-separated; {port}, {listen}, {policy}, {dir}, {socks}, {transparent} are replaced.",
                               valueName: "args"))
    var proxyArgs: String?
    @Option(help: "Seconds --start-proxy waits for the proxy to listen (more for one run under valgrind or another profiler).")
    var startTimeout = 10.0
    @Option(help: "Name of the proxy in reports (default: chainwatch, or the executable's name).")
    var proxyName: String?
    @Option(help: "With --start-proxy: comma-separated policies to run with, each a separate proxy start: block, alert, or flagged (alert, and every tunnel's chain fails: an alert line per connection).")
    var policy: String?
    @Option(help: ArgumentHelp("How sessions reach the proxy, comma-separated, each measured in turn against the same proxy start: connect (HTTP CONNECT), socks (SOCKS 5; --start-proxy adds --socks on a free port unless its arguments say {socks}) and transparent (no proxy setting: sessions connect to the upstream from 127.0.0.3 and an nftables table of the bench's own redirects them to a --transparent listener it adds unless its arguments say {transparent}; root and the nft command, --start-proxy only). With --proxy: connect or socks, the address given being that listener.",
                               valueName: "connect,socks,transparent"))
    var via = "connect"
    @Flag(help: "Run the same load without the proxy too (first), as the baseline; alone: only the baseline.")
    var direct = false
    @Option(help: "An HTTPS upstream already running (HOST:PORT); bodies are then not checked byte by byte.")
    var upstream: String?
    @Option(help: "A raw upstream already running (another bench's builtin), for bulk/idle.")
    var rawUpstream: String?
    @Option(help: "The HTTPS upstream the bench starts: builtin or nginx (raw transfers always use builtin).")
    var startUpstream: String = "builtin"
    @Option(help: "nginx worker processes when --start-upstream nginx.")
    var nginxWorkers: Int = 1
    @Option(help: "Comma-separated TLS versions to run: 1.2, 1.3 (handshake, mixed).")
    var tls: String = "1.3"
    @Option(name: [.short, .long], help: "Concurrent sessions (closed loop); idle: tunnels held open.")
    var concurrency: Int = 8
    @Option(help: ArgumentHelp("Open loop: start this many sessions per second on a schedule (-c then caps those in flight; an arrival with no free slot waits and its latency counts from its scheduled time).", valueName: "conn/s"))
    var rate: Double?
        @Option(help: "Client event-loop threads.")
    var threads: Int = 1
    @Option(help: "Bound: seconds to run (idle: seconds to hold). Default 5 when no --count.")
    var duration: Double?
    @Option(help: "Bound: sessions to complete (handshake, bulk, mixed: short sessions).")
    var count: Int?
    @Option(help: "A session with no progress for this many seconds fails.")
    var timeout: Double = 10
    @Option(help: "After --duration, seconds in-flight sessions may take to finish before they are cut off.")
    var grace: Double = 5
    @Option(help: "Stop the run early after this many failed sessions.")
    var maxFailures: Int = 10
    @Option(help: "Write the report as JSON to this file.")
    var json: String?
    @Option(help: "Write an SVG picture to this file: one panel per metric (latency by percentile on a log axis, conn/s, MB/s, proxy CPU per connection and per GiB, memory per idle tunnel).")
    var svg: String?
    @Option(help: "Write the same picture as PNG to this file (needs rsvg-convert: apt-get install librsvg2-bin).")
    var png: String?
    @Option(help: "SNI to send (default: none, as for an IP-literal host).")
    var sni: String?
    @Flag(help: ArgumentHelp("Every session offers a server name never offered before (s<N>.fresh.bench.test, under one wildcard certificate), so a proxy has no cached evidence for it: what a first contact costs and how long it takes.",
                             discussion: "chainwatch then probes every TLS 1.3 (or resumed) session; under block it probes before the session's own handshake."))
    var freshNames = false
    @Flag(help: ArgumentHelp("With --fresh-names: each fresh name gets a leaf certificate of its own from the builtin upstream (its own serial and SAN, minted on first sight under the generated intermediate), so a proxy also meets a chain it has never seen: a cold first contact.",
                             discussion: "Implies --fresh-names. Not with --upstream or --start-upstream nginx (they serve their own certificates)."))
    var freshCertificates = false
    @Option(help: ArgumentHelp("Test only: make the builtin upstream inject a fault (corrupt).", visibility: .hidden))
    var faultInject: String?
    @Flag(help: "Keep the temporary directory (certificates, configs, logs).")
    var keepTemp = false
    @Flag(name: .shortAndLong, help: "No progress messages on stderr.")
    var quiet = false
}

/// Options that size the payloads.
struct PayloadOptions: ParsableArguments {
    @Option(help: "Response body bytes of each short GET.")
    var responseBytes: Int = 1024
    @Option(help: "Bytes per bulk transfer (suffixes K, M, G: binary).")
    var size: String = "64M"
    @Flag(help: "Bulk: send (client → upstream) instead of receive.")
    var upload = false
    @Flag(help: "Resume TLS sessions (tickets) instead of a full handshake each time.")
    var resume = false
}

func parseSize(_ text: String) throws(BenchError) -> Int {
    let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    var digits = text.uppercased()
    var multiplier = 1
    if digits.hasSuffix("IB") { digits.removeLast(2) }
    if let last = digits.last, let unit = units[last] { multiplier = unit; digits.removeLast() }
    guard let value = Int(digits), value >= 0 else { throw BenchError("bad size '\(text)'") }
    return value * multiplier
}

extension CommonOptions {
    func plan(_ scenario: Scenario, _ payload: PayloadOptions, longTransfers: Int = 0) throws(BenchError) -> Plan {
        var source = ProxySource.none
        var name = proxyName ?? "proxy"
        if proxy != nil && startProxy != nil { throw BenchError("give --proxy or --start-proxy, not both") }
        if let proxyPid {
            // A PID that is not there measured nothing, silently ("-" in the CPU and memory columns).
            guard proxy != nil else { throw BenchError("--proxy-pid goes with --proxy (a proxy the bench did not start)") }
            guard proxyPid > 0, kill(proxyPid, 0) == 0 || errno == EPERM else { throw BenchError("--proxy-pid \(proxyPid): no such process") }
        }
        if let proxy { source = .running(try Endpoint(parsing: proxy), pid: proxyPid) }
        if let startProxy {
            guard let executable = which(startProxy) else { throw BenchError("--start-proxy: \(startProxy) is not an executable") }
            let base = URL(fileURLWithPath: executable).lastPathComponent
            name = proxyName ?? base
            let template = proxyArgs ?? (policy == nil ? "run --listen {listen} --alert-log {dir}/alerts.jsonl"
                                         : "run --listen {listen} --alert-log {dir}/alerts.jsonl --policy {policy}")
            source = .start(executable: executable, argumentsTemplate: template)
        }
        if case .none = source, !direct { throw BenchError("nothing to measure: give --proxy, --start-proxy, or --direct") }
        var versions: [TLSVersion] = []
        for word in tls.split(separator: ",") {
            guard let version = TLSVersion(rawValue: String(word)) else { throw BenchError("--tls: expected 1.2 or 1.3, got '\(word)'") }
            versions.append(version)
        }
        var policies: [String?] = [nil]
        if let policy {
            guard startProxy != nil else { throw BenchError("--policy needs --start-proxy (the bench writes the policy file)") }
            policies = policy.split(separator: ",").map { String($0) }
            for p in policies where p != "block" && p != "alert" && p != "flagged" {
                throw BenchError("--policy: expected block, alert or flagged, got '\(p ?? "")'")
            }
        }
        guard startUpstream == "builtin" || startUpstream == "nginx" else { throw BenchError("--start-upstream: builtin or nginx") }
        var fault: Fault?
        if let faultInject {
            guard let f = Fault(rawValue: faultInject) else { throw BenchError("--fault-inject: only 'corrupt'") }
            fault = f
        }
        // Seconds: a number, positive (grace: or zero) and at most a day (nan or inf stopped the bench at its first
        // conversion to an integer).
        func seconds(_ option: String, _ value: Double?, zero: Bool = false) throws(BenchError) {
            guard let value else { return }
            guard value.isFinite, zero ? value >= 0 : value > 0, value <= 86_400 else {
                throw BenchError("\(option) must be \(zero ? "0" : "more than 0") to 86400 seconds, not \(value)")
            }
        }
        try seconds("--start-timeout", startTimeout)
        try seconds("--duration", duration)
        try seconds("--timeout", timeout)
        try seconds("--grace", grace, zero: true)
        guard concurrency >= 1, threads >= 1 else { throw BenchError("--concurrency and --threads must be at least 1") }
        if let count, count < 1 { throw BenchError("--count must be at least 1") }
        if count != nil, scenario == .idle { throw BenchError("--count is not for idle (its tunnels are held for --duration)") }
        if let rate, !(rate > 0 && rate.isFinite) || scenario == .idle { throw BenchError("--rate must be positive, and not for idle") }
        var duration = self.duration
        if duration == nil && (count == nil || scenario == .idle) { duration = 5 }
        if freshCertificates && (upstream != nil || startUpstream != "builtin") {
            throw BenchError("--fresh-certificates needs the builtin upstream (not --upstream or --start-upstream nginx)")
        }
        let via = self.via.split(separator: ",").map(String.init)
        guard !via.isEmpty, via.allSatisfy({ ["connect", "socks", "transparent"].contains($0) }) else {
            throw BenchError("--via: expected connect, socks or transparent (comma-separated), got '\(self.via)'")
        }
        if case .running = source, via.count > 1 || via == ["transparent"] {
            throw BenchError("--via with --proxy: one of connect or socks (the address given is that listener); transparent needs --start-proxy")
        }
        if via.contains("transparent") {
            guard geteuid() == 0 else { throw BenchError("--via transparent adds an nftables rule, which needs root (CAP_NET_ADMIN): run it as root, or in a network namespace of its own (ip netns exec)") }
            guard which("nft") != nil else { throw BenchError("--via transparent needs the nft command (apt-get install nftables)") }
            if upstream != nil || rawUpstream != nil { throw BenchError("--via transparent needs the bench's own upstreams (on 127.0.0.1), not --upstream or --raw-upstream") }
        }
        // The report's files are written after the run: one that cannot be written is said now, not after the
        // measurement it would have kept.
        for (option, path) in [("--json", json), ("--svg", svg), ("--png", png)] {
            if let path, let problem = unwritable(path) { throw BenchError("\(option) \(path): \(problem)") }
        }
        let bulkBytes = try parseSize(payload.size)
        if scenario == .bulk, bulkBytes == 0 { throw BenchError("--size must be more than 0 bytes for bulk") }
        var plan = Plan(scenario: scenario, proxy: source, proxyName: name, direct: direct, tlsVersions: versions, policies: policies,
                    externalTLSUpstream: try upstream.map { s throws(BenchError) in try Endpoint(parsing: s) },
                    externalRawUpstream: try rawUpstream.map { s throws(BenchError) in try Endpoint(parsing: s) },
                    upstreamKind: startUpstream, nginxWorkers: nginxWorkers, concurrency: concurrency, longTransfers: longTransfers,
                    threads: threads, rate: rate, duration: duration, count: scenario == .idle ? nil : count, timeout: timeout, grace: grace,
                    maxFailures: maxFailures, responseBytes: payload.responseBytes, bulkBytes: bulkBytes,
                    upload: payload.upload, resume: payload.resume, sni: sni, freshNames: freshNames || freshCertificates, freshCertificates: freshCertificates, fault: fault, startTimeout: startTimeout, keepTemp: keepTemp, quiet: quiet)
        plan.via = via
        return plan
    }

    /// Runs the plan, prints the table, writes the files, exits 0/1/2.
    func execute(_ scenario: Scenario, _ payload: PayloadOptions, longTransfers: Int = 0) throws {
        // A peer that closes first (the proxy cutting a tunnel, a client cut off at the duration's end) makes
        // the next write fail with EPIPE; libevent writes with writev, not send(MSG_NOSIGNAL), so without this
        // the signal killed the whole bench, silently and before its table (exit 141, about one run in four).
        signal(SIGPIPE, SIG_IGN)
        let report: Report
        do throws(BenchError) {
            report = try Runner(plan: try plan(scenario, payload, longTransfers: longTransfers)).run()
        } catch {
            FileHandle.standardError.write(Data("chainwatch-bench: error: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        print(renderTable(report), terminator: "")
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            do { try encoder.encode(report).write(to: URL(fileURLWithPath: json)) } catch {
                FileHandle.standardError.write(Data("chainwatch-bench: error: --json \(json): cannot write it: \(error.localizedDescription)\n".utf8))
                throw ExitCode(1)
            }
        }
        do { try writePictures([report], svg: svg, png: png) } catch let error as BenchError {
            FileHandle.standardError.write(Data("chainwatch-bench: error: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        if !report.ok {
            FileHandle.standardError.write(Data("chainwatch-bench: FAILED\n".utf8))
            for problem in report.problems { FileHandle.standardError.write(Data("  \(problem)\n".utf8)) }
            throw ExitCode(1)
        }
    }
}

struct Handshake: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Closed loop of C clients: CONNECT, full TLS handshake, small GET, close. Reports conn/s, latency, time to 200.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var payload: PayloadOptions
    func run() throws { try common.execute(.handshake, payload) }
}

struct Bulk: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "MB/s through C tunnels: raw bytes of known content, verified byte by byte, exact counts.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var payload: PayloadOptions
    func run() throws { try common.execute(.bulk, payload) }
}

struct Idle: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hold C tunnels open for --duration; reports the proxy's RSS per tunnel.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var payload: PayloadOptions
    func run() throws { try common.execute(.idle, payload) }
}

struct Mixed: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "C short TLS tunnels (as handshake) beside --long bulk transfers; latency of the short ones under load.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var payload: PayloadOptions
    @Option(help: "Long bulk transfers running beside the short tunnels.")
    var long: Int = 2
    func run() throws { try common.execute(.mixed, payload, longTransfers: long) }
}

struct Plot: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Combine JSON reports (e.g. from bench/compare.sh) into one table and one picture.")
    @Argument(help: "JSON reports written with --json.")
    var reports: [String]
    @Option(help: "Write the picture as SVG here (one panel per metric).")
    var svg: String?
    @Option(help: "Write the picture as PNG here (needs rsvg-convert: apt-get install librsvg2-bin).")
    var png: String?
    func run() throws {
        var decoded: [Report] = []
        for path in reports {
            do {
                decoded.append(try JSONDecoder().decode(Report.self, from: Data(contentsOf: URL(fileURLWithPath: path))))
            } catch {
                let why = (error as? DecodingError).map { _ in "not a report written with --json" } ?? error.localizedDescription
                FileHandle.standardError.write(Data("chainwatch-bench: error: \(path): \(why)\n".utf8))
                throw ExitCode(2)
            }
        }
        for (option, path) in [("--svg", svg), ("--png", png)] {
            if let path, let problem = unwritable(path) {
                FileHandle.standardError.write(Data("chainwatch-bench: error: \(option) \(path): \(problem)\n".utf8))
                throw ExitCode(2)
            }
        }
        for report in decoded { print(renderTable(report), terminator: "") }
        do { try writePictures(decoded, svg: svg, png: png) } catch let error as BenchError {
            FileHandle.standardError.write(Data("chainwatch-bench: error: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
    }
}

/// Why a report file cannot be written at `path` (nil: it can): an existing file that is not writable, or a folder
/// that is missing or not writable.
func unwritable(_ path: String) -> String? {
    let manager = FileManager.default
    var isDirectory: ObjCBool = false
    if manager.fileExists(atPath: path, isDirectory: &isDirectory) {
        if isDirectory.boolValue { return "is a folder" }
        return manager.isWritableFile(atPath: path) ? nil : "not writable"
    }
    let folder = (path as NSString).deletingLastPathComponent
    let parent = folder.isEmpty ? "." : folder
    guard manager.fileExists(atPath: parent, isDirectory: &isDirectory), isDirectory.boolValue else { return "no folder \(parent)" }
    return manager.isWritableFile(atPath: parent) ? nil : "folder \(parent) is not writable"
}
