import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL

/// The access log: one line per tunnel and plain-HTTP request, written as it ends.
extension ProxyConnection {
    /// What the access line of the request or tunnel in progress says so far.
    struct AccessState {
        /// The request line (split only when a line is written: most proxies run without an access log).
        var requestLine: String?
        /// The request's upstream (the machine forgets it when an exchange ends, before the line is written).
        var target: Authority?
        /// When it began, on the monotonic clock in nanoseconds (`event.duration` is in nanoseconds: the loop's cached
        /// clock ticks in 4 ms steps, which made every duration a multiple of 4 ms and a quick refusal's 0).
        var started: UInt64 = 0
        var status: Int?
        var fromClient = 0
        var toClient = 0
        var closeReason = AccessRecord.CloseReason.closed
        var detail: String?
        /// What admission decided when it wrote a finding (a known-bad upstream's `403`, an `https_only` alert).
        var admission: InspectionOutcome?

        mutating func request(_ line: String) {
            requestLine = line
            started = MonotonicClock.nanoseconds()
        }

        /// The method (`SOCKS5` for a SOCKS client's tunnel, `TRANSPARENT` for a redirected connection's), and the
        /// target unless it is a tunnel's (the destination says that one).
        var methodAndURL: (method: String?, url: String?) {
            guard let parts = requestLine?.split(separator: " ", maxSplits: 1) else { return (nil, nil) }
            let method = parts.first.map(String.init)
            let tunnel = method == "CONNECT" || method == "SOCKS5" || method == "TRANSPARENT"
            return (method, parts.count == 2 && !tunnel ? String(parts[1]) : nil)
        }

        /// Bytes the client sent (request heads and bodies, tunnel bytes), or that it was sent.
        mutating func moved(_ count: Int, from side: Side) {
            if side == .client { fromClient += count } else { toClient += count }
        }
    }

    /// Writes the access line of the request or tunnel in progress (when there is an access log), then starts afresh
    /// for the next request on the connection.
    func logAccess(kind: AccessRecord.Kind) {
        if let record = accessRecord(kind: kind) { writeAccess(record, inspection: inspection) }
    }

    /// The access line of the request or tunnel in progress, its verdict as far as known (nil without an access log);
    /// starts afresh for the next request on the connection.
    /// A refusal before any request line (a malformed or oversized head, an unsupported method, no head in time) has a
    /// line too, with its status and reason, and no method or URL.
    func accessRecord(kind: AccessRecord.Kind) -> AccessRecord? {
        defer {
            access = AccessState()
            // What a refusal of the next request counts from; no clock read for a proxy without an access log.
            if worker.inspector.accessLog != nil { access.started = MonotonicClock.nanoseconds() }
        }
        guard worker.inspector.accessLog != nil, access.requestLine != nil || access.status != nil else { return nil }
        let (method, url) = access.methodAndURL
        let now = worker.loop.cachedMilliseconds
        // A refusal before a target was read: the client's side only (no destination).
        var known = inspection?.handshakeFacts ?? self.facts(for: access.target ?? Authority(host: "", port: 0))
        known.upstreamIP = known.upstreamIP ?? connectedAddress?.ip
        let verdict = inspection?.outcome ?? access.admission
        let status = access.status ?? (kind == .http ? machine.responseStatus : nil) ?? (kind == .tunnel ? 200 : nil)
        let took = MonotonicClock.nanoseconds() &- access.started
        return AccessRecord(endMilliseconds: now, durationNanoseconds: Int64(min(took, UInt64(Int64.max))), kind: kind,
                            connection: known, method: method, url: url, status: status,
                            bytesFromClient: access.fromClient, bytesToClient: access.toClient,
                            verdict: verdict?.actionName, reason: verdict?.reason?.rawValue,
                            evidence: verdict?.evidence?.rawValue,
                            closeReason: access.closeReason, detail: access.detail, observer: worker.inspector.observer)
    }

    /// Writes `record`. A tunnel whose verdict is still on its way (it ended while its probe or judgement was, as a
    /// first contact under `alert` may) says `pending`, and its verdict gets a line of its own when it comes
    /// (`event.action: verdict`, the same `chainwatch.tunnel_id`): whoever filters the access log for findings sees
    /// every one the alert log has.
    func writeAccess(_ record: AccessRecord, inspection: TunnelInspection?) {
        guard let log = worker.inspector.accessLog else { return }
        var record = record
        if let inspection {
            let outcome = inspection.outcome
            record.verdict = inspection.awaitsVerdict ? "pending" : outcome?.actionName
            record.reason = outcome?.reason?.rawValue
            record.evidence = outcome?.evidence?.rawValue
            if inspection.awaitsVerdict {
                let loop = worker.loop
                inspection.lateVerdict = { [record] outcome, facts in
                    var late = record
                    let now = loop.cachedMilliseconds
                    late.kind = .verdict
                    late.durationNanoseconds += max(0, now - record.endMilliseconds) * 1_000_000
                    late.endMilliseconds = now
                    late.connection = facts
                    late.connection.upstreamIP = facts.upstreamIP ?? record.connection.upstreamIP
                    late.verdict = outcome?.actionName ?? "pass"
                    late.reason = outcome?.reason?.rawValue
                    late.evidence = outcome?.evidence?.rawValue
                    log.submit(late.jsonLine)
                }
            }
        }
        log.submit(record.jsonLine)
    }
}
