/// Where something was written in a policy file (named apart from Testing.SourceLocation) (1-based line and column).
public struct PolicyLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public init(file: String, line: Int, column: Int) { self.file = file; self.line = line; self.column = column }
    public var description: String { "\(file):\(line):\(column)" }
}

/// What a rule is, for caches: its name plus a fingerprint of its content. Two loads of an unchanged rule
/// give equal identities (the fingerprint is deterministic, not `Hasher`-seeded); any change gives a new one.
public struct RuleIdentity: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var contentHash: UInt64
    public init(name: String, contentHash: UInt64) { self.name = name; self.contentHash = contentHash }
    public var description: String {
        let hex = String(contentHash, radix: 16)
        return "\(name)#\(String(repeating: "0", count: 16 - hex.count))\(hex)"
    }
}

/// One policy rule: which hosts it covers and everything chainwatch checks and does for them. Immutable value.
public struct Rule: Sendable, Hashable {
    /// Unique within a policy; `defaults` for the rule applied to hosts no rule matches.
    public var name: String { didSet { identityCache.value = nil } }
    /// Empty for the defaults rule.
    public var patterns: [HostPattern] { didSet { identityCache.value = nil } }
    /// What a failed chain check does.
    public var action: Action { didSet { identityCache.value = nil } }
    public var anchors: Anchors { didSet { identityCache.value = nil } }
    /// Whether the leaf must name the host (RFC 6125).
    public var checkHostname: Bool { didSet { identityCache.value = nil } }
    public var pins: PinSet? { didSet { identityCache.value = nil } }
    /// nil: no protocol floor.
    public var profile: ProtocolProfile? { didSet { identityCache.value = nil } }
    /// `on_probe_error` as written (in the rule or inherited from `defaults`); nil when nobody set it, and then
    /// `onProbeError` follows `action`.
    public var onProbeErrorSetting: Disposition? { didSet { identityCache.value = nil } }
    /// When a needed probe (TLS 1.3, resumption) cannot get the chain: the setting when written, else `block` for a
    /// blocking rule (no verdict is a bad verdict: fail closed) and `alert` for an alerting one. Setting it writes
    /// `onProbeErrorSetting`.
    public var onProbeError: Disposition {
        get { onProbeErrorSetting ?? (action == .block ? .block : .alert) }
        set { onProbeErrorSetting = newValue }
    }
    /// When the tunnel's bytes are not TLS.
    public var nonTLS: Disposition { didSet { identityCache.value = nil } }
    /// When the ClientHello's SNI and the CONNECT host disagree.
    public var sniMismatch: Disposition { didSet { identityCache.value = nil } }
    /// When a host without pins validates only through a root added to the OS trust store (`local_root`).
    public var localRoot: Disposition { didSet { identityCache.value = nil } }
    /// Plain HTTP (absolute-form `GET http://…`) to this host gets `action` with reason `https_only`.
    public var httpsOnly: Bool { didSet { identityCache.value = nil } }
    /// Where the rule was written; nil for the built-in default. Not part of the identity.
    public var location: PolicyLocation?
    /// `identity` once computed (by `Policy`, which computes it for every rule it holds); any change to the rule's
    /// content empties it. Never part of equality, hashing or the identity itself.
    var identityCache = IdentityCache()

    public init(name: String, patterns: [HostPattern] = [], action: Action = .alert, anchors: Anchors = .systemOnly,
                checkHostname: Bool = true, pins: PinSet? = nil, profile: ProtocolProfile? = nil,
                onProbeError: Disposition? = nil, nonTLS: Disposition = .alert, sniMismatch: Disposition = .alert,
                localRoot: Disposition = .alert, httpsOnly: Bool = false, location: PolicyLocation? = nil) {
        self.name = name; self.patterns = patterns; self.action = action; self.anchors = anchors
        self.checkHostname = checkHostname; self.pins = pins; self.profile = profile
        self.onProbeErrorSetting = onProbeError; self.nonTLS = nonTLS; self.sniMismatch = sniMismatch
        self.localRoot = localRoot; self.httpsOnly = httpsOnly; self.location = location
    }

    /// The built-in default: system trust, hostname checked, everything alerts, nothing blocks (`on_probe_error`
    /// unset, so it follows `action`: a file's `defaults: {action: block}` blocks on probe failures too).
    public static let builtInDefault = Rule(name: "defaults").withIdentityCached()

    /// Stable identity for verdict caches: name + FNV-1a 64 of the rule's content (location excluded).
    /// Free for rules taken from a `Policy` (computed when the policy was built); computed on each call otherwise.
    public var identity: RuleIdentity { identityCache.value ?? computeIdentity() }

    func computeIdentity() -> RuleIdentity {
        var rule = self
        rule.location = nil
        rule.identityCache = IdentityCache()
        var hash = FNV1a64()
        hash.add(String(describing: rule))
        return RuleIdentity(name: name, contentHash: hash.value)
    }

    /// This rule with its identity computed and kept, so `identity` costs nothing afterwards.
    func withIdentityCached() -> Rule {
        guard identityCache.value == nil else { return self }
        var rule = self
        rule.identityCache = IdentityCache(value: computeIdentity())
        return rule
    }

    /// What a finding with `reason` leads to under this rule; nil when the rule allows it silently.
    public func consequence(of reason: Reason) -> Action? {
        switch reason {
        case .pinExpired: return .alert
        case .localRoot: return localRoot.action
        case .sniMismatch: return sniMismatch.action
        case .notTLS: return nonTLS.action
        case .probeFailed: return onProbeError.action
        // Raised only while the server's bytes are held, and what is held is the chain still on its way: letting it
        // through unjudged would hand a forger who waits out the deadline a pass. Closing is the one safe end.
        case .handshakeTimeout: return .block
        default: return action
        }
    }
}

/// A rule's computed identity, stored beside its content. Derived data: all caches compare equal and hash to
/// nothing, so a rule with its identity computed equals the same rule without.
struct IdentityCache: Sendable, Hashable {
    var value: RuleIdentity?
    static func == (_: IdentityCache, _: IdentityCache) -> Bool { true }
    func hash(into _: inout Hasher) {}
}

/// 64-bit FNV-1a, deterministic across processes (unlike `Hasher`).
struct FNV1a64 {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325
    mutating func add(_ text: String) {
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01B3
        }
    }
}
