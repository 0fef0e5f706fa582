// Fuzzes the policy loader: YAML text through Yams into a Policy, as `run`, SIGHUP reload and `policy check` read it.
//
// Input: the policy text (bytes that are not UTF-8 become U+FFFD). Anchor files it names are looked for beside a
// policy path that does not exist; inline PEM anchors are read. Texts that could name a device or a kernel file
// (`dev`, `proc`, or a backslash, which YAML escapes could spell them with) are skipped: reading /dev/zero as an
// anchor never ends, and the operator who writes the policy can name any file anyway.
// Invariants: a load either returns a policy whose diagnostics are all warnings, or fails with at least one error;
// every diagnostic has a line and column from 1, in file order; for a loaded policy, the rule index picks, for every
// host its patterns name, the rule a plain scan of every pattern (most specific, earliest) picks.
import ChainwatchCore
import ChainwatchPolicyFile
import FuzzSupport

let path = "/nonexistent/chainwatch-fuzz/policy.yaml"
let now = UnixTime(seconds: 1_800_000_000)

func checkDiagnostics(_ diagnostics: [Diagnostic]) {
    for d in diagnostics {
        check(d.line >= 1 && d.column >= 1, "diagnostic at \(d.line):\(d.column): \(d)")
        check(d.file == path, "diagnostic names \(d.file)")
    }
    check(zip(diagnostics, diagnostics.dropFirst()).allSatisfy { ($0.line, $0.column) <= ($1.line, $1.column) }, "diagnostics out of order")
}

/// The rule a linear scan picks: the most specific matching pattern, the earliest at equal specificity.
func scan(_ policy: Policy, host: String, port: UInt16) -> (rule: Int, pattern: HostPattern)? {
    var best: (rule: Int, pattern: HostPattern)?
    for (r, rule) in policy.rules.enumerated() {
        for pattern in rule.patterns where pattern.matches(host: host, port: port) {
            if let b = best, pattern.specificity <= b.pattern.specificity { continue }
            best = (r, pattern)
        }
    }
    return best
}

/// Hosts a pattern names, and some just inside and outside it.
func probes(_ pattern: HostPattern) -> [String] {
    switch pattern.kind {
    case .exact(let h): return [h, "x." + h]
    case .wildcard(let parent): return [parent, "x." + parent, "x.y." + parent]
    case .domain(let d): return [d, "x." + d, "x" + d]
    }
}

func checkMatching(_ policy: Policy) {
    for rule in policy.rules.prefix(8) {
        for pattern in rule.patterns.prefix(4) {
            for host in probes(pattern) {
                for port in Set([443, pattern.port ?? 443]) {
                    let indexed = policy.match(host: host, port: port)
                    let scanned = scan(policy, host: host, port: port)
                    check(indexed.pattern == scanned?.pattern, "\(host):\(port): index picks \(String(describing: indexed.pattern)), scan \(String(describing: scanned?.pattern))")
                    if let scanned { check(indexed.rule == policy.rules[scanned.rule], "\(host):\(port): index and scan pick other rules") }
                    else { check(indexed.rule == policy.defaults, "\(host):\(port): no pattern matches but not the defaults") }
                }
            }
        }
    }
    if let host = policy.rules.first?.patterns.first.map(probes)?.first {
        check(!Explainer.explain(policy, host: host).isEmpty, "empty explanation")
    }
}

/// Whether `bytes` hold `word` (ASCII) anywhere.
func contains<C: Collection<UInt8>>(_ bytes: C, _ word: String) -> Bool {
    let w = Array(word.utf8)
    let b = Array(bytes)
    guard b.count >= w.count else { return false }
    return (0...(b.count - w.count)).contains { i in b[i..<(i + w.count)].elementsEqual(w) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicyLoader(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = FuzzInput(start, count).rest
    // Searched in the bytes: String.contains goes through Foundation here, a twentieth of the executions' time.
    if contains(bytes, "dev") || contains(bytes, "proc") || bytes.contains(UInt8(ascii: "\\")) { return -1 }
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        let (policy, warnings) = try PolicyLoader.load(yaml: text, path: path, now: now)
        check(warnings.allSatisfy { $0.severity == .warning }, "loaded with an error: \(warnings)")
        checkDiagnostics(warnings)
        checkMatching(policy)
    } catch {
        check(error.diagnostics.contains { $0.severity == .error }, "refused without an error: \(error.diagnostics)")
        checkDiagnostics(error.diagnostics)
    }
    return 0
}
