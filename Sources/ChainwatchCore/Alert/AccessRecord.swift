/// One line of the access log (`--access-log`): a client connection as it ended, squid's access.log in ECS. Every
/// connection gets one, findings or not: who, where, which handshake, what was decided, how many bytes each way,
/// how long, and why it closed.
public struct AccessRecord: Sendable {
    /// What the connection was; `verdict` is no connection but a tunnel's verdict that came after its line was written
    /// (that line says `chainwatch.verdict: pending`; both carry the same `chainwatch.tunnel_id`).
    public enum Kind: String, Sendable { case tunnel, http, refused, dropped, verdict }

    /// Why it ended, as a code (`chainwatch.close.reason`).
    public enum CloseReason: String, Sendable {
        /// Both sides closed, or the plain-HTTP exchange ended as framed.
        case closed
        /// A verdict blocked the tunnel.
        case blocked
        /// The proxy answered with an error of its own (the status is in `http.response.status_code`).
        case refused
        /// No bytes for the idle (or half-closed) timeout.
        case idle
        /// A side reset, or was reset because the other failed.
        case reset
        /// The proxy stopped and its grace period ended.
        case shutdown
        /// The bytes a tunnel held until its verdict found no room in the process's budget (`--held-memory`): closed
        /// before any passed.
        case noHeldRoom = "no_held_room"
    }

    public var endMilliseconds: Int64
    /// From the request (or the connection, for a refusal before one) to the line, in nanoseconds (ECS).
    public var durationNanoseconds: Int64
    public var kind: Kind
    public var connection: ConnectionFacts
    /// `CONNECT`, `GET`, ...: nil when the request never completed.
    public var method: String?
    /// The absolute-form URL of a plain-HTTP request (not a tunnel's target, which `destination.*` carries).
    public var url: String?
    /// The proxy's own status (`403`, `502`, ...) for a refused request, `200` for an established tunnel.
    public var status: Int?
    /// Bytes from the client and to it (ECS `source.bytes`, `destination.bytes` are from each side's point of view:
    /// the client sent `source.bytes`, the upstream sent `destination.bytes`).
    public var bytesFromClient: Int
    public var bytesToClient: Int
    /// `pass`, `alert` or `block`; `pending` when the tunnel ended while its verdict was on its way (a probe or a
    /// judgement: a `verdict` line follows); nil when none was needed (not TLS, a plain-HTTP request, closed first).
    public var verdict: String?
    /// The deciding finding's reason, for `alert` and `block`.
    public var reason: String?
    /// Where the verdict's chain came from: `passive`, `probe`, `cache`.
    public var evidence: String?
    public var closeReason: CloseReason
    /// A sentence for people (the refusal's text, a reset's cause); nil for an ordinary close.
    public var detail: String?
    public var observer: Observer

    public init(endMilliseconds: Int64, durationNanoseconds: Int64, kind: Kind, connection: ConnectionFacts,
                method: String?, url: String?, status: Int?, bytesFromClient: Int, bytesToClient: Int,
                verdict: String?, reason: String?, evidence: String?, closeReason: CloseReason, detail: String?,
                observer: Observer) {
        self.endMilliseconds = endMilliseconds; self.durationNanoseconds = durationNanoseconds; self.kind = kind
        self.connection = connection; self.method = method; self.url = url; self.status = status
        self.bytesFromClient = bytesFromClient; self.bytesToClient = bytesToClient; self.verdict = verdict
        self.reason = reason; self.evidence = evidence; self.closeReason = closeReason; self.detail = detail
        self.observer = observer
    }

    public var jsonLine: String {
        var w = JSONWriter()
        w.field("@timestamp", AlertRecord.timestamp(endMilliseconds))
        w.observedBy(observer)
        let late = kind == .verdict
        let denied = late ? verdict == "block" : closeReason == .blocked || closeReason == .refused
        w.object("event") { e in
            e.field("kind", "event")
            e.field("category", ["network"])
            e.field("type", ["connection", late ? "info" : "end"] + (denied ? ["denied"] : []))
            e.field("action", kind.rawValue)
            e.field("outcome", denied || (!late && (closeReason == .reset || closeReason == .noHeldRoom)) ? "failure" : "success")
            e.field("reason", reason)
            e.field("duration", Int(durationNanoseconds))   // ECS: nanoseconds
        }
        // A refusal before any target was read names none.
        var message = connection.connectHost.isEmpty && connection.port == 0
            ? "\(kind.rawValue) - " : "\(kind.rawValue) \(Authority(host: connection.connectHost, port: connection.port)) "
        if late {
            message += (verdict ?? "pass") + (reason.map { ": \($0)" } ?? "") + " (the tunnel's line was written as it ended)"
        } else {
            message += closeReason.rawValue
            if let detail { message += ": \(detail)" }
        }
        w.field("message", message)
        w.object("source") { s in
            s.field("ip", connection.sourceIP)
            s.field("port", Int(connection.sourcePort))
            s.field("bytes", late ? nil : bytesFromClient)   // the tunnel's own line counted them: sums stay right
        }
        w.object("destination") { d in
            d.field("domain", connection.connectHost.isEmpty ? nil : connection.connectHost)
            d.field("ip", connection.upstreamIP)
            d.field("port", connection.port == 0 ? nil : Int(connection.port))
            d.field("bytes", late ? nil : bytesToClient)
        }
        w.object("network") { n in
            n.field("protocol", kind == .http ? "http" : (connection.protocolVersion != nil ? "tls" : nil))
            n.field("bytes", late ? nil : bytesFromClient + bytesToClient)
        }
        w.object("http") { h in
            h.object("request") { $0.field("method", method) }
            h.object("response") { $0.field("status_code", status) }
        }
        w.object("url") { $0.field("original", url) }
        w.object("tls") { t in
            t.field("version_protocol", connection.protocolVersion == nil ? nil : "tls")
            t.field("version", connection.protocolVersion?.ecsName)
            t.field("cipher", connection.cipher?.name)
            t.object("client") { $0.field("server_name", connection.serverName) }
        }
        w.object("chainwatch") { c in
            c.field("verdict", verdict)
            c.field("evidence", evidence)
            c.field("tunnel_id", connection.tunnelID)
            c.object("close") { $0.field("reason", closeReason.rawValue) }
        }
        return w.text
    }
}
