import ChainwatchCore

/// `chainwatch policy explain`: which rule applies to a host and every check it will run, in plain words.
public enum Explainer {
    public static func explain(_ policy: Policy, host: String, port: UInt16 = 443) -> String {
        let (rule, pattern) = policy.match(host: host, port: port)
        let h = HostName.normalize(host)
        var out: [String] = []
        if let pattern {
            let at = rule.location.map { " (\($0.file):\($0.line))" } ?? ""
            out.append("\(h):\(port) → rule '\(rule.name)'\(at), matched by \(describe(pattern)).")
        } else {
            out.append("\(h):\(port) → no rule matches: the defaults apply.")
        }
        switch rule.action {
        case .block: out.append("Action on a failed check: block — upstream bytes are held until the verdict; a failure closes both sides and logs the reason.")
        case .alert: out.append("Action on a failed check: alert — traffic flows without waiting; a failure is logged.")
        }
        out.append("Checks, in order:")
        var n = 0
        func step(_ text: String) { n += 1; out.append("  \(n). \(text)") }

        if let p = rule.profile {
            var parts: [String] = []
            if let v = p.minVersion { parts.append("\(v) or newer (else tls_version)") }
            if let b = p.minSignatureHashBits { parts.append("certificate signatures \(ProtocolProfile.digestName(bits: b)) or stronger (else weak_signature)") }
            var keys: [String] = []
            if let r = p.minRSABits { keys.append("RSA ≥ \(r) bits") }
            if let e = p.minECBits { keys.append("EC ≥ \(e) bits") }
            if !keys.isEmpty { parts.append("keys " + keys.joined(separator: ", ") + " (else weak_key)") }
            if p.requireForwardSecrecy { parts.append("a forward-secret key exchange (else no_forward_secrecy)") }
            step("Protocol (profile \(p.name)): " + (parts.isEmpty ? "no requirement." : parts.joined(separator: "; ") + "."))
        } else {
            step("Protocol: no floor (no `profile`); any TLS version and cipher is accepted.")
        }
        var trust: [String] = []
        if rule.anchors.system { trust.append("the system root store") }
        trust += rule.anchors.certificates.map { "the CA in \($0.origin)" }
        step("Path: the chain must validate, unexpired, to " + trust.joined(separator: " or ") + " (else untrusted_chain / expired / not_yet_valid).")
        if rule.checkHostname {
            step("Hostname: the leaf's subjectAltNames must name \(h) (SNI, else the CONNECT host; RFC 6125, wildcards one label; else hostname_mismatch).")
        } else {
            step("Hostname: NOT checked (`hostname: false`).")
        }
        if let pins = rule.pins {
            var levels: [String] = []
            if let r = pins.root { levels.append("the path's root must be one of \(list(r)) (else root_mismatch)") }
            if let i = pins.intermediate { levels.append("an intermediate on the path must be one of \(list(i)) (else intermediate_mismatch)") }
            if !pins.leafSubjects.isEmpty {
                levels.append("the leaf must match " + pins.leafSubjects.map(\.description).joined(separator: " or ") + " (else leaf_subject_mismatch)")
            }
            if let l = pins.leaf { levels.append("the leaf must be one of \(list(l)) (else spki_mismatch)") }
            let expiry = pins.expires.map { " until \($0.rfc3339); after that the pins are reported as pin_expired, not enforced" } ?? ""
            step("Pins, compared with the validated path (not the order the server sent)\(expiry): " + levels.joined(separator: "; ") + ".")
        } else {
            step("Pins: none.")
            if rule.anchors.system {
                step("Local root: a chain that validates only through a root added to this machine's OS trust store (not a public root, not an anchor you named) → \(words(rule.localRoot)) (local_root).")
            }
        }
        step("SNI: a ClientHello naming another host than the CONNECT request → \(words(rule.sniMismatch)) (sni_mismatch); the tunnel is judged under this rule all the same (a CONNECT by address: under the SNI's).")
        out.append("Also:")
        let followsAction = rule.onProbeErrorSetting == nil ? ", as the rule's action (no on_probe_error)" : ""
        out.append("  - TLS 1.3 or resumed sessions are judged from chainwatch's own probe; if the probe fails → \(words(rule.onProbeError))\(followsAction) (probe_failed).")
        out.append("  - A TLS 1.3 tunnel whose visible handshake disagrees with the probe's, even after a fresh probe → \(rule.action == .block ? "blocked" : "alerted") (evidence_mismatch).")
        out.append("  - Bytes that are not TLS → \(words(rule.nonTLS)) (not_tls).")
        out.append(rule.httpsOnly
            ? "  - Plain HTTP to this host → \(rule.action == .block ? "blocked" : "alerted") (https_only)."
            : "  - Plain HTTP to this host is forwarded (no `https_only`).")
        return out.joined(separator: "\n") + "\n"
    }

    static func describe(_ p: HostPattern) -> String {
        let port = p.port.map { " on port \($0)" } ?? ""
        switch p.kind {
        case .exact(let h): return "exact host \(h)\(port)"
        case .wildcard(let parent): return "wildcard *.\(parent) (one label)\(port)"
        case .domain(let d): return "domain \(d) and its subdomains\(port)"
        }
    }

    static func list(_ l: LevelPins) -> String {
        let items = l.spki.map { "SPKI \($0.pinText)" } + l.certificates.map { "certificate \($0.pinText)" }
        return "[" + items.joined(separator: ", ") + "]"
    }

    static func words(_ d: Disposition) -> String {
        switch d {
        case .block: return "block"
        case .alert: return "alert"
        case .allow: return "allowed silently"
        }
    }
}
