import ChainwatchCore
import ChainwatchOpenSSL
import ChainwatchLock

/// A loaded policy and what evaluating it needs: one trust store per distinct anchor set, built once per load.
/// Immutable; shared by every loop. Tunnels keep the snapshot they started with, so a reload never changes the
/// rules under a handshake in flight.
public final class PolicySnapshot: Sendable {
    public let policy: Policy
    /// Where it came from: a file path, or `built-in`.
    public let source: String
    /// 1 for the first load, +1 per successful reload.
    public let generation: Int
    /// Every rule's identity (the defaults included), for dropping cached verdicts of rules that changed.
    public let ruleIdentities: Set<RuleIdentity>
    /// The OS trust store's read (`SystemRoots.generation`) this snapshot's stores hold: cached verdicts and known-bad
    /// marks carry it, so one judged against an older OS store is never answered from (also when its judgement was
    /// still in flight when a reload dropped the cache).
    public let anchorsGeneration: Int
    private let stores: [Anchors: TrustStore]

    /// - Parameter extraAnchors: `--ca` certificates; they extend the system trust, so they join every rule that
    ///   trusts `system` (a rule that trusts only its own CA keeps exactly that).
    /// - Parameter publicRoots: tells public system roots from local ones; nil: their kind is unknown (`.systemRoot`).
    public init(policy: Policy, source: String, generation: Int, extraAnchors: [Certificate] = [],
                publicRoots: PublicRoots? = nil) throws {
        self.policy = policy
        self.source = source
        self.generation = generation
        var stores: [Anchors: TrustStore] = [:]
        for rule in [policy.defaults] + policy.rules {
            if stores[rule.anchors] != nil { continue }
            var anchors: [Certificate] = []
            for ca in rule.anchors.certificates { anchors.append(try Certificate(der: ca.der)) }
            if rule.anchors.system { anchors += extraAnchors }
            stores[rule.anchors] = try TrustStore(systemRoots: rule.anchors.system, extraAnchors: anchors,
                                                  publicRoots: publicRoots)
        }
        self.stores = stores
        self.ruleIdentities = Set(([policy.defaults] + policy.rules).map(\.identity))
        anchorsGeneration = SystemRoots.generation
    }

    /// The trust store for a rule of this policy.
    public func store(for rule: Rule) -> TrustStore {
        stores[rule.anchors]!
    }
}

/// The policy in force: a snapshot swapped whole on reload. Reading costs one uncontended lock.
public final class PolicyStore: Sendable {
    private let current: Lock<PolicySnapshot>
    public init(_ snapshot: PolicySnapshot) { current = Lock(snapshot) }
    public var snapshot: PolicySnapshot { current.withLock { $0 } }
    public func replace(with snapshot: PolicySnapshot) { current.withLock { $0 = snapshot } }
}
