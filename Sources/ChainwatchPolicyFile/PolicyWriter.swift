import ChainwatchCore

/// Writes policy YAML from what a server presents (`chainwatch pin`): trust on first use, without hand-copied fingerprints.
public enum PolicyWriter {
    /// One rule (a `rules:` list item, indented by two spaces) pinning `path` (the validated path, leaf first, anchor last):
    /// the root's and intermediates' SPKI, and the leaf's subject; the leaf's own key as a commented option.
    /// A comment above each pin names the certificate (subject, issuer, not-after); a reminder asks for backup pins.
    /// `anchors` are written as given: `system` and/or PEM file paths (the CA a private server's chain ends at).
    public static func pinRule(name: String, host: String, port: UInt16?, action: Action, path: [CertificateFacts],
                               anchors: [String] = ["system"]) -> String {
        var l: [String] = []
        let hostText = HostName.normalize(host)
        let match = (port == nil || port == 443) ? hostText : "\(hostText):\(port!)"
        l.append("  # Written by `chainwatch pin` from the chain \(hostText) presented (trust on first use): check it came from the real server.")
        l.append("  # BACKUP PIN: add a second pin per level (your CA's next intermediate or another root it uses, or the key of")
        l.append("  # the next leaf) before `action: block`; `chainwatch policy check` warns while a blocking set has a single pin.")
        l.append("  - name: \(quoted(name))")
        l.append("    match: [\(quoted(match))]")
        l.append("    action: \(action.rawValue)")
        if action == .block {
            l.append("    on_probe_error: block   # no chain from the probe (TLS 1.3, resumption): block, as without the line")
        }
        l.append("    anchors: [\(anchors.map { $0 == "system" ? $0 : quoted($0) }.joined(separator: ", "))]")
        guard let leaf = path.first else {
            l.append("    # (no certificates: nothing to pin)")
            return l.joined(separator: "\n") + "\n"
        }
        l.append("    pins:")
        let pinned = path.count > 1 ? Array(path.dropFirst()) : []
        if let expires = pinned.map(\.notAfter).min() {
            l.append("      # The earliest not-after of the pinned CA certificates; after it the pins are reported, not enforced.")
            l.append("      expires: \(String(expires.rfc3339.prefix(10)))")
        }
        if path.count > 1, let root = path.last {
            l.append("      root:")
            l.append("        spki:")
            l += comment(root, indent: "          ")
            l.append("          - \(spki(root))")
        }
        if path.count > 2 {
            l.append("      intermediate:")
            l.append("        spki:")
            for cert in path[1..<(path.count - 1)] {
                l += comment(cert, indent: "          ")
                l.append("          - \(spki(cert))")
            }
        }
        l.append("      leaf:")
        l += comment(leaf, indent: "        ")
        l.append("        subject: \(quoted(leaf.subject))")
        l.append("        # To pin the leaf's key too (it changes at each renewal unless the key is reused):")
        l.append("        # spki: [\(spki(leaf))]")
        return l.joined(separator: "\n") + "\n"
    }

    /// A complete policy file: the explicit defaults and one pin rule. Loads with `PolicyLoader`.
    public static func pinPolicy(name: String, host: String, port: UInt16?, action: Action, path: [CertificateFacts],
                                 anchors: [String] = ["system"]) -> String {
        """
        # chainwatch policy written by `chainwatch pin`. Reference: policies/REFERENCE.md
        defaults:            # hosts that match no rule: system trust, alert
          action: alert
          anchors: [system]
          hostname: true
        rules:

        """ + pinRule(name: name, host: host, port: port, action: action, path: path, anchors: anchors)
    }

    static func comment(_ c: CertificateFacts, indent: String) -> [String] {
        // Escaped like a quoted scalar (without the quotes) so a hostile DN cannot end the comment line.
        func text(_ s: String) -> String { String(quoted(s).dropFirst().dropLast()) }
        return ["\(indent)# subject: \(text(c.subject))", "\(indent)# issuer: \(text(c.issuer))", "\(indent)# not after: \(c.notAfter.rfc3339)"]
    }

    static func spki(_ c: CertificateFacts) -> String {
        Fingerprint(bytes: c.spkiSHA256)?.pinText ?? "sha256/(missing SPKI hash)"
    }

    /// A YAML double-quoted scalar.
    static func quoted(_ s: String) -> String {
        var out = "\""
        for ch in s.unicodeScalars {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if ch.value < 0x20 { out += "\\x" + (ch.value < 16 ? "0" : "") + String(ch.value, radix: 16) } else { out.unicodeScalars.append(ch) }
            }
        }
        return out + "\""
    }
}
