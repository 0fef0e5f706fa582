/// Check 6: the ClientHello's SNI names the same host as the CONNECT request (domain fronting, misrouted clients).
/// No SNI, or a CONNECT to an IP literal (the client resolved the name itself), passes.
public struct SNIMismatchCheck: Check {
    public init() {}
    public var name: String { "sni_mismatch" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        guard let sni = evidence.serverName, HostName.ipAddressBytes(evidence.connectHost) == nil else { return .passes }
        if HostName.normalize(sni) == HostName.normalize(evidence.connectHost) { return .passes }
        return .fails(.sniMismatch, level: nil, detail: "SNI \(HostName.normalize(sni)) but CONNECT \(HostName.normalize(evidence.connectHost))")
    }
}
