/// Whether a TLS 1.3 tunnel is covered by the probe evidence it relies on. The tunnel's certificate is encrypted, so
/// chainwatch judges the chain its own probe got from the same address with the same offer; an interceptor that
/// spares the probe (it recognises it, or it behaved until the probe was cached) still shows itself in what the
/// tunnel sends in clear: its ServerHello. With the same offer, the same server picks the same version, suite and
/// key-share group and answers with the same extensions.
///
/// Not compared: a resumed session (the server accepted a pre-shared key: its extensions differ by design and no
/// certificate is sent; the probe's chain is judged as for any resumption), and the session ID echo and randoms,
/// which differ on every connection.
public enum EvidenceAgreement {
    /// nil when the tunnel's ServerHello agrees with the probe's; else what differs, for the alert detail.
    public static func disagreement(tunnel: ServerHello, probe: ServerHello) -> String? {
        if tunnel.acceptsPreSharedKey { return nil }
        var differences: [String] = []
        if tunnel.version != probe.version {
            differences.append("version \(tunnel.version) in the tunnel, \(probe.version) in the probe")
        }
        if tunnel.cipherSuite != probe.cipherSuite {
            differences.append("cipher suite \(tunnel.cipherSuite) in the tunnel, \(probe.cipherSuite) in the probe")
        }
        if tunnel.keyShareGroup != probe.keyShareGroup {
            differences.append("key-share group \(groupText(tunnel.keyShareGroup)) in the tunnel, \(groupText(probe.keyShareGroup)) in the probe")
        }
        let tunnelExtensions = Set(tunnel.extensionTypes), probeExtensions = Set(probe.extensionTypes)
        if tunnelExtensions != probeExtensions {
            differences.append("ServerHello extensions \(listText(tunnel.extensionTypes)) in the tunnel, \(listText(probe.extensionTypes)) in the probe")
        }
        return differences.isEmpty ? nil : differences.joined(separator: "; ")
    }

    private static func groupText(_ group: UInt16?) -> String { group.map(\.hexDescription) ?? "none" }
    private static func listText(_ types: [UInt16]) -> String { "[" + types.sorted().map(\.hexDescription).joined(separator: ",") + "]" }
}
