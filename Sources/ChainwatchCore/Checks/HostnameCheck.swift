/// Check 3: the leaf names the host (SNI, else CONNECT host), per RFC 6125: DNS names against DNS subjectAltNames
/// (wildcard only as the whole left-most label, matching one label; no partial wildcards; no CN fallback),
/// IP literals against IP subjectAltNames only. Skipped when the rule says `hostname: false`.
public struct HostnameCheck: Check {
    public init() {}
    public var name: String { "hostname" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        guard rule.checkHostname else { return .passes }
        let host = evidence.hostChecked
        guard let leaf = evidence.leaf else {
            return .fails(.hostnameMismatch, level: .leaf, detail: "no leaf certificate to check \(host) against")
        }
        if Self.leaf(leaf, names: host) { return .passes }
        let names = (leaf.dnsNames + leaf.ipAddresses).joined(separator: ", ")
        return .fails(.hostnameMismatch, level: .leaf,
                      detail: "leaf names [\(names)], not \(HostName.normalize(host))")
    }

    /// Whether `leaf` is valid for `host` under RFC 6125.
    public static func leaf(_ leaf: CertificateFacts, names host: String) -> Bool {
        if let ip = HostName.ipAddressBytes(host) {
            return leaf.ipAddresses.contains { HostName.ipAddressBytes($0) == ip }
        }
        let h = HostName.normalize(host)
        return leaf.dnsNames.contains { matches(pattern: $0, host: h) }
    }

    /// RFC 6125 §6.4: `pattern` (a DNS SAN) against a normalized host name.
    public static func matches(pattern rawPattern: String, host: String) -> Bool {
        let pattern = HostName.normalize(rawPattern)
        guard !pattern.isEmpty, !host.isEmpty else { return false }
        if !pattern.contains("*") { return pattern == host }
        // Wildcard: exactly `*.` then at least two labels, no other `*`.
        guard pattern.hasPrefix("*."), !pattern.dropFirst().contains("*") else { return false }
        let parent = pattern.dropFirst(2)
        guard parent.split(separator: ".", omittingEmptySubsequences: false).count >= 2,
              !parent.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else { return false }
        guard host.hasSuffix("." + parent) else { return false }
        let first = host.dropLast(parent.utf8.count + 1)
        // A wildcard never matches an IDN A-label's punycode partially nor an empty label.
        return !first.isEmpty && !first.contains(".")
    }
}
