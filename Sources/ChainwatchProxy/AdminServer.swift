import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import Foundation
import Logging
import Synchronization

/// The admin listener (`--admin`): Prometheus `/metrics`, `/healthz` and `/readyz` for probes, `/state` (policy,
/// known-bad marks, probe cache), and POSTs that clear a known-bad mark or a cache. It runs on a thread and loop of
/// its own, so it answers while the proxy's loops are busy and while they drain (`/readyz` then says 503). Clients
/// are admitted by the same rule as the proxy port's (`--allow-client`, loopback by default).
public final class AdminServer: @unchecked Sendable {   // its listener and connections live on its own loop's thread only
    private let loop: EventLoop
    private var listener: Listener?
    /// The connections held now (`AdminConnectionCap`), each until it closes.
    private var connections: [ObjectIdentifier: AdminConnection] = [:]
    private var cap = AdminConnectionCap()
    private let server: ProxyServer
    private let reloader: PolicyReloader
    private let logger: Logger
    /// Which process answers: `GET /process`, `/state`, `/metrics` and `chainwatch ctl` all say it.
    public let identity: ProcessIdentity

    /// Binds `address` (errors surface here; no SO_REUSEPORT, so another process cannot share it) and serves on a
    /// new thread.
    public init(address: SocketAddress, server: ProxyServer, reloader: PolicyReloader, logger: Logger) throws {
        self.server = server
        self.reloader = reloader
        self.logger = logger
        loop = try EventLoop(index: -2)
        identity = ProcessIdentity(listen: "\(server.configuration.listen)")
        listener = try Listener(loop: loop, address: address, backlog: 64, reusePort: false,
                                log: { [logger] in logger.error("admin listener: \($0)") }) { [unowned self] fd, peer in
            self.accepted(fd, peer)
        }
        let thread = Thread { [loop] in loop.run() }
        thread.name = "chainwatch-admin"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Where it listens (the port the kernel chose, for port 0).
    public var address: SocketAddress { listener!.address }

    static let notAllowed = AdminResponse(status: 403, text: "not an allowed client (--allow-client)\n")

    /// A new connection: one from a client `--allow-client` does not admit is answered 403 and closed at once (it
    /// takes no slot);
    /// else held while the cap and the client's share of it have room, else answered 503 and closed at once.
    private func accepted(_ fd: Int32, _ peer: SocketAddress) {
        guard server.configuration.admits(client: peer) else {
            AdminConnection.refuse(loop: loop, fd: fd, with: Self.notAllowed.bytes())
            return
        }
        let client = peer.addressBytes
        guard cap.admit(client: client) else {
            AdminConnection.refuse(loop: loop, fd: fd, with: cap.refusal)
            return
        }
        let connection: AdminConnection
        do {
            connection = try AdminConnection(loop: loop, fd: fd, peer: peer, serve: { [unowned self] in self.respond($0, from: $1) },
                                             onClose: { [unowned self] in self.closed($0) })
        } catch {
            cap.closed(client: client)
            return
        }
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    private func closed(_ connection: AdminConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        cap.closed(client: connection.peer.addressBytes)
    }

    // MARK: - Routes

    func respond(_ request: AdminRequest, from peer: SocketAddress) -> AdminResponse {
        guard server.configuration.admits(client: peer) else { return Self.notAllowed }
        if let why = AdminRequestCheck.refusal(method: request.method, host: request.host, origin: request.origin,
                                               adminHeader: request.adminHeader,
                                               peerIsLoopback: ProxyConfiguration.loopback.contains { $0.contains(peer.addressBytes) }) {
            return AdminResponse(status: 403, text: why + "\n")
        }
        switch (request.method, request.path) {
        case ("GET", "/metrics"), ("HEAD", "/metrics"):
            return AdminResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(metrics().utf8))
        case ("GET", "/healthz"), ("HEAD", "/healthz"):
            let stuck = stuckLoops()
            return stuck.isEmpty ? AdminResponse(status: 200, text: "ok\n")
                                 : AdminResponse(status: 503, text: "stuck: \(stuck.joined(separator: ", "))\n")
        case ("GET", "/readyz"), ("HEAD", "/readyz"):
            if server.draining.load(ordering: .relaxed) { return AdminResponse(status: 503, text: "draining\n") }
            let stuck = stuckLoops()
            return stuck.isEmpty ? AdminResponse(status: 200, text: "ready\n")
                                 : AdminResponse(status: 503, text: "stuck: \(stuck.joined(separator: ", "))\n")
        case ("GET", "/state"), ("HEAD", "/state"):
            return json(200, state())
        case ("GET", "/process"), ("HEAD", "/process"):
            return json(200, identity.json(admin: "\(address)"))
        case ("POST", "/known-bad/clear"):
            let port = request.query["port"].flatMap { UInt16($0) }
            if request.query["port"] != nil, port == nil { return AdminResponse(status: 400, text: "port: not a port number\n") }
            var host: String?
            if let given = request.query["host"] {
                // The host as a CONNECT's target names it, read as a CONNECT is (lowercased, one trailing dot off, an
                // IPv6 literal with or without brackets): the form the marks are kept under. One no CONNECT could name
                // would clear nothing and say so with {"cleared":0}, as if no mark were there.
                let bracketed = given.contains(":") && !given.hasPrefix("[") ? "[\(given)]" : given
                guard let authority = Authority.parse(bracketed, defaultPort: port ?? 443) else {
                    return AdminResponse(status: 400, text: "host: \"\(LogText.escaped(given))\" is not a host name or IP address a CONNECT could name\n")
                }
                host = authority.host
            }
            let cleared = server.inspector.cache.clearKnownBad(host: host, port: port)
            logger.notice("admin: cleared \(cleared) known-bad mark(s)\(host.map { " for \($0)" } ?? "")\(port.map { ":\($0)" } ?? "")")
            return json(200, cleared: cleared)
        case ("POST", "/verdicts/clear"):
            let cleared = server.inspector.cache.removeAllVerdicts()
            logger.notice("admin: cleared \(cleared) cached verdict(s)")
            return json(200, cleared: cleared)
        case ("POST", "/probes/clear"):
            let cleared = server.inspector.prober.removeAll()
            logger.notice("admin: cleared \(cleared) cached probe result(s)")
            return json(200, cleared: cleared)
        case (_, "/metrics"), (_, "/healthz"), (_, "/readyz"), (_, "/state"), (_, "/process"):
            return AdminResponse(status: 405, text: "use GET\n")
        case (_, "/known-bad/clear"), (_, "/verdicts/clear"), (_, "/probes/clear"):
            return AdminResponse(status: 405, text: "use POST\n")
        default:
            return AdminResponse(status: 404, text: "not found: GET /metrics /healthz /readyz /state /process; POST /known-bad/clear[?host=H[&port=P]] /verdicts/clear /probes/clear\n")
        }
    }

    private func stuckLoops() -> [String] { server.stuckLoops }

    private func json(_ status: Int, cleared: Int) -> AdminResponse {
        var w = JSONWriter()
        w.field("cleared", cleared)
        return json(status, w.text)
    }

    private func json(_ status: Int, _ text: String) -> AdminResponse {
        AdminResponse(status: status, contentType: "application/json", body: Array((text + "\n").utf8))
    }

    // MARK: - /state

    func state() -> String {
        let snapshot = server.inspector.policies.snapshot
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let policyStatus = reloader.status
        var w = JSONWriter()
        w.field("process", JSONValue.object([("pid", .int(Int64(identity.pid))), ("listen", .string(identity.listen)),
                                             ("admin", .string("\(address)")),
                                             ("start_time", .string(identity.startTimeText))]))
        w.object("policy") { p in
            p.field("source", snapshot.source)
            p.field("sha256", policyStatus.digest.isEmpty ? nil : policyStatus.digest)
            p.field("generation", snapshot.generation)
            p.field("rules", snapshot.policy.rules.map(\.name))
            p.field("reloads", policyStatus.reloads)
            p.field("rejected_reloads", policyStatus.rejected)
        }
        let marks = server.inspector.cache.knownBadMarks(now: now).map { mark -> JSONValue in
            .object([
                ("host", .string(mark.upstream.host)), ("port", .int(Int64(mark.upstream.port))),
                ("reason", .string(mark.mark.finding.reason.rawValue)), ("detail", .string(mark.mark.finding.detail)),
                ("rule", .string(mark.mark.ruleName)), ("expires_in_seconds", .int((mark.mark.expires - now + 999) / 1000)),
                ("refusals", .int(Int64(mark.mark.refusals))),
            ])
        }
        w.field("known_bad", JSONValue.array(marks))
        let probes = server.inspector.prober.state()
        w.field("probe_cache", JSONValue.array(probes.cached.map { entry in
            .object([
                ("address", .string(entry.key.address.description)), ("server_name", entry.key.offer.serverName.map(JSONValue.string) ?? .null),
                ("result", .string(entry.succeeded ? "chain" : "failed")),
                ("expires_in_seconds", .int((entry.expiresInMilliseconds + 999) / 1000)),
            ])
        }))
        w.field("probes_in_flight", JSONValue.array(probes.running.map { key in
            .object([("address", .string(key.address.description)), ("server_name", key.offer.serverName.map(JSONValue.string) ?? .null)])
        }))
        return w.text
    }

    // MARK: - /metrics

    func metrics() -> String {
        let stats = server.stats
        let inspector = server.inspector
        var m = PrometheusText()
        m.family("chainwatch_build_info", .gauge, "The running chainwatch's version (the value is 1).")
        m.sample("chainwatch_build_info", ["version": Observer.version], 1)
        m.family("chainwatch_process_info", .gauge, "Which process answers (the value is 1): its pid, proxy listen address and admin address, as chainwatch ctl shows them.")
        m.sample("chainwatch_process_info", ["pid": String(identity.pid), "listen": identity.listen, "admin": "\(address)"], 1)
        m.family("chainwatch_start_time_seconds", .gauge, "When the process started, seconds since the epoch (process_start_time_seconds).")
        m.sample("chainwatch_start_time_seconds", [:], identity.startTimeSeconds)
        m.family("process_start_time_seconds", .gauge, "Start time of the process since unix epoch in seconds.")
        m.sample("process_start_time_seconds", [:], identity.startTimeSeconds)

        m.family("chainwatch_connections_open", .gauge, "Client connections open now.")
        m.sample("chainwatch_connections_open", [:], stats.openConnections.load(ordering: .relaxed))
        m.family("chainwatch_connections_accepted_total", .counter, "Client connections accepted.")
        m.sample("chainwatch_connections_accepted_total", [:], stats.acceptedConnections.load(ordering: .relaxed))
        m.family("chainwatch_tunnels_total", .counter, "CONNECT tunnels established (200 sent to the client).")
        m.sample("chainwatch_tunnels_total", [:], stats.tunnelsOpened.load(ordering: .relaxed))
        m.family("chainwatch_connections_closed_total", .counter,
                 "Client connections closed, by outcome: tunnel (relayed), blocked (closed by a verdict), http (plain HTTP served), refused (the proxy answered with an error), dropped (left before a complete request).")
        for outcome in CloseOutcome.allCases {
            m.sample("chainwatch_connections_closed_total", ["outcome": outcome.rawValue], stats.closedCount(outcome))
        }
        m.family("chainwatch_error_responses_total", .counter, "Answers of the proxy's own, by status (403 blocked or refused, 502, 503, 504, ...).")
        for (status, n) in stats.responses.sorted(by: { $0.key < $1.key }) {
            m.sample("chainwatch_error_responses_total", ["status": String(status)], n)
        }

        m.family("chainwatch_verdicts_total", .counter,
                 "Verdicts reported, by action (pass, alert, block), deciding reason (none for a pass) and evidence source (passive, probe, cache, spot_check; none when no chain was judged).")
        let verdicts = inspector.verdicts.map { key, n in (labels: key.labels, n: n) }
        for (labels, n) in verdicts.sorted(by: { a, b in [a.labels.action, a.labels.reason, a.labels.evidence].lexicographicallyPrecedes([b.labels.action, b.labels.reason, b.labels.evidence]) }) {
            m.sample("chainwatch_verdicts_total", ["action": labels.action, "reason": labels.reason, "evidence": labels.evidence], n)
        }

        m.family("chainwatch_known_bad_refusals_total", .counter,
                 "403s answered for upstreams marked known-bad, by the reason of the finding that marked them: refusals, not findings (that finding was counted once in chainwatch_verdicts_total).")
        for (reason, n) in inspector.knownBadRefusals.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            m.sample("chainwatch_known_bad_refusals_total", ["reason": reason.rawValue], n)
        }

        m.family("chainwatch_first_contacts_total", .counter,
                 "TLS 1.3 first contacts. Under a rule that holds (block): the probe and the tunnel's connection opened together, by which started first (a coin), or the probe alone first (a hello with 0-RTT data). Under a rule that holds nothing (alert): the probe beside the tunnel on a spare connection, by whose hello left first (beside_probe_first, beside_tunnel_first), or with no spare, connecting after the tunnel (beside_no_spare: a client's second stack at an address within 5 minutes).")
        m.sample("chainwatch_first_contacts_total", ["order": "probe_first"], inspector.pairsProbeFirst.load(ordering: .relaxed))
        m.sample("chainwatch_first_contacts_total", ["order": "tunnel_first"], inspector.pairsTunnelFirst.load(ordering: .relaxed))
        m.sample("chainwatch_first_contacts_total", ["order": "probe_alone"], inspector.probesAlone.load(ordering: .relaxed))
        m.sample("chainwatch_first_contacts_total", ["order": "beside_probe_first"], inspector.besideProbeFirst.load(ordering: .relaxed))
        m.sample("chainwatch_first_contacts_total", ["order": "beside_tunnel_first"], inspector.besideTunnelFirst.load(ordering: .relaxed))
        m.sample("chainwatch_first_contacts_total", ["order": "beside_no_spare"], inspector.besideNoSpare.load(ordering: .relaxed))
        m.family("chainwatch_spare_connections_total", .counter,
                 "Connections opened beside a tunnel's at its CONNECT, for a client's first tunnel to an address in 5 minutes, under a rule that holds nothing (alert), so that a first contact's probe can send its hello with the client's: handed to that probe (use=probe; the prober closes it unused when it answers from its cache or a handshake in flight), or closed unused with no byte sent (use=none: no TLS 1.3 first contact, a server that spoke first, no hello within 2 s).")
        m.sample("chainwatch_spare_connections_total", ["use": "probe"], inspector.sparesHanded.load(ordering: .relaxed))
        m.sample("chainwatch_spare_connections_total", ["use": "none"], inspector.sparesUnused.load(ordering: .relaxed))
        m.family("chainwatch_first_contact_stalls_total", .counter,
                 "First contacts whose probe went unanswered while the tunnel's server answered (a server, or an interceptor, that serves one connection at a time): the tunnel gave its connection up and sent its hello again. Many of them for an upstream known to serve connections at once is worth a look.")
        m.sample("chainwatch_first_contact_stalls_total", [:], inspector.pairStalls.load(ordering: .relaxed))

        let spot = inspector.spotChecker.totals
        m.family("chainwatch_spot_checks_total", .counter,
                 "Spot checks (probes of upstreams in use at random times, --spot-check-rate), by result: clean (the cached chain again, or another that passes), finding (a line with evidence spot_check), failed (the probe got no chain).")
        m.sample("chainwatch_spot_checks_total", ["result": "clean"], spot.clean)
        m.sample("chainwatch_spot_checks_total", ["result": "finding"], spot.findings)
        m.sample("chainwatch_spot_checks_total", ["result": "failed"], spot.failed)
        m.family("chainwatch_spot_checks_started_total", .counter,
                 "Spot checks started, by kind: alone (at the moment drawn) or beside (on a spare connection beside the next tunnel to the upstream, its hello first; --spot-check-beside).")
        m.sample("chainwatch_spot_checks_started_total", ["kind": "alone"], spot.started - spot.beside)
        m.sample("chainwatch_spot_checks_started_total", ["kind": "beside"], spot.beside)
        m.family("chainwatch_spot_checks_due_total", .counter,
                 "Spot checks drawn to go beside the next tunnel to their upstream (those with no tunnel within 5 minutes lapse).")
        m.sample("chainwatch_spot_checks_due_total", [:], spot.besideDue)
        m.family("chainwatch_spot_checks_given_back_total", .counter,
                 "Spot checks a tunnel took at its CONNECT and gave back for the next one: it carried no TLS 1.3 hello, its offer had no cached probe to compare with (a first contact), or it ended first.")
        m.sample("chainwatch_spot_checks_given_back_total", [:], spot.givenBack)

        let probe = inspector.prober.counters
        let probeSizes = inspector.prober.sizes
        m.family("chainwatch_probes_started_total", .counter, "Probe handshakes started.")
        m.sample("chainwatch_probes_started_total", [:], probe.started)
        m.family("chainwatch_probes_finished_total", .counter, "Probe handshakes finished, by result (chain, failed: timeouts included).")
        m.sample("chainwatch_probes_finished_total", ["result": "chain"], probe.succeeded)
        m.sample("chainwatch_probes_finished_total", ["result": "failed"], probe.failed)
        m.family("chainwatch_probes_in_flight", .gauge, "Probe handshakes running now (each holds a connection slot).")
        m.sample("chainwatch_probes_in_flight", [:], probeSizes.inFlight)
        m.family("chainwatch_probes_queued", .gauge, "Probes waiting for a slot (--max-probes reached).")
        m.sample("chainwatch_probes_queued", [:], probeSizes.queued)
        m.family("chainwatch_probe_requests_total", .counter,
                 "Probe requests by how they were answered: cache (a cached result), attached (waited for a handshake in flight), started (a new handshake), queued (waited for a slot), over_share (refused: its client already had its share of --max-probes in flight or waiting).")
        m.sample("chainwatch_probe_requests_total", ["answer": "cache"], probe.cacheHits)
        m.sample("chainwatch_probe_requests_total", ["answer": "attached"], probe.waitersAttached)
        m.sample("chainwatch_probe_requests_total", ["answer": "started"], probe.started)
        m.sample("chainwatch_probe_requests_total", ["answer": "queued"], inspector.prober.queuedTotal)
        m.sample("chainwatch_probe_requests_total", ["answer": "over_share"], inspector.prober.refusedOverShareTotal)
        let latency = inspector.prober.latency
        m.histogram("chainwatch_probe_duration_seconds", "Probe handshake time, connect to chain or failure.",
                    bounds: latency.bounds, counts: latency.counts, sum: latency.sum)

        let cacheSizes = inspector.cache.sizes
        m.family("chainwatch_cache_entries", .gauge, "Entries held, by cache: verdicts, known_bad (upstreams answered 403), probes (results), intermediates (the pool), certificates (decoded, by their bytes), signatures (verified).")
        m.sample("chainwatch_cache_entries", ["cache": "verdicts"], cacheSizes.verdicts)
        m.sample("chainwatch_cache_entries", ["cache": "known_bad"], cacheSizes.knownBad)
        m.sample("chainwatch_cache_entries", ["cache": "probes"], probeSizes.cached)
        m.sample("chainwatch_cache_entries", ["cache": "intermediates"], inspector.intermediates.count)
        m.sample("chainwatch_cache_entries", ["cache": "certificates"], DecodedCertificates.shared.count)
        m.sample("chainwatch_cache_entries", ["cache": "signatures"], SignatureMemo.shared.count)
        let cacheBytes = inspector.cache.bytes
        m.family("chainwatch_cache_bytes", .gauge, "What the entries of a cache bounded by --cache-memory are weighed at, by cache: verdicts, known_bad, probes (an estimate of the memory they hold).")
        m.sample("chainwatch_cache_bytes", ["cache": "verdicts"], cacheBytes.verdicts)
        m.sample("chainwatch_cache_bytes", ["cache": "known_bad"], cacheBytes.knownBad)
        m.sample("chainwatch_cache_bytes", ["cache": "probes"], inspector.prober.cachedBytes)
        let decodes = DecodedCertificates.shared.hitsAndMisses, signatures = SignatureMemo.shared.hitsAndChecks
        m.family("chainwatch_certificate_decodes_total", .counter, "Presented certificates the validator needed, by whether a decoded copy was at hand (reused: a probe's handshake or another chain had decoded it) or it was decoded.")
        m.sample("chainwatch_certificate_decodes_total", ["result": "reused"], decodes.hits)
        m.sample("chainwatch_certificate_decodes_total", ["result": "decoded"], decodes.misses)
        m.family("chainwatch_signature_checks_total", .counter, "Certificate signatures on validated paths, by whether a verification of the same certificate by the same issuer was remembered (reused) or OpenSSL checked it.")
        m.sample("chainwatch_signature_checks_total", ["result": "reused"], signatures.hits)
        m.sample("chainwatch_signature_checks_total", ["result": "checked"], signatures.checks)
        let room = inspector.largeHandshakes.usage
        m.family("chainwatch_large_handshake_bytes", .gauge, "Bytes held now for server handshake messages over 224 KiB (of --large-handshake-memory).")
        m.sample("chainwatch_large_handshake_bytes", [:], room.used)
        m.family("chainwatch_large_handshakes_total", .counter, "Requests for room for a server handshake message over 224 KiB (read in a tunnel or by a probe, held, or a probe's chain kept for its tunnel), by whether they got it (granted) or not (refused: oversized_handshake, or the tunnel probes again).")
        m.sample("chainwatch_large_handshakes_total", ["result": "granted"], room.granted)
        m.sample("chainwatch_large_handshakes_total", ["result": "refused"], room.refused)
        let validations = inspector.validations.counts
        m.family("chainwatch_chain_validations_total", .counter, "Chains validated (verdict cache misses), by thread: worker (a validation thread), loop (the event loop's own, when the queue was full).")
        m.sample("chainwatch_chain_validations_total", ["thread": "worker"], validations.onWorker)
        m.sample("chainwatch_chain_validations_total", ["thread": "loop"], validations.refused)
        m.family("chainwatch_chain_validations_waiting", .gauge, "Chains waiting for a validation thread.")
        m.sample("chainwatch_chain_validations_waiting", [:], validations.waiting)
        m.family("chainwatch_cache_lookups_total", .counter, "Verdict cache lookups, by result (hit, miss).")
        m.sample("chainwatch_cache_lookups_total", ["result": "hit"], inspector.cache.hits.load(ordering: .relaxed))
        m.sample("chainwatch_cache_lookups_total", ["result": "miss"], inspector.cache.misses.load(ordering: .relaxed))
        m.family("chainwatch_intermediates_completed_total", .counter, "Chains missing an issuer that the intermediate pool completed.")
        m.sample("chainwatch_intermediates_completed_total", [:], inspector.intermediates.completed)

        let alerts = inspector.alerts
        let pending = alerts.pending
        let failures = alerts.failures
        m.family("chainwatch_alert_lines_written_total", .counter, "Alert lines written to the alert log.")
        m.sample("chainwatch_alert_lines_written_total", [:], alerts.written)
        m.family("chainwatch_alert_lines_pending", .gauge, "Alert lines waiting to be written (grows while the log cannot be written).")
        m.sample("chainwatch_alert_lines_pending", [:], pending.lines)
        m.family("chainwatch_alert_lines_dropped_total", .counter, "Alert lines dropped: the backlog was full while the log could not be written.")
        m.sample("chainwatch_alert_lines_dropped_total", [:], failures.dropped)
        m.family("chainwatch_alert_write_failures_total", .counter, "Writes to the alert log that failed (full disk, file size limit, I/O error).")
        m.sample("chainwatch_alert_write_failures_total", [:], failures.failedWrites)

        let held = server.heldBudget.usage
        m.family("chainwatch_held_bytes", .gauge, "Room taken now by bytes tunnels hold until their verdicts (of --held-memory; 16 KiB steps).")
        m.sample("chainwatch_held_bytes", [:], held.used)
        m.family("chainwatch_held_room_refused_total", .counter, "Tunnels closed because --held-memory had no room for the bytes they held until their verdicts (access line no_held_room).")
        m.sample("chainwatch_held_room_refused_total", [:], held.refused)

        m.family("chainwatch_relayed_bytes_total", .counter, "Bytes relayed between clients and upstreams, by path: copy (through the proxy's buffers), splice (in the kernel).")
        m.sample("chainwatch_relayed_bytes_total", ["path": "copy"], stats.bytesCopied.load(ordering: .relaxed))
        m.sample("chainwatch_relayed_bytes_total", ["path": "splice"], stats.bytesSpliced.load(ordering: .relaxed))

        let policy = reloader.status
        let snapshot = inspector.policies.snapshot
        m.family("chainwatch_policy_info", .gauge, "The policy in force (the value is 1): its source, the SHA-256 of its file, its generation.")
        m.sample("chainwatch_policy_info", ["source": snapshot.source, "sha256": policy.digest, "generation": String(snapshot.generation)], 1)
        m.family("chainwatch_policy_generation", .gauge, "The policy's generation: 1 at start, one more per reload that loaded.")
        m.sample("chainwatch_policy_generation", [:], snapshot.generation)
        m.family("chainwatch_policy_reloads_total", .counter, "Policy reloads, by result (loaded, rejected: the old policy stayed).")
        m.sample("chainwatch_policy_reloads_total", ["result": "loaded"], policy.reloads)
        m.sample("chainwatch_policy_reloads_total", ["result": "rejected"], policy.rejected)

        let loops = server.loopHealth
        m.family("chainwatch_loop_cpu_seconds_total", .counter, "CPU time each event loop's thread has used (its busy time).")
        for loop in loops { if let cpu = loop.cpuSeconds { m.sample("chainwatch_loop_cpu_seconds_total", ["loop": String(loop.index)], cpu) } }
        m.family("chainwatch_loop_heartbeat_age_seconds", .gauge, "Seconds since each loop's last heartbeat (about 1 s on a healthy loop).")
        for loop in loops { m.sample("chainwatch_loop_heartbeat_age_seconds", ["loop": String(loop.index)], Double(loop.silentMilliseconds) / 1000) }

        ProcessFacts.read().write(to: &m)
        return m.text
    }
}

/// Which process this is: so `chainwatch ctl`, which finds a proxy by its admin address, shows what it reached (two
/// proxies on one host cannot both have the default admin address).
public struct ProcessIdentity: Sendable {
    public let pid: Int32
    public let listen: String
    /// When the process started, seconds since the epoch (from /proc, as Prometheus clients read it; else now).
    public let startTimeSeconds: Double

    init(listen: String) {
        pid = getpid()
        self.listen = listen
        startTimeSeconds = ProcessFacts.startTimeSeconds() ?? Date().timeIntervalSince1970.rounded()
    }

    public var startTimeText: String { AlertRecord.timestamp(Int64(startTimeSeconds * 1000)) }

    func json(admin: String) -> String {
        var w = JSONWriter()
        w.field("pid", Int(pid))
        w.field("listen", listen)
        w.field("admin", admin)
        w.field("start_time", startTimeText)
        w.field("start_time_seconds", Int(startTimeSeconds))
        w.field("version", Observer.version)
        return w.text
    }
}

/// The standard `process_*` metrics, from /proc/self.
struct ProcessFacts {
    var cpuSeconds = 0.0, residentBytes = 0, openFDs = 0, maxFDs = 0

    /// The process's start: /proc/self/stat's starttime (clock ticks after boot) plus /proc/stat's btime.
    static func startTimeSeconds() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let close = stat.lastIndex(of: ")"),
              let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let btimeLine = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let boot = Double(btimeLine.dropFirst(6)) else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        return (boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))).rounded()
    }

    static func read() -> ProcessFacts {
        var facts = ProcessFacts()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
           let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 22, let user = Double(fields[11]), let system = Double(fields[12]), let rss = Int(fields[21]) {
                facts.cpuSeconds = (user + system) / ticks
                facts.residentBytes = rss * Int(sysconf(Int32(_SC_PAGESIZE)))
            }
        }
        facts.openFDs = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 { facts.maxFDs = Int(limit.rlim_cur) }
        return facts
    }

    func write(to m: inout PrometheusText) {
        m.family("process_cpu_seconds_total", .counter, "User and system CPU time spent, in seconds.")
        m.sample("process_cpu_seconds_total", [:], cpuSeconds)
        m.family("process_resident_memory_bytes", .gauge, "Resident memory size in bytes.")
        m.sample("process_resident_memory_bytes", [:], residentBytes)
        m.family("process_open_fds", .gauge, "Open file descriptors.")
        m.sample("process_open_fds", [:], openFDs)
        m.family("process_max_fds", .gauge, "The open file descriptor limit.")
        m.sample("process_max_fds", [:], maxFDs)
    }
}
