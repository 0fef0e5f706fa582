/// One finding on one tunnel, as one alert-log line: ECS field names, plus `chainwatch.*` for the verdict.
/// Pure: the proxy fills it in and hands `jsonLine` to the alert writer.
public struct AlertRecord: Sendable {
    /// Milliseconds since the epoch.
    public var timeMilliseconds: Int64
    /// The connection the finding is about: client, destination, SNI, version, cipher, JA4 fingerprints.
    public var connection: ConnectionFacts
    public var finding: Finding
    public var rule: Rule
    public var evidence: Evidence?
    /// What the proxy did: `block` closed the tunnel (or answered 403), `alert` let it pass.
    public var action: Action
    /// Every finding of the verdict (the deciding one included), listed in `chainwatch.findings`.
    public var allFindings: [Finding]
    /// The proxy that wrote the line.
    public var observer: Observer

    public init(timeMilliseconds: Int64, connection: ConnectionFacts, finding: Finding, rule: Rule, evidence: Evidence?,
                action: Action, allFindings: [Finding] = [], observer: Observer) {
        self.timeMilliseconds = timeMilliseconds; self.connection = connection; self.finding = finding
        self.rule = rule; self.evidence = evidence; self.action = action; self.allFindings = allFindings
        self.observer = observer
    }

    /// RFC 3339 with milliseconds, UTC.
    static func timestamp(_ ms: Int64) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        let base = UnixTime(seconds: seconds).rfc3339
        let millis = ms - seconds * 1000
        let text = String(millis)
        return base.dropLast() + "." + String(repeating: "0", count: 3 - text.count) + text + "Z"
    }

    public var json: JSONValue {
        var o = JSONObjectBuilder()
        o.set("@timestamp", Self.timestamp(timeMilliseconds))
        o.set("ecs.version", Observer.ecsVersion)
        o.set("observer.hostname", observer.hostname)
        o.set("observer.product", "chainwatch")
        o.set("observer.vendor", "chainwatch")
        o.set("observer.version", Observer.version)
        o.set("observer.type", "proxy")
        o.set("event.kind", "alert")
        o.set("event.category", .array([.string("network")]))
        // ECS's allowed types for the network category: the tunnel was refused (block) or let through (alert).
        o.set("event.type", .array([.string("connection"), .string(action == .block ? "denied" : "allowed")]))
        o.set("event.action", action.rawValue)
        o.set("event.reason", finding.reason.rawValue)
        // The outcome of what the line is about, a check of the chain or the tunnel: it failed, under either action
        // (the action says whether the traffic passed anyway).
        o.set("event.outcome", "failure")
        o.set("message", "\(action.rawValue) \(connection.connectHost):\(connection.port): \(finding.reason.rawValue): \(finding.detail)")
        o.set("rule.name", rule.name)
        o.set("source.ip", connection.sourceIP)
        o.set("source.port", Int(connection.sourcePort))
        o.set("destination.domain", connection.connectHost)
        o.set("destination.ip", connection.upstreamIP)
        o.set("destination.port", Int(connection.port))
        o.set("network.protocol", "tls")
        o.set("tls.version_protocol", connection.protocolVersion == nil ? nil : "tls")
        o.set("tls.version", connection.protocolVersion?.ecsName)
        o.set("tls.cipher", connection.cipher?.name)
        o.set("tls.client.server_name", connection.serverName)
        o.set("chainwatch.client.ja4", connection.clientJA4)   // ECS has no JA4 field (it has tls.client.ja3)
        let chain = evidence.map { $0.validation.path.isEmpty ? $0.validation.presented : $0.validation.path } ?? []
        if let leaf = evidence?.leaf {
            o.set("tls.server.hash.sha256", HashText.hex(leaf.sha256))
            o.set("tls.server.subject", leaf.subject)
            o.set("tls.server.issuer", leaf.issuer)
            o.set("tls.server.not_after", leaf.notAfter.rfc3339)
            o.set("tls.server.not_before", leaf.notBefore.rfc3339)
            o.set("tls.server.x509.subject.distinguished_name", leaf.subject)
            o.set("tls.server.x509.issuer.distinguished_name", leaf.issuer)
            o.set("tls.server.x509.serial_number", leaf.serialHex)
            o.set("tls.server.x509.not_after", leaf.notAfter.rfc3339)
            o.set("tls.server.x509.alternative_names", leaf.dnsNames + leaf.ipAddresses)
            o.set("tls.server.x509.public_key_algorithm", leaf.keyType.rawValue)
            o.set("tls.server.x509.public_key_size", leaf.keyBits)
            o.set("tls.server.x509.signature_algorithm", leaf.signatureAlgorithm)
        }
        o.set("chainwatch.verdict", action.rawValue)
        o.set("chainwatch.probe.ja4", connection.probeJA4)
        o.set("chainwatch.tunnel_id", String(connection.id))
        o.set("chainwatch.rule", rule.name)
        o.set("chainwatch.reason", finding.reason.rawValue)
        o.set("chainwatch.level", finding.level?.rawValue)
        o.set("chainwatch.detail", finding.detail)
        o.set("chainwatch.check", finding.check)
        o.set("chainwatch.evidence", evidence?.source.rawValue)
        if allFindings.count > 1 {
            o.set("chainwatch.findings", .array(allFindings.map { f in
                var b = JSONObjectBuilder()
                b.set("reason", f.reason.rawValue)
                b.set("action", f.action.rawValue)
                b.set("level", f.level?.rawValue)
                b.set("detail", f.detail)
                return b.value
            }))
        }
        if let evidence {
            o.set("chainwatch.chain.validated", evidence.validation.error == nil && !evidence.validation.path.isEmpty)
            o.set("chainwatch.chain.subjects", chain.map(\.subject))
            o.set("chainwatch.chain.sha256", chain.map { HashText.hex($0.sha256) })
            o.set("chainwatch.chain.spki_sha256", chain.map { HashText.base64($0.spkiSHA256) })
            o.set("chainwatch.chain.presented_sha256", evidence.validation.presented.map { HashText.hex($0.sha256) })
            o.set("chainwatch.chain.anchor_kind", evidence.validation.anchorKind?.rawValue)
            o.set("chainwatch.chain.ocsp", evidence.stapled?.word ?? "absent")
            switch evidence.stapled {
            case .revoked(let detail): o.set("chainwatch.chain.ocsp_detail", detail)
            case .invalid(let detail): o.set("chainwatch.chain.ocsp_detail", detail)
            default: break
            }
            if let error = evidence.validation.error {
                o.set("chainwatch.chain.error", error.message)
                o.set("chainwatch.chain.error_depth", error.depth)
            }
        }
        if let pins = rule.pins {
            if let root = pins.root { o.set("chainwatch.expected.root", Self.pinTexts(root)) }
            if let intermediate = pins.intermediate { o.set("chainwatch.expected.intermediate", Self.pinTexts(intermediate)) }
            if let leaf = pins.leaf { o.set("chainwatch.expected.leaf", Self.pinTexts(leaf)) }
            if !pins.leafSubjects.isEmpty { o.set("chainwatch.expected.leaf_subject", pins.leafSubjects.map(\.description)) }
            if let expires = pins.expires { o.set("chainwatch.expected.expires", expires.rfc3339) }
        }
        return o.value
    }

    static func pinTexts(_ level: LevelPins) -> [String] {
        level.certificates.map { "cert sha256/" + HashText.base64($0.bytes) } + level.spki.map { "spki sha256/" + HashText.base64($0.bytes) }
    }

    public var jsonLine: String { json.serialized }
}

extension JSONObjectBuilder {
    public mutating func set(_ dottedKey: String, _ value: Bool?) { set(dottedKey, value.map(JSONValue.bool)) }
}
