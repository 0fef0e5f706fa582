/// What a rule does about a situation that is not a chain verdict (a failed probe, non-TLS bytes, an SNI mismatch…).
public enum Disposition: String, Sendable, Hashable, CaseIterable {
    /// Close the tunnel (or refuse it).
    case block
    /// Let it through and log the finding.
    case alert
    /// Let it through silently.
    case allow

    /// The action taken, or nil for `allow`.
    public var action: Action? {
        switch self {
        case .block: return .block
        case .alert: return .alert
        case .allow: return nil
        }
    }
}
