/// What the OCSP response a server stapled says about its leaf, once checked (`OCSPStaple` in ChainwatchOpenSSL):
/// signed by the leaf's issuer or a responder it authorized, for this leaf, and current.
public enum StapledStatus: Sendable, Hashable {
    /// The issuer says the leaf is not revoked.
    case good
    /// The issuer says the leaf is revoked: a finding (`revoked`).
    case revoked(detail: String)
    /// The responder does not know the leaf.
    case unknown
    /// A staple that cannot be relied on (does not decode, not signed by the issuer, not for this leaf, stale):
    /// recorded, not a finding (the chain's own checks judge the chain).
    case invalid(String)

    /// The word in the alert line (`chainwatch.chain.ocsp`); `absent` when nothing was stapled.
    public var word: String {
        switch self {
        case .good: "good"
        case .revoked: "revoked"
        case .unknown: "unknown"
        case .invalid: "invalid"
        }
    }
}
