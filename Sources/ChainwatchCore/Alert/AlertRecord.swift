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
    /// When the finding marked its upstream known-bad: when the mark lapses (milliseconds since the epoch). Its
    /// `CONNECT`s get `403` until then, counted on the mark, not written as findings of their own.
    public var knownBadUntilMilliseconds: Int64?

    public init(timeMilliseconds: Int64, connection: ConnectionFacts, finding: Finding, rule: Rule, evidence: Evidence?,
                action: Action, allFindings: [Finding] = [], observer: Observer, knownBadUntilMilliseconds: Int64? = nil) {
        self.timeMilliseconds = timeMilliseconds; self.connection = connection; self.finding = finding
        self.rule = rule; self.evidence = evidence; self.action = action; self.allFindings = allFindings
        self.observer = observer; self.knownBadUntilMilliseconds = knownBadUntilMilliseconds
    }

    /// How `chainwatch ctl clear-known-bad` names an upstream (`admin`: the `--admin` ctl needs, when not its default).
    public static func clearCommand(host: String, port: UInt16, admin: String? = nil) -> String {
        "chainwatch ctl \(admin.map { "--admin \($0) " } ?? "")clear-known-bad \(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// RFC 3339 with milliseconds, UTC.
    public static func timestamp(_ ms: Int64) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        var text = Array(UnixTime(seconds: seconds).rfc3339.utf8)   // ends in "Z"
        let millis = ms - seconds * 1000
        text.removeLast()
        text += [UInt8(ascii: "."), UInt8(ascii: "0") + UInt8(millis / 100), UInt8(ascii: "0") + UInt8(millis / 10 % 10),
                 UInt8(ascii: "0") + UInt8(millis % 10), UInt8(ascii: "Z")]
        return String(decoding: text, as: UTF8.self)
    }

    /// The line: ECS objects, then `chainwatch`, written straight to bytes (one per finding: it must be cheap).
    public var jsonLine: String {
        // Locals for the closures below: capturing `self` copied the whole record once per nested object.
        let action = action, finding = finding, connection = connection, rule = rule, evidence = evidence
        let allFindings = allFindings, knownBadUntil = knownBadUntilMilliseconds, time = timeMilliseconds
        var w = JSONWriter()
        w.field("@timestamp", Self.timestamp(timeMilliseconds))
        w.observedBy(observer)
        w.object("event") { e in
            e.field("kind", "alert")
            e.field("category", ["network"])
            // ECS's allowed types for the network category: the tunnel was refused (block) or let through (alert).
            e.field("type", ["connection", action == .block ? "denied" : "allowed"])
            e.field("action", action.rawValue)
            e.field("reason", finding.reason.rawValue)
            // The outcome of what the line is about, a check of the chain or the tunnel: it failed, under either
            // action (the action says whether the traffic passed anyway).
            e.field("outcome", "failure")
        }
        // An IPv6 upstream bracketed ([::1]:443), as `Authority` writes it.
        var message = "\(action.rawValue) \(Authority(host: connection.connectHost, port: connection.port)): \(finding.reason.rawValue): \(finding.detail)"
        if let knownBadUntil {
            message += "; its CONNECTs get 403 until \(Self.timestamp(knownBadUntil)) (\(Self.clearCommand(host: connection.connectHost, port: connection.port, admin: observer.admin)) ends it sooner)"
        }
        w.field("message", message)
        w.object("rule") { $0.field("name", rule.name) }
        w.object("source") { s in
            s.field("ip", connection.sourceIP)
            s.field("port", Int(connection.sourcePort))
        }
        w.object("destination") { d in
            d.field("domain", connection.connectHost)
            d.field("ip", connection.upstreamIP)
            d.field("port", Int(connection.port))
        }
        w.object("network") { $0.field("protocol", "tls") }
        w.object("tls") { t in
            t.field("version_protocol", connection.protocolVersion == nil ? nil : "tls")
            t.field("version", connection.protocolVersion?.ecsName)
            t.field("cipher", connection.cipher?.name)
            t.object("client") { $0.field("server_name", connection.serverName) }
            if let rendered = evidence?.rendered { t.members(rendered.server) } else if let leaf = evidence?.leaf { Self.writeServer(leaf, to: &t) }
        }
        w.object("chainwatch") { c in
            c.field("verdict", action.rawValue)
            c.object("client") { client in
                client.field("ja4", connection.clientJA4)   // ECS has no JA4 field (it has ja3)
                client.field("via", connection.via)
            }
            c.object("probe") { $0.field("ja4", connection.probeJA4) }
            c.field("tunnel_id", connection.tunnelID)
            c.field("rule", rule.name)
            c.field("reason", finding.reason.rawValue)
            c.field("level", finding.level?.rawValue)
            c.field("detail", finding.detail)
            c.field("check", finding.check)
            c.field("evidence", evidence?.source.rawValue)
            c.field("next", finding.reason.nextStep)
            if let knownBadUntil {
                c.object("known_bad") { k in
                    k.field("until", Self.timestamp(knownBadUntil))
                    k.field("seconds", Int((knownBadUntil - time + 999) / 1000))
                    k.field("clear", Self.clearCommand(host: connection.connectHost, port: connection.port, admin: observer.admin))
                }
            }
            if allFindings.count > 1 {
                c.field("findings", JSONValue.array(allFindings.map { f in
                    .object([("reason", .string(f.reason.rawValue)), ("action", .string(f.action.rawValue))]
                            + (f.level.map { [("level", JSONValue.string($0.rawValue))] } ?? [])
                            + [("detail", .string(f.detail))])
                }))
            }
            if let rendered = evidence?.rendered { c.members(rendered.chain) } else if let evidence { Self.writeChain(evidence, to: &c) }
            if let pins = rule.pins {
                c.object("expected") { x in
                    x.field("root", pins.root.map(Self.pinTexts))
                    x.field("intermediate", pins.intermediate.map(Self.pinTexts))
                    x.field("leaf", pins.leaf.map(Self.pinTexts))
                    x.field("leaf_subject", pins.leafSubjects.isEmpty ? nil : pins.leafSubjects.map(\.description))
                    x.field("expires", pins.expires?.rfc3339)
                }
                if let evidence { Self.writeSeen(evidence, to: &c) }
            }
        }
        return w.text
    }

    /// The members of a line that depend on the evidence's chain alone, for `Evidence.rendered`.
    public static func render(_ evidence: Evidence) -> RenderedEvidence {
        RenderedEvidence(server: JSONWriter.members { w in if let leaf = evidence.leaf { writeServer(leaf, to: &w) } },
                         chain: JSONWriter.members { w in writeChain(evidence, to: &w) })
    }

    /// `tls.server.*`: the leaf.
    private static func writeServer(_ leaf: CertificateFacts, to t: inout JSONWriter) {
        t.object("server") { s in
            s.object("hash") { $0.field("sha256", HashText.hex(leaf.sha256)) }
            s.field("subject", leaf.subject)
            s.field("issuer", leaf.issuer)
            s.field("not_after", leaf.notAfter.rfc3339)
            s.field("not_before", leaf.notBefore.rfc3339)
            s.object("x509") { x in
                x.object("subject") { $0.field("distinguished_name", leaf.subject) }
                x.object("issuer") { $0.field("distinguished_name", leaf.issuer) }
                x.field("serial_number", leaf.serialHex)
                x.field("not_after", leaf.notAfter.rfc3339)
                x.field("alternative_names", Array((leaf.dnsNames + leaf.ipAddresses).prefix(CertificateFacts.namesListed)))
                x.field("public_key_algorithm", leaf.keyType.rawValue)
                x.field("public_key_size", leaf.keyBits)
                x.field("signature_algorithm", leaf.signatureAlgorithm)
            }
        }
    }

    /// `chainwatch.chain.*`: the path (or what was presented), its anchor, its staple, its error.
    private static func writeChain(_ evidence: Evidence, to c: inout JSONWriter) {
        let validation = evidence.validation
        let chain = validation.path.isEmpty ? validation.presented : validation.path
        c.object("chain") { x in
            x.field("validated", validation.error == nil && !validation.path.isEmpty)
            x.field("subjects", chain.map(\.subject))
            x.field("sha256", chain.map { HashText.hex($0.sha256) })
            x.field("spki_sha256", chain.map { HashText.base64($0.spkiSHA256) })
            x.field("presented_sha256", validation.presented.map { HashText.hex($0.sha256) })
            x.field("anchor_kind", validation.anchorKind?.rawValue)
            if let leaf = evidence.leaf {   // tls.server.x509.alternative_names lists at most `namesListed`
                let omitted = leaf.namesOmitted + Swift.max(0, leaf.dnsNames.count + leaf.ipAddresses.count - CertificateFacts.namesListed)
                if omitted > 0 { x.field("leaf_names_omitted", omitted) }
            }
            x.field("ocsp", evidence.stapled?.word ?? "absent")
            switch evidence.stapled {
            case .revoked(let detail), .invalid(let detail): x.field("ocsp_detail", detail)
            default: break
            }
            x.field("error", validation.error?.message)
            x.field("error_depth", validation.error?.depth)
        }
    }

    /// `chainwatch.seen`: the validated path level by level, in `chainwatch.expected`'s encoding, so each expected pin
    /// can be looked for among what was seen. A chain that built no path has no levels (its last certificate is
    /// usually an intermediate, servers leave the root out): it is listed as presented, leaf first.
    private static func writeSeen(_ evidence: Evidence, to c: inout JSONWriter) {
        let validation = evidence.validation
        let validated = !validation.path.isEmpty
        let chain = validated ? validation.path : validation.presented
        guard let leaf = chain.first else { return }
        func texts(_ certificate: CertificateFacts) -> [String] {
            ["cert sha256/" + HashText.base64(certificate.sha256), "spki sha256/" + HashText.base64(certificate.spkiSHA256)]
        }
        c.object("seen") { x in
            if validated {
                x.field("root", chain.count > 1 ? texts(chain[chain.count - 1]) : nil)
                x.field("root_subject", chain.count > 1 ? chain[chain.count - 1].subject : nil)
                x.field("intermediate", chain.count > 2 ? chain[1..<(chain.count - 1)].flatMap(texts) : nil)
            } else {
                x.field("presented", chain.flatMap(texts))
                x.field("presented_subjects", chain.map(\.subject))
            }
            x.field("leaf", texts(leaf))
            x.field("leaf_subject", [leaf.subject])
            x.field("validated", validation.error == nil && validated)
        }
    }

    static func pinTexts(_ level: LevelPins) -> [String] {
        level.certificates.map { "cert sha256/" + HashText.base64($0.bytes) } + level.spki.map { "spki sha256/" + HashText.base64($0.bytes) }
    }
}
