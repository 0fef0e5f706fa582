import ChainwatchCore
import Foundation
import Yams

/// Turns a policy file's YAML into a `Policy`, collecting every problem with its exact line and column.
/// Keeps going after an error so that one `policy check` run reports them all.
///
/// About 530 lines, on purpose: it is the policy schema, one function per section, each key's checks beside their
/// error text; split across files, the schema would have no one place to read it.
struct PolicyParser {
    let file: String
    let directory: String
    let now: UnixTime
    let inspector: AnchorInspector
    private(set) var diagnostics: [Diagnostic] = []

    init(file: String, now: UnixTime, inspector: AnchorInspector) {
        self.file = file
        self.directory = (file as NSString).deletingLastPathComponent
        self.now = now
        self.inspector = inspector
    }

    static let topKeys = ["version", "defaults", "rules"]
    static let settingKeys = ["action", "anchors", "hostname", "profile", "on_probe_error", "non_tls",
                              "sni_mismatch", "local_root", "non_system_anchor", "https_only"]
    static let ruleKeys = ["name", "match"] + settingKeys + ["pins"]
    static let pinKeys = ["root", "intermediate", "leaf", "expires"]
    static let levelKeys = ["spki", "cert"]
    static let leafKeys = ["spki", "cert", "subject", "san"]
    static let profileKeys = ["base", "min_tls", "min_signature_hash", "min_rsa_bits", "min_ec_bits", "forward_secrecy"]

    // MARK: Reporting

    mutating func report(_ severity: Diagnostic.Severity, at node: Node?, _ message: String, hint: String? = nil) {
        report(severity, line: node?.mark?.line ?? 1, column: node?.mark?.column ?? 1, message, hint: hint)
    }

    mutating func report(_ severity: Diagnostic.Severity, line: Int, column: Int, _ message: String, hint: String? = nil) {
        diagnostics.append(Diagnostic(file: file, line: line, column: column, severity: severity, message: message, hint: hint))
    }

    func location(_ node: Node) -> PolicyLocation {
        PolicyLocation(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
    }

    // MARK: Document

    mutating func parse(yaml: String) -> Policy? {
        let root: Node?
        do {
            // UTF-8 named: the default would read the environment on every load to pick an encoding.
            root = try Yams.compose(yaml: yaml, .default, .default, .utf8)
        } catch let error as YamlError {
            reportYAML(error, yaml: yaml)
            return nil
        } catch {
            report(.error, line: 1, column: 1, "cannot read YAML: \(error)")
            return nil
        }
        guard let root, case .mapping(let top) = root else {
            report(.error, at: root, "a policy is a mapping with `defaults` and `rules`", hint: "start from policies/default.yaml")
            return nil
        }
        let pairs = checkedPairs(top, allowed: Self.topKeys, context: "the top level")
        if let version = pairs["version"], scalarText(version) != "1" {
            report(.error, at: version, "unknown policy version '\(scalarText(version) ?? "?")'", hint: "this chainwatch reads version 1")
        }
        var defaults = Rule.builtInDefault
        if let d = pairs["defaults"] {
            defaults = parseDefaults(d)
        } else {
            report(.warning, at: root, "no `defaults`: hosts that match no rule get the built-in default (system trust, alert)",
                   hint: "write it out so readers of this file see it: defaults: {action: alert, anchors: [system]}")
        }
        var rules: [Rule] = []
        if let r = pairs["rules"] {
            rules = parseRules(r, defaults: defaults)
        }
        return Policy(defaults: defaults, rules: rules)
    }

    mutating func reportYAML(_ error: YamlError, yaml: String) {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            var hint: String? = context.map { "\($0.text)" }
            let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
            let line = mark.line - 1 < lines.count && mark.line >= 1 ? lines[mark.line - 1] : ""
            if problem.contains("alias") || line.contains("*.") && !line.contains("\"*.") && !line.contains("'*.") {
                hint = "quote patterns that start with *: \"*.example.com\" (a bare * starts a YAML alias)"
            } else if problem.contains("tab") {
                hint = "indent with spaces, not tabs"
            }
            report(.error, line: mark.line, column: mark.column, "YAML: \(problem)", hint: hint)
        case .reader(let problem, _, _, _):
            report(.error, line: 1, column: 1, "YAML: \(problem)", hint: "the file must be UTF-8 text")
        case .duplicatedKeysInMapping(let duplicates, let context):
            // Yams names the mapping (its first key's place); the line is the duplicate's own: the second key of
            // that name at the mapping's indentation, from there on.
            let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
            for key in duplicates.sorted() {
                var seen = 0
                var place = (line: context.mark.line, column: context.mark.column)
                for index in max(0, context.mark.line - 1)..<lines.count {
                    let text = lines[index]
                    let indent = text.prefix { $0 == " " }.count
                    if index > context.mark.line - 1, indent < context.mark.column - 1,
                       !text.allSatisfy({ $0 == " " || $0 == "\r" }), !text.dropFirst(indent).hasPrefix("#") { break }
                    // The mapping's first line from its mark (it may follow a list's "- "); later lines at its indentation.
                    let rest = text.dropFirst(context.mark.column - 1)
                    guard index == context.mark.line - 1 || indent == context.mark.column - 1,
                          rest.hasPrefix("\(key):") || rest.hasPrefix("\"\(key)\":") || rest.hasPrefix("'\(key)':") else { continue }
                    seen += 1
                    if seen == 2 { place = (index + 1, context.mark.column); break }
                }
                report(.error, line: place.line, column: place.column, "duplicate key '\(key)' in one mapping",
                       hint: "give each key once: of two values only one would count")
            }
        default:
            report(.error, line: 1, column: 1, "YAML: \(error)")
        }
    }

    /// The mapping's pairs by key, reporting unknown keys (with a did-you-mean), duplicate and non-scalar keys.
    mutating func checkedPairs(_ mapping: Node.Mapping, allowed: [String], context: String,
                               misplaced: [String: String] = [:]) -> [String: Node] {
        var out: [String: Node] = [:]
        var keyNodes: [String: Node] = [:]
        for (keyNode, value) in mapping {
            guard let key = scalarText(keyNode) else {
                report(.error, at: keyNode, "keys must be plain words"); continue
            }
            if let why = misplaced[key] {
                report(.error, at: keyNode, "`\(key)` is not allowed in \(context)", hint: why); continue
            }
            guard allowed.contains(key) else {
                report(.error, at: keyNode, "unknown key '\(key)' in \(context)", hint: DidYouMean.hint(for: key, among: allowed))
                continue
            }
            if let first = keyNodes[key] {
                report(.error, at: keyNode, "duplicate key '\(key)' (first at line \(first.mark?.line ?? 0))",
                       hint: "YAML keeps only one; merge them")
                continue
            }
            keyNodes[key] = keyNode
            out[key] = value
        }
        return out
    }

    func scalarText(_ node: Node?) -> String? {
        guard case .scalar(let s)? = node else { return nil }
        return s.string
    }

    mutating func expectScalar(_ node: Node, what: String) -> String? {
        guard case .scalar(let s) = node else {
            report(.error, at: node, "\(what) must be a single value, not a \(node.kindName)")
            return nil
        }
        return s.string
    }

    /// A scalar or a list of scalars, as (text, node) pairs.
    mutating func scalarList(_ node: Node, what: String) -> [(String, Node)] {
        switch node {
        case .scalar(let s): return s.string.isEmpty && s.style == .plain ? [] : [(s.string, node)]
        case .sequence(let seq):
            var out: [(String, Node)] = []
            for item in seq {
                if let t = expectScalar(item, what: "each entry of \(what)") { out.append((t, item)) }
            }
            return out
        default:
            report(.error, at: node, "\(what) must be a value or a list, not a mapping")
            return []
        }
    }

    mutating func parseBool(_ node: Node, key: String) -> Bool? {
        guard let t = expectScalar(node, what: "`\(key)`") else { return nil }
        switch t.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            report(.error, at: node, "`\(key)` must be true or false, not '\(t)'")
            return nil
        }
    }

    mutating func parseAction(_ node: Node) -> Action? {
        guard let t = expectScalar(node, what: "`action`") else { return nil }
        if let a = Action(rawValue: t) { return a }
        report(.error, at: node, "unknown action '\(t)'", hint: DidYouMean.hint(for: t, among: ["block", "alert"]))
        return nil
    }

    mutating func parseDisposition(_ node: Node, key: String) -> Disposition? {
        guard let t = expectScalar(node, what: "`\(key)`") else { return nil }
        if let d = Disposition(rawValue: t) { return d }
        report(.error, at: node, "unknown value '\(t)' for `\(key)`", hint: DidYouMean.hint(for: t, among: Disposition.allCases.map(\.rawValue)))
        return nil
    }

    // MARK: Defaults and rules

    mutating func parseDefaults(_ node: Node) -> Rule {
        var rule = Rule.builtInDefault
        rule.location = location(node)
        guard case .mapping(let m) = node else {
            report(.error, at: node, "`defaults` must be a mapping of settings", hint: "e.g. defaults: {action: alert, anchors: [system]}")
            return rule
        }
        let why = "it belongs in a rule under `rules:`; `defaults` applies to hosts that match no rule"
        let pairs = checkedPairs(m, allowed: Self.settingKeys, context: "`defaults`",
                                 misplaced: ["pins": why, "match": why, "name": why])
        applySettings(pairs, to: &rule)
        return rule
    }

    mutating func parseRules(_ node: Node, defaults: Rule) -> [Rule] {
        guard case .sequence(let seq) = node else {
            if case .scalar(let s) = node, s.string.isEmpty { return [] }
            report(.error, at: node, "`rules` must be a list (each rule starts with `- name:`)")
            return []
        }
        var rules: [Rule] = []
        var names: [String: Int] = [:]
        var claimed: [HostPattern: (rule: String, line: Int)] = [:]
        for item in seq {
            guard case .mapping(let m) = item else {
                report(.error, at: item, "each rule must be a mapping with `name`, `match` and settings"); continue
            }
            let pairs = checkedPairs(m, allowed: Self.ruleKeys, context: "a rule")
            var rule = defaults
            rule.location = location(item)
            rule.pins = nil
            if let n = pairs["name"], let name = expectScalar(n, what: "`name`"), !name.isEmpty {
                if let line = names[name] {
                    report(.error, at: n, "duplicate rule name '\(name)' (first at line \(line))", hint: "rule names identify rules in logs and caches; make them unique")
                }
                names[name] = n.mark?.line ?? 0
                rule.name = name
            } else {
                report(.error, at: pairs["name"] ?? item, "rule without a `name`", hint: "add `name: something-short`; it appears in every alert")
                rule.name = "rule@\(item.mark?.line ?? 0)"
            }
            if let matchNode = pairs["match"] {
                rule.patterns = parseMatch(matchNode, ruleName: rule.name, claimed: &claimed)
            } else {
                report(.error, at: item, "rule '\(rule.name)' has no `match`", hint: "match: [api.example.com, \"*.example.com\", .example.org]")
            }
            applySettings(pairs, to: &rule)
            if let pinsNode = pairs["pins"] { rule.pins = parsePins(pinsNode, rule: rule) }
            lintRule(rule, pairs: pairs, node: item)
            rules.append(rule)
        }
        return rules
    }

    mutating func parseMatch(_ node: Node, ruleName: String, claimed: inout [HostPattern: (rule: String, line: Int)]) -> [HostPattern] {
        let entries = scalarList(node, what: "`match`")
        if entries.isEmpty { report(.error, at: node, "empty `match`: the rule would apply to no host") }
        var out: [HostPattern] = []
        for (text, n) in entries {
            do {
                let p = try HostPattern(parsing: text)
                if let earlier = claimed[p] {
                    let whose = earlier.rule == ruleName ? "this rule already lists it" : "rule '\(earlier.rule)' (line \(earlier.line)) matches it first"
                    report(.error, at: n, "'\(p)' is shadowed: \(whose), so this entry never applies",
                           hint: "remove it, or merge the two rules")
                } else {
                    claimed[p] = (ruleName, n.mark?.line ?? 0)
                }
                out.append(p)
            } catch {
                let (message, hint) = Self.explain(error, text: text)
                report(.error, at: n, message, hint: hint)
            }
        }
        return out
    }

    static func explain(_ error: HostPattern.ParseError, text: String) -> (String, String?) {
        if let scheme = text.range(of: "://") {   // a URL where a host is wanted: `bad port '//x'` said nothing useful
            let host = text[scheme.upperBound...].prefix { $0 != "/" }
            return ("'\(text)' is a URL, not a host pattern", "the host alone: \(host.isEmpty ? "api.example.com" : String(host))")
        }
        switch error {
        case .empty: return ("empty host pattern", nil)
        case .nonASCII: return ("'\(text)' is not ASCII", "write internationalized names as A-labels (xn--…), as SNI and certificates carry them")
        case .badPort(let p): return ("bad port '\(p)' in '\(text)'", "a port is 1–65535: api.example.com:8443")
        case .misplacedWildcard: return ("'\(text)': a wildcard may only be the whole left-most label", "\"*.example.com\" (one label), or .example.com for the domain and all its subdomains")
        case .badLabel(let l): return ("'\(text)': '\(l)' is not a valid host name label", "letters, digits and hyphens; no empty labels")
        case .tooBroad: return ("'\(text)' would match a whole top-level domain", "use at least \"*.example.com\"")
        }
    }

    mutating func applySettings(_ pairs: [String: Node], to rule: inout Rule) {
        if let n = pairs["action"], let a = parseAction(n) { rule.action = a }
        if let n = pairs["anchors"], let a = parseAnchors(n) { rule.anchors = a }
        if let n = pairs["hostname"], let b = parseBool(n, key: "hostname") { rule.checkHostname = b }
        if let n = pairs["profile"] { rule.profile = parseProfile(n) }
        if let n = pairs["on_probe_error"], let d = parseDisposition(n, key: "on_probe_error") { rule.onProbeError = d }
        if let n = pairs["non_tls"], let d = parseDisposition(n, key: "non_tls") { rule.nonTLS = d }
        if let n = pairs["sni_mismatch"], let d = parseDisposition(n, key: "sni_mismatch") { rule.sniMismatch = d }
        if let n = pairs["non_system_anchor"] {
            // The key before anchor kinds: it also reported the operator's own anchors (every `--ca` tunnel).
            report(.warning, at: n, "'non_system_anchor' is now 'local_root': it is read as that, and applies only to roots added to the OS trust store; anchors you name (--ca, a rule's anchors) are trusted quietly",
                   hint: "rename the key to local_root")
            if pairs["local_root"] == nil, let d = parseDisposition(n, key: "non_system_anchor") { rule.localRoot = d }
        }
        if let n = pairs["local_root"], let d = parseDisposition(n, key: "local_root") { rule.localRoot = d }
        if let n = pairs["https_only"], let b = parseBool(n, key: "https_only") { rule.httpsOnly = b }
    }

    /// Warnings about a rule that loads but may protect less than its author thinks.
    mutating func lintRule(_ rule: Rule, pairs: [String: Node], node: Node) {
        if rule.action == .block, rule.onProbeError != .block {
            let inherited = pairs["on_probe_error"] == nil ? " (inherited from defaults)" : ""
            report(.warning, at: pairs["on_probe_error"] ?? node,
                   "blocking rule '\(rule.name)' has on_probe_error: \(rule.onProbeError.rawValue)\(inherited): when the TLS 1.3 probe fails, its hosts are let through unchecked (fails open)",
                   hint: "remove on_probe_error (a blocking rule then blocks on a failed probe) or write on_probe_error: block")
        }
        if !rule.checkHostname, rule.anchors.system, rule.pins == nil || rule.pins!.isExpired(at: now) {
            report(.warning, at: pairs["hostname"] ?? node,
                   "rule '\(rule.name)' turns the hostname check off and trusts the system roots without pins: any publicly trusted certificate for any name passes",
                   hint: "keep hostname: true, or pin the server (pins:) or its own CA (anchors: [ca.pem])")
        }
    }

    // MARK: Anchors

    mutating func parseAnchors(_ node: Node) -> Anchors? {
        let entries = scalarList(node, what: "`anchors`")
        guard !entries.isEmpty else {
            report(.error, at: node, "empty `anchors`: no chain could ever validate", hint: "anchors: [system], a PEM file, or both")
            return nil
        }
        var anchors = Anchors(system: false)
        for (text, n) in entries {
            if text == "system" {
                anchors.system = true
            } else if text.contains("-----BEGIN") {
                anchors.certificates += loadPEM(text, origin: "inline PEM (line \(n.mark?.line ?? 0))", node: n)
            } else {
                let path = text.hasPrefix("/") ? text : (directory.isEmpty ? text : directory + "/" + text)
                guard let data = FileManager.default.contents(atPath: path), let pem = String(data: data, encoding: .utf8) else {
                    var hint = "PEM paths are relative to the policy file's directory (looked for \(URL(fileURLWithPath: path).standardizedFileURL.path))"
                    if let s = DidYouMean.suggestion(for: text, among: ["system"]) { hint = "did you mean '\(s)'?" }
                    report(.error, at: n, "cannot read anchor file '\(text)'", hint: hint)
                    continue
                }
                anchors.certificates += loadPEM(pem, origin: text, node: n)
            }
        }
        return anchors
    }

    mutating func loadPEM(_ pem: String, origin: String, node: Node) -> [Anchors.CACertificate] {
        switch PEM.certificates(in: pem) {
        case .failure(.noCertificate):
            report(.error, at: node, "\(origin): no PEM certificate in it", hint: "expected -----BEGIN CERTIFICATE----- blocks")
            return []
        case .failure(.badBase64(let i)):
            report(.error, at: node, "\(origin): certificate \(i) is not valid base64", hint: "re-export it with `openssl x509 -outform PEM`")
            return []
        case .failure(.unterminated(let i)):
            report(.error, at: node, "\(origin): certificate \(i) has no -----END CERTIFICATE----- line")
            return []
        case .success(let ders):
            var out: [Anchors.CACertificate] = []
            for (i, der) in ders.enumerated() {
                let which = ders.count > 1 ? "\(origin) (certificate \(i + 1))" : origin
                switch inspector.inspect(der) {
                case .ca:
                    out.append(.init(der: der, origin: which))
                case .notCA:
                    report(.error, at: node, "\(which) is not a CA certificate (basicConstraints CA:FALSE or absent)",
                           hint: "an anchor must be a CA; to trust one server's own certificate, pin it instead: pins: {leaf: {cert: [...]}}")
                case .unusable(let why):
                    report(.error, at: node, "\(which): \(why)")
                }
            }
            return out
        }
    }

    // MARK: Profile

    mutating func parseProfile(_ node: Node) -> ProtocolProfile? {
        if case .scalar(let s) = node {
            if s.string == "ats" { return .ats }
            if s.string == "none" { return nil }
            report(.error, at: node, "unknown profile '\(s.string)'", hint: DidYouMean.hint(for: s.string, among: ["ats", "none"]) + " — or a mapping: {min_tls: \"1.2\"}")
            return nil
        }
        guard case .mapping(let m) = node else {
            report(.error, at: node, "`profile` must be `ats` or a mapping like {min_tls: \"1.2\"}"); return nil
        }
        let pairs = checkedPairs(m, allowed: Self.profileKeys, context: "`profile`")
        var p = ProtocolProfile(name: "custom")
        if let b = pairs["base"], let t = expectScalar(b, what: "`base`") {
            if t == "ats" { p = .ats; p.name = "ats+custom" } else { report(.error, at: b, "unknown base profile '\(t)'", hint: "only `ats`") }
        }
        if let n = pairs["min_tls"], let t = expectScalar(n, what: "`min_tls`") {
            if let v = TLSVersion(policyText: t) { p.minVersion = v } else {
                report(.error, at: n, "unknown TLS version '\(t)'", hint: "one of \"1.0\", \"1.1\", \"1.2\", \"1.3\" (quote it)")
            }
        }
        if let n = pairs["min_signature_hash"], let t = expectScalar(n, what: "`min_signature_hash`") {
            if let bits = ProtocolProfile.digestBits(t), !t.isEmpty, bits >= 160 { p.minSignatureHashBits = bits } else if ProtocolProfile.digestBits(t) != nil, !t.isEmpty {
                report(.error, at: n, "'\(t)' is broken and cannot be a minimum", hint: "sha256, sha384 or sha512 (sha1 at the lowest)")
            } else {
                report(.error, at: n, "unknown hash '\(t)'", hint: "sha256, sha384 or sha512")
            }
        }
        for (key, path) in [("min_rsa_bits", \ProtocolProfile.minRSABits), ("min_ec_bits", \ProtocolProfile.minECBits)] {
            if let n = pairs[key], let t = expectScalar(n, what: "`\(key)`") {
                if let bits = Int(t), bits > 0, bits <= 16_384 { p[keyPath: path] = bits } else {
                    report(.error, at: n, "`\(key)` must be a number of bits, not '\(t)'")
                }
            }
        }
        if let n = pairs["forward_secrecy"], let b = parseBool(n, key: "forward_secrecy") { p.requireForwardSecrecy = b }
        return p
    }

    // MARK: Pins

    mutating func parsePins(_ node: Node, rule: Rule) -> PinSet? {
        guard case .mapping(let m) = node else {
            report(.error, at: node, "`pins` must be a mapping with root / intermediate / leaf", hint: "pins: {root: {spki: [sha256/…]}}")
            return nil
        }
        let pairs = checkedPairs(m, allowed: Self.pinKeys, context: "`pins`")
        var set = PinSet()
        var levelNodes: [(String, Node, LevelPins?)] = []
        if let n = pairs["root"] { set.root = parseLevel(n, name: "root", keys: Self.levelKeys).pins; levelNodes.append(("root", n, set.root)) }
        if let n = pairs["intermediate"] {
            set.intermediate = parseLevel(n, name: "intermediate", keys: Self.levelKeys).pins
            levelNodes.append(("intermediate", n, set.intermediate))
        }
        if let n = pairs["leaf"] {
            let parsed = parseLevel(n, name: "leaf", keys: Self.leafKeys)
            set.leaf = parsed.pins; set.leafSubjects = parsed.subjects
            levelNodes.append(("leaf", n, set.leaf))
        }
        if let n = pairs["expires"], let t = expectScalar(n, what: "`expires`") {
            if let when = Self.parseDate(t) {
                set.expires = when
                if now >= when {
                    report(.warning, at: n, "pin set of rule '\(rule.name)' expired on \(t): it is reported as pin_expired and no longer enforced",
                           hint: "check the server's current chain (chainwatch pin), update the pins and move `expires` forward")
                } else if when.seconds - now.seconds < 30 * 86_400 {
                    report(.warning, at: n, "pin set of rule '\(rule.name)' expires on \(t), in \((when.seconds - now.seconds) / 86_400) days",
                           hint: "after that it is reported, not enforced; renew the pins before then")
                }
            } else {
                report(.error, at: n, "bad date '\(t)'", hint: "YYYY-MM-DD (midnight UTC) or YYYY-MM-DDTHH:MM:SSZ")
            }
        }
        if set.isEmpty {
            if levelNodes.isEmpty {
                report(.error, at: node, "empty pin set: `pins` names no root, intermediate or leaf pin",
                       hint: "add pins (chainwatch pin HOST:PORT writes them) or remove `pins`")
            }
            return nil
        }
        if rule.action == .block {
            for (name, n, level) in levelNodes {
                guard let level, level.count == 1 else { continue }
                report(.warning, at: n, "no backup pin: the \(name) pin set of blocking rule '\(rule.name)' has a single pin",
                       hint: "add a second pin (the next key, or another \(name) your CA rotates through) so a rotation does not cut the service off")
            }
        }
        return set
    }

    mutating func parseLevel(_ node: Node, name: String, keys: [String]) -> (pins: LevelPins?, subjects: [SubjectPattern]) {
        guard case .mapping(let m) = node else {
            report(.error, at: node, "`\(name)` pins must be a mapping", hint: "\(name): {spki: [sha256/…], cert: [AB:CD:…]}")
            return (nil, [])
        }
        let pairs = checkedPairs(m, allowed: keys, context: "`\(name)` pins")
        var level = LevelPins()
        var subjects: [SubjectPattern] = []
        var written = 0
        for key in ["spki", "cert"] {
            guard let n = pairs[key] else { continue }
            for (text, item) in scalarList(n, what: "`\(key)`") {
                written += 1
                do {
                    let fp = try Fingerprint(parsing: text)
                    // The same digest twice (or in base64 and in hex) is one pin: counted once, so a set of it is
                    // still warned about as having no backup.
                    guard !(key == "spki" ? level.spki : level.certificates).contains(fp) else {
                        report(.warning, at: item, "duplicate pin: '\(text)' is a \(key) pin of `\(name)` already listed",
                               hint: "remove it; a backup pin is another key or certificate")
                        continue
                    }
                    if key == "spki" { level.spki.append(fp) } else { level.certificates.append(fp) }
                } catch {
                    let (message, hint) = Self.explain(error, text: text)
                    report(.error, at: item, message, hint: hint)
                }
            }
        }
        if let n = pairs["subject"] {
            for (text, _) in scalarList(n, what: "`subject`") { written += 1; subjects.append(.distinguishedName(text)) }
        }
        if let n = pairs["san"] {
            for (text, item) in scalarList(n, what: "`san`") {
                written += 1
                if (try? HostPattern(parsing: text)).map({ if case .domain = $0.kind { return false } else { return $0.port == nil } }) ?? false {
                    subjects.append(.name(text))
                } else {
                    report(.error, at: item, "'\(text)' is not a host name or \"*.\" pattern", hint: "san: [api.example.com, \"*.example.com\"]")
                }
            }
        }
        if written == 0 {
            report(.error, at: node, "empty pin set: `\(name)` has no pin", hint: "list at least two (one plus a backup), or remove `\(name)`")
        }
        return (level.isEmpty ? nil : level, subjects)
    }

    static func explain(_ error: Fingerprint.ParseError, text: String) -> (String, String) {
        switch error {
        case .wrongLength(let n):
            let sha1 = n == 20 ? " (that is a SHA-1 fingerprint)" : ""
            return ("fingerprint '\(text)' is \(n) bytes; SHA-256 has 32\(sha1)",
                    "openssl x509 -noout -fingerprint -sha256, or let `chainwatch pin` write it")
        case .badBase64:
            return ("fingerprint '\(text)' is not valid base64 after sha256/", "sha256/ followed by 44 base64 characters ending in =")
        case .badHex:
            return ("fingerprint '\(text)' is not hex", "64 hex digits, optionally as AB:CD:… pairs")
        case .unknownForm:
            return ("fingerprint '\(text)' is in no known form", "sha256/BASE64= (HPKP style) or 64 hex digits; base64 needs the sha256/ prefix")
        }
    }

    /// `YYYY-MM-DD` (midnight UTC) or `YYYY-MM-DDTHH:MM:SSZ`.
    static func parseDate(_ text: String) -> UnixTime? {
        let t = Array(text.utf8)
        func num(_ r: Range<Int>) -> Int64? {
            guard r.upperBound <= t.count, r.allSatisfy({ t[$0] >= 48 && t[$0] <= 57 }) else { return nil }
            return r.reduce(Int64(0)) { $0 * 10 + Int64(t[$1] - 48) }
        }
        guard t.count == 10 || t.count == 20, t[4] == UInt8(ascii: "-"), t[7] == UInt8(ascii: "-"),
              let y = num(0..<4), let m = num(5..<7), let d = num(8..<10), (1...12).contains(m), (1...31).contains(d) else { return nil }
        var seconds: Int64 = 0
        if t.count == 20 {
            guard t[10] == UInt8(ascii: "T") || t[10] == UInt8(ascii: " "), t[13] == UInt8(ascii: ":"), t[16] == UInt8(ascii: ":"),
                  t[19] == UInt8(ascii: "Z"), let hh = num(11..<13), let mm = num(14..<16), let ss = num(17..<19),
                  hh < 24, mm < 60, ss < 61 else { return nil }
            seconds = hh * 3600 + mm * 60 + ss
        }
        // Days from civil (Howard Hinnant).
        let yy = m <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let result = UnixTime(seconds: days * 86_400 + seconds)
        // Reject dates like 02-31 that roll over.
        return result.rfc3339.hasPrefix(String(text.prefix(10))) ? result : nil
    }
}

extension Node {
    var kindName: String {
        switch self {
        case .scalar: return "value"
        case .mapping: return "mapping"
        case .sequence: return "list"
        case .alias: return "alias"
        }
    }
}
