import CLibevent
import Foundation

/// The four load shapes.
enum Scenario: String, Sendable {
    case handshake, bulk, idle, mixed
}

/// Where the proxy under test comes from.
enum ProxySource {
    case none
    case running(Endpoint, pid: Int32?)
    case start(executable: String, argumentsTemplate: String)
}

/// A fully checked plan for one invocation.
struct Plan {
    var scenario: Scenario
    var proxy: ProxySource
    var proxyName: String
    var direct: Bool
    var tlsVersions: [TLSVersion]
    var policies: [String?]
    /// How clients reach the proxy, each measured in turn: `connect` (HTTP CONNECT), `socks` (SOCKS 5),
    /// `transparent` (no proxy setting; a redirect rule of the bench's own sends them to a `--transparent` listener).
    var via: [String] = ["connect"]
    var externalTLSUpstream: Endpoint?
    var externalRawUpstream: Endpoint?
    var upstreamKind: String  // builtin | nginx
    var nginxWorkers: Int
    var concurrency: Int
    var longTransfers: Int
    var threads: Int
    var rate: Double?
    var duration: Double?
    var count: Int?
    var timeout: Double
    var grace: Double
    var maxFailures: Int
    var responseBytes: Int
    var bulkBytes: Int
    var upload: Bool
    var resume: Bool
    var sni: String?
    var freshNames = false
    var freshCertificates = false
    var fault: Fault?
    var startTimeout = 10.0
    var keepTemp: Bool
    var quiet: Bool
}

/// Sets up upstreams and proxies, runs the matrix of runs, tears everything down.
final class Runner {
    let plan: Plan
    private var temp: TempDirectory?
    private var chain: GeneratedChain?
    private var upstream: BuiltinUpstream?
    private var nginx: Child?
    private var proxy: Child?
    private var serverTLS: TLSContext?
    private var redirect: BenchRedirect?

    init(plan: Plan) { self.plan = plan }

    func log(_ message: String) {
        if !plan.quiet { FileHandle.standardError.write(Data("chainwatch-bench: \(message)\n".utf8)) }
    }

    func run() throws(BenchError) -> Report {
        raiseFileLimit()
        _ = evthread_use_pthreads()
        defer { tearDown() }
        let temp = try TempDirectory()
        self.temp = temp
        BenchInterruption.current.install(directory: temp.path, keep: plan.keepTemp)
        let chain = try GeneratedChain(in: temp)
        self.chain = chain
        let serverTLS = try TLSContext.server(chainFile: chain.chainFile, keyFile: chain.keyFile, resumption: plan.resume)
        self.serverTLS = serverTLS
        if plan.freshCertificates { serverTLS.presentFreshLeaves(from: try LeafMinter(chain: chain)) }
        let upstream = try BuiltinUpstream(tls: serverTLS, bodyBytes: plan.responseBytes, fault: plan.fault)
        self.upstream = upstream
        var tlsUpstream = upstream.tlsAddress
        let rawUpstream = plan.externalRawUpstream ?? upstream.rawAddress
        var upstreamDescription = "builtin (https \(upstream.tlsAddress), raw \(upstream.rawAddress))"
        if let external = plan.externalTLSUpstream {
            tlsUpstream = external
            upstreamDescription = "external https \(external), raw \(rawUpstream)"
        } else if plan.upstreamKind == "nginx", plan.scenario == .handshake || plan.scenario == .mixed {
            let port = try freeLoopbackPort()
            nginx = try startNginx(dir: temp, chain: chain, bodyBytes: plan.responseBytes, port: port, workers: plan.nginxWorkers)
            tlsUpstream = Endpoint(host: "127.0.0.1", port: port)
            upstreamDescription = "nginx https \(tlsUpstream) (pid \(nginx!.pid)), builtin raw \(rawUpstream)"
        }
        log("upstream: \(upstreamDescription)")

        var runs: [RunResult] = []
        let versions: [TLSVersion?] = plan.scenario == .handshake || plan.scenario == .mixed ? plan.tlsVersions : [nil]
        if plan.direct {
            for version in versions {
                runs.append(try measure(target: "direct", firstHop: nil, pid: nil, policy: nil, version: version,
                                        tlsUpstream: tlsUpstream, rawUpstream: rawUpstream, chain: chain))
            }
        }
        switch plan.proxy {
        case .none: break
        case .running(let endpoint, let pid):
            for version in versions {
                runs.append(try measure(target: plan.proxyName, firstHop: endpoint, pid: pid, policy: nil, version: version,
                                        tlsUpstream: tlsUpstream, rawUpstream: rawUpstream, chain: chain, socks: plan.via == ["socks"]))
            }
        case .start(let executable, let template):
            for policy in plan.policies {
                let (child, endpoint, socksEndpoint, transparentEndpoint) = try startProxy(executable: executable, template: template,
                                                                                           policy: policy, chain: chain, temp: temp)
                proxy = child
                // The alert log the bench gave it: its lines are counted per run, and checked (alert storm).
                let alertLog = template.contains("{dir}/alerts.jsonl") ? temp.file("alerts.jsonl") : nil
                // Made before the first run, so every run of this start has the same kernel path: the table turns
                // connection tracking on, which then costs every connection something, redirected or not.
                if let transparentEndpoint {
                    redirect = try BenchRedirect(temp: temp, upstreams: [tlsUpstream, rawUpstream], to: transparentEndpoint,
                                                 interrupted: BenchInterruption.current)
                    log("redirect: nftables table \(redirect!.table) sends \(BenchRedirect.sourceAddress)'s connections to \(tlsUpstream) and \(rawUpstream) to \(transparentEndpoint)")
                }
                for version in versions {
                    for via in plan.via {
                        let socks = via == "socks", transparent = via == "transparent"
                        let before = alertLog.map { AlertLog.lines(in: $0) }
                        let redirectedBefore = transparent ? try redirect?.redirected() : nil
                        var run = try measure(target: socks ? "\(plan.proxyName) socks5" : transparent ? "\(plan.proxyName) transparent" : plan.proxyName,
                                              firstHop: socks ? socksEndpoint! : transparent ? nil : endpoint, pid: child.pid, policy: policy,
                                              version: version, tlsUpstream: tlsUpstream, rawUpstream: rawUpstream, chain: chain,
                                              socks: socks, source: transparent ? BenchRedirect.sourceAddress : nil)
                        if let alertLog, let before { run.alertLines = AlertLog.settledLines(in: alertLog) - before }
                        if let redirectedBefore, let after = try redirect?.redirected() { run.redirected = after - redirectedBefore }
                        runs.append(run)
                    }
                }
                child.stop()
                proxy = nil
                redirect?.remove()
                redirect = nil
            }
        }
        var problems: [String] = []
        for run in runs {
            for kind in run.kinds {
                if !kind.countsAddUp {
                    problems.append("\(run.label): \(kind.kind.rawValue) counts do not add up: started \(kind.started) ≠ completed \(kind.completed) + failed \(kind.failed) + cut off \(kind.cutOff)")
                }
                for (message, n) in kind.failures.sorted(by: { $0.key < $1.key }) {
                    problems.append("\(run.label): \(n)× \(message)")
                }
            }
            if let redirected = run.redirected, case let started = run.kinds.reduce(0, { $0 + $1.started }), redirected < started {
                problems.append("\(run.label): only \(redirected) of \(started) sessions' connections went through the redirect to the transparent listener")
            }
            if let held = run.idleTunnelsHeld, held < run.concurrency {
                problems.append("\(run.label): only \(held) of \(run.concurrency) idle tunnels were open at once")
            }
            if run.scenario == Scenario.handshake.rawValue, let lines = run.alertLines, let problem = AlertLog.problem(lines: lines, policy: run.policy, kinds: run.kinds) {
                problems.append("\(run.label): \(problem)")
            }
        }
        let bound = plan.count.map { "count \($0)" } ?? "duration \(plan.duration ?? 0)s"
        return Report(scenario: plan.scenario.rawValue, bound: bound, upstream: upstreamDescription, runs: runs,
                      ok: problems.isEmpty && runs.allSatisfy(\.ok), problems: problems)
    }

    private func tearDown() {
        redirect?.remove()
        redirect = nil
        proxy?.stop()
        nginx?.stop()
        upstream?.stop()
        upstream = nil
        if let temp {
            if plan.keepTemp { log("kept \(temp.path)") } else { temp.remove() }
        }
        BenchInterruption.current.uninstall()
    }

    /// Writes a policy for the bench's upstream (the generated root as its anchor) with `action`; `flagged` is alert
    /// with the system roots only, so every tunnel's chain fails (untrusted_chain) and writes an alert line: what an
    /// upstream flagged on every connection costs.
    private func writePolicy(_ name: String, chain: GeneratedChain, temp: TempDirectory) throws(BenchError) -> String {
        let path = temp.file("policy-\(name).yaml")
        let action = name == "flagged" ? "alert" : name
        let anchor = name == "flagged" ? "system" : "\"\(chain.rootFile)\""
        let yaml = """
            # Generated by chainwatch-bench: the bench upstream's chain is anchored at the bench's own root (an anchor
            # the operator names, trusted quietly), so a genuine handshake is the clean case: no finding, no alert line.
            version: 1
            defaults:
              action: \(action)
              anchors: [system]
            rules:
              - name: bench-upstream
                match: ["127.0.0.1", "localhost", "*.fresh.bench.test"]
                action: \(action)
                anchors: [\(anchor)]

            """
        do { try yaml.write(toFile: path, atomically: true, encoding: .utf8) } catch { throw BenchError("write \(path): \(error)") }
        return path
    }

    private func startProxy(executable: String, template: String, policy: String?, chain: GeneratedChain,
                            temp: TempDirectory) throws(BenchError) -> (Child, Endpoint, Endpoint?, Endpoint?) {
        let port = try freeLoopbackPort()
        let endpoint = Endpoint(host: "127.0.0.1", port: port)
        // With --via socks, a SOCKS listener too: where the template says {socks}, else added to its arguments.
        let socks = plan.via.contains("socks") ? Endpoint(host: "127.0.0.1", port: try freeLoopbackPort()) : nil
        // With --via transparent, a --transparent listener: where the template says {transparent}, else added.
        let transparent = plan.via.contains("transparent") ? Endpoint(host: "127.0.0.1", port: try freeLoopbackPort()) : nil
        var template = template
        if let socks, !template.contains("{socks}") { template += " --socks \(socks)" }
        if let transparent, !template.contains("{transparent}") { template += " --transparent \(transparent)" }
        var policyPath = ""
        if let policy { policyPath = try writePolicy(policy, chain: chain, temp: temp) }
        let arguments = template.split(separator: " ").map {
            $0.replacingOccurrences(of: "{port}", with: String(port))
                .replacingOccurrences(of: "{listen}", with: endpoint.description)
                .replacingOccurrences(of: "{policy}", with: policyPath)
                .replacingOccurrences(of: "{dir}", with: temp.path)
                .replacingOccurrences(of: "{socks}", with: socks?.description ?? "")
                .replacingOccurrences(of: "{transparent}", with: transparent?.description ?? "")
        }
        let child = try Child(name: plan.proxyName, executable: executable, arguments: arguments,
                              logPath: temp.file("proxy-\(policy ?? "default").log"))
        do { try child.waitUntilListening(endpoint, seconds: plan.startTimeout) } catch { child.stop(); throw error }
        log("started \(plan.proxyName) pid \(child.pid) on \(endpoint)\(policy.map { " with policy \($0)" } ?? "")")
        return (child, endpoint, socks, transparent)
    }

    /// One run: the scenario's sessions against one target, bounded by count or duration.
    private func measure(target: String, firstHop: Endpoint?, pid: Int32?, policy: String?, version: TLSVersion?,
                         tlsUpstream: Endpoint, rawUpstream: Endpoint, chain: GeneratedChain, socks: Bool = false,
                         source: String? = nil) throws(BenchError) -> RunResult {
        var settings = ClientSettings(firstHop: firstHop ?? tlsUpstream, viaProxy: firstHop != nil,
                                      tlsUpstream: tlsUpstream, rawUpstream: rawUpstream)
        // Counted only when the sessions' HTTPS upstream is the builtin one.
        let builtin = upstream.flatMap { $0.tlsAddress == tlsUpstream ? $0 : nil }
        let acceptedBefore = builtin?.tlsAccepted.load(ordering: .relaxed)
        settings.socks = socks
        settings.sourceAddress = source
        if let version {
            settings.tls = try TLSContext.client(version: version, caFile: plan.externalTLSUpstream == nil ? chain.rootFile : nil,
                                                 resumption: plan.resume)
        }
        settings.sni = plan.sni
        settings.freshNames = plan.freshNames
        settings.expectedBodyBytes = plan.externalTLSUpstream == nil ? plan.responseBytes : nil
        settings.verifyBody = plan.externalTLSUpstream == nil
        settings.bulkBytes = plan.bulkBytes
        settings.upload = plan.upload
        settings.resume = plan.resume
        settings.timeout = plan.timeout
        settings.maxFailures = plan.maxFailures
        settings.duration = plan.duration
        settings.grace = plan.grace

        let primary: SessionKind
        var kinds: [SessionKind]
        switch plan.scenario {
        case .handshake: primary = .handshake; kinds = Array(repeating: .handshake, count: plan.concurrency)
        case .bulk: primary = .bulk; kinds = Array(repeating: .bulk, count: plan.concurrency)
        case .idle: primary = .idle; kinds = Array(repeating: .idle, count: plan.concurrency)
        case .mixed:
            primary = .handshake
            kinds = Array(repeating: .handshake, count: plan.concurrency) + Array(repeating: .bulk, count: plan.longTransfers)
        }
        let shared = RunShared(budget: plan.count ?? Int.max)
        let threadCount = max(1, min(plan.threads, kinds.count))
        settings.rate = plan.rate.map { $0 / Double(threadCount) }
        var workers: [Worker] = []
        for t in 0..<threadCount {
            let mine = kinds.enumerated().filter { $0.offset % threadCount == t }.map(\.element)
            workers.append(try Worker(settings: settings, shared: shared, primary: primary, kinds: mine))
        }
        let label = [target, policy, version.map { "TLS \($0.rawValue)" }, plan.rate.map { "@\(Int($0))/s" }]
            .compactMap { $0 }.joined(separator: " ")
        log("run: \(plan.scenario.rawValue) \(label), concurrency \(plan.concurrency)\(plan.scenario == .mixed ? " + \(plan.longTransfers) long" : ""), \(plan.count.map { "count \($0)" } ?? "duration \(plan.duration ?? 0)s")")

        let before = pid.flatMap { ProcSample.read(root: $0) }
        var peak = before?.rssKiB ?? 0
        var holding: Int?
        let done = DispatchSemaphore(value: 0)
        let started = monotonicNanos()
        for worker in workers {
            let thread = Thread { worker.run(); done.signal() }
            thread.name = "bench-worker"
            thread.start()
        }
        var finished = 0
        var lastSample = monotonicNanos()
        while finished < workers.count {
            if done.wait(timeout: .now() + 0.05) == .success { finished += 1; continue }
            if let pid, monotonicNanos() - lastSample > 200_000_000, let now = ProcSample.read(root: pid) {
                peak = max(peak, now.rssKiB)
                lastSample = monotonicNanos()
            }
            if plan.scenario == .idle, holding == nil, let pid, shared.established.load(ordering: .relaxed) >= plan.concurrency {
                usleep(100_000)  // let the proxy settle its buffers
                holding = ProcSample.read(root: pid)?.rssKiB
            }
        }
        let elapsed = Double(monotonicNanos() - started) / 1e9
        let after = pid.flatMap { ProcSample.read(root: $0) }

        var merged: [SessionKind: KindStats] = [:]
        for worker in workers {
            for (kind, stats) in worker.stats { merged[kind, default: KindStats()].merge(stats) }
        }
        var activeSeconds = elapsed
        if let duration = plan.duration, plan.scenario != .idle { activeSeconds = min(elapsed, duration + 0.001) }
        let order: [SessionKind] = [.handshake, .bulk, .idle]
        let kindResults = order.compactMap { kind in merged[kind].map { KindResult(kind: kind, stats: $0, seconds: activeSeconds) } }

        var usage: ProxyUsage?
        if let pid, let before, let after {
            let cpu = after.cpuSeconds - before.cpuSeconds
            let connections = kindResults.filter { $0.kind != .bulk || plan.scenario == .bulk }.reduce(0) { $0 + $1.completed + $1.cutOff }
            let bytes = kindResults.reduce(0) { $0 + $1.verifiedBytes }
            peak = max(peak, after.rssKiB, holding ?? 0)
            usage = ProxyUsage(pid: pid, processes: after.processes, cpuSeconds: (cpu * 1000).rounded() / 1000,
                               cpuSecondsPer1000Connections: connections > 0 && plan.scenario != .bulk ? (cpu / Double(connections) * 1000 * 1000).rounded() / 1000 : nil,
                               cpuSecondsPerGiB: bytes >= 1 << 20 && (plan.scenario == .bulk || plan.scenario == .mixed) ? (cpu / (Double(bytes) / Double(1 << 30)) * 1000).rounded() / 1000 : nil,
                               rssKiBBefore: before.rssKiB, rssKiBAfter: after.rssKiB, rssKiBPeak: peak,
                               rssKiBHolding: holding,
                               rssKiBPerIdleTunnel: holding.map { (Double($0 - before.rssKiB) / Double(max(plan.concurrency, 1)) * 100).rounded() / 100 })
        }
        let held = plan.scenario == .idle ? shared.established.load(ordering: .relaxed) : nil
        let ok = kindResults.allSatisfy { $0.failed == 0 && $0.countsAddUp } && (held.map { $0 >= plan.concurrency } ?? true)
        let upstreamConnections = acceptedBefore.flatMap { before in builtin.map { $0.tlsAccepted.load(ordering: .relaxed) - before } }
        return RunResult(label: label, scenario: plan.scenario.rawValue, target: target, tls: version?.rawValue, policy: policy,
                         concurrency: plan.concurrency, elapsedSeconds: (elapsed * 1000).rounded() / 1000,
                         kinds: kindResults, proxy: usage, idleTunnelsHeld: held, upstreamConnections: upstreamConnections, ok: ok)
    }
}
