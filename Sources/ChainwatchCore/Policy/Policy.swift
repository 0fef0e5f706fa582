/// A loaded policy: the defaults plus the rules, immutable, shared by every loop as one snapshot.
public struct Policy: Sendable, Hashable {
    /// Applied to every host that no rule matches.
    public var defaults: Rule
    /// In file order; precedence is by specificity, not order (see `rule(for:port:)`).
    public var rules: [Rule]

    public init(defaults: Rule = .builtInDefault, rules: [Rule] = []) {
        self.defaults = defaults; self.rules = rules
    }

    /// The policy chainwatch runs with when given no file: system trust, alert.
    public static let builtIn = Policy()

    /// The rule for `host` on `port`, and the pattern that selected it (nil: the defaults).
    /// Precedence: exact host+port > exact host > `*.` wildcard (+port first) > domain with subdomains, longest domain
    /// first; equal specificity → the earlier rule. Hosts are compared normalized (ASCII lowercase, no trailing dot).
    public func match(host: String, port: UInt16) -> (rule: Rule, pattern: HostPattern?) {
        let h = HostName.normalize(host)
        var best: (rule: Rule, pattern: HostPattern, score: Int)? = nil
        for rule in rules {
            for pattern in rule.patterns where pattern.matches(host: h, port: port) {
                let score = pattern.specificity
                if best == nil || score > best!.score { best = (rule, pattern, score) }
            }
        }
        guard let best else { return (defaults, nil) }
        return (best.rule, best.pattern)
    }

    /// The rule for `host` on `port` (the defaults when no rule matches).
    public func rule(for host: String, port: UInt16) -> Rule { match(host: host, port: port).rule }
}
