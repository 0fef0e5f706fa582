/// A loaded policy: the defaults plus the rules, immutable, shared by every loop as one snapshot.
/// Building one computes each rule's `identity` and an index of the rules' patterns, so the per-connection
/// `match` and `identity` cost a few dictionary lookups whatever the number of rules.
public struct Policy: Sendable, Hashable {
    /// Applied to every host that no rule matches.
    public var defaults: Rule { didSet { defaults = defaults.withIdentityCached() } }
    /// In file order; precedence is by specificity, not order (see `rule(for:port:)`).
    /// The work is done in the observer's own body: an assignment there does not call the observer again, while one
    /// made by a method it calls does, once per rule (a 200 000-rule policy overflowed the stack that way).
    public var rules: [Rule] {
        didSet {
            rules = Self.withIdentities(rules)
            index = MatchIndex(rules)
        }
    }
    /// Derived from `rules`; never part of equality or hashing.
    private var index = MatchIndex()

    public init(defaults: Rule = .builtInDefault, rules: [Rule] = []) {
        self.defaults = defaults.withIdentityCached()
        self.rules = Self.withIdentities(rules)
        index = MatchIndex(self.rules)
    }

    private static func withIdentities(_ rules: [Rule]) -> [Rule] {
        rules.map { $0.identityCache.value == nil ? $0.withIdentityCached() : $0 }
    }

    /// The policy chainwatch runs with when given no file: system trust, alert.
    public static let builtIn = Policy()

    /// The rule for `host` on `port`, and the pattern that selected it (nil: the defaults).
    /// Precedence: exact host+port > exact host > `*.` wildcard (+port first) > domain with subdomains, longest domain
    /// first; equal specificity → the earlier rule. Hosts are compared normalized (ASCII lowercase, no trailing dot).
    public func match(host: String, port: UInt16) -> (rule: Rule, pattern: HostPattern?) {
        let h = HostName.normalize(host)
        var best: (entry: MatchIndex.Entry, score: Int)? = nil
        func consider(_ entries: [MatchIndex.Entry]?) {
            guard let entries else { return }
            for e in entries where e.pattern.port == nil || e.pattern.port == port {
                let score = e.pattern.specificity
                if let b = best, score < b.score || (score == b.score && e.order > b.entry.order) { continue }
                best = (e, score)
            }
        }
        // The same tests as `HostPattern.matches`, turned into lookups: the host itself (exact, domain),
        // what follows its first label (wildcard), and every shorter suffix after a dot (domain).
        consider(index.exact[h[...]])
        if let dot = h.firstIndex(of: "."), dot != h.startIndex { consider(index.wildcard[h[h.index(after: dot)...]]) }
        var suffix = h[...]
        while true {
            consider(index.domain[suffix])
            guard let dot = suffix.firstIndex(of: ".") else { break }
            suffix = suffix[suffix.index(after: dot)...]
        }
        guard let best else { return (defaults, nil) }
        return (rules[best.entry.rule], best.entry.pattern)
    }

    /// The rule for `host` on `port` (the defaults when no rule matches).
    public func rule(for host: String, port: UInt16) -> Rule { match(host: host, port: port).rule }

    /// The host whose rule judges a tunnel to `connectHost` whose ClientHello named `serverName`: the CONNECT host,
    /// which `policy explain HOST:PORT` explains, so a client cannot pick a laxer rule by naming another host in its
    /// SNI (that is `sni_mismatch`, under the CONNECT host's rule). The SNI only when the CONNECT host is an address
    /// literal: a client that connects by address names its server in the SNI, and no rule names an address.
    public static func ruleHost(connectHost: String, serverName: String?) -> String {
        guard let serverName, HostName.ipAddressBytes(connectHost) != nil else { return connectHost }
        return serverName
    }
}

/// The rules' patterns by the host text they name. Derived data: all indexes compare equal and hash to nothing.
struct MatchIndex: Sendable, Hashable {
    struct Entry: Sendable {
        /// Index into `Policy.rules`.
        var rule: Int
        var pattern: HostPattern
        /// Position in file order (rule, then pattern within the rule): the tie-break at equal specificity.
        var order: Int
    }

    var exact: [Substring: [Entry]] = [:]
    /// By parent: `*.example.com` under `example.com`.
    var wildcard: [Substring: [Entry]] = [:]
    var domain: [Substring: [Entry]] = [:]

    init() {}

    init(_ rules: [Rule]) {
        var order = 0
        for (r, rule) in rules.enumerated() {
            for pattern in rule.patterns {
                let entry = Entry(rule: r, pattern: pattern, order: order)
                order += 1
                switch pattern.kind {
                case .exact(let h): exact[h[...], default: []].append(entry)
                case .wildcard(let parent): wildcard[parent[...], default: []].append(entry)
                case .domain(let d): domain[d[...], default: []].append(entry)
                }
            }
        }
    }

    static func == (_: MatchIndex, _: MatchIndex) -> Bool { true }
    func hash(into _: inout Hasher) {}
}
