/// Whether a TLS 1.3 tunnel is covered by the probe evidence it relies on. The tunnel's certificate is encrypted, so
/// chainwatch judges the chain its own probe got from the same address with the client's offer; an interceptor that
/// spares the probe (it recognises it, or it behaved until the probe was cached) still shows itself in what the
/// tunnel sends in clear: its ServerHello.
///
/// A choice is compared only where the probe offered what the client offered for it, because only then must the same
/// server choose the same: the version when both sent the same supported_versions, the suite when both offered the
/// same suites (signalling suites aside), the key-share group when both sent the same key shares and groups, the
/// extension set in TLS 1.3 (fixed by the version) or when both offered the same extensions. The probe sends the
/// client's own hello (`HelloMirror`), so for a tunnel every choice is compared; the conditions matter for a probe
/// made by OpenSSL's client from an offer without a hello. Not compared at all: a resumed session (no certificate, extensions differ by design).
public enum EvidenceAgreement {
    /// nil when the tunnel's ServerHello agrees with the probe's wherever both were asked the same; else what differs.
    public static func disagreement(tunnel: ServerHello, probe: ServerHello, client: ClientHello, probeClient: ClientHello) -> String? {
        if tunnel.resumes(client) { return nil }
        var differences: [String] = []
        if client.supportedVersions == probeClient.supportedVersions, tunnel.version != probe.version {
            differences.append("version \(tunnel.version) in the tunnel, \(probe.version) in the probe")
        }
        if suites(client) == suites(probeClient), tunnel.cipherSuite != probe.cipherSuite {
            differences.append("cipher suite \(tunnel.cipherSuite) in the tunnel, \(probe.cipherSuite) in the probe")
        }
        if client.keyShareGroups == probeClient.keyShareGroups, client.supportedGroups == probeClient.supportedGroups,
           tunnel.keyShareGroup != probe.keyShareGroup {
            differences.append("key-share group \(groupText(tunnel.keyShareGroup)) in the tunnel, \(groupText(probe.keyShareGroup)) in the probe")
        }
        let sameExtensionsAsked = tunnel.version >= .tls1_3 || Set(client.extensionTypes) == Set(probeClient.extensionTypes)
        if sameExtensionsAsked, Set(tunnel.extensionTypes) != Set(probe.extensionTypes) {
            differences.append("ServerHello extensions \(listText(tunnel.extensionTypes)) in the tunnel, \(listText(probe.extensionTypes)) in the probe")
        }
        return differences.isEmpty ? nil : differences.joined(separator: "; ")
    }

    /// The offered suites a server chooses from: the signalling values (renegotiation SCSV 0x00FF, fallback SCSV
    /// 0x5600), which OpenSSL adds on its own, left out.
    private static func suites(_ hello: ClientHello) -> [CipherSuite] {
        hello.cipherSuites.filter { $0.rawValue != 0x00FF && $0.rawValue != 0x5600 }
    }

    private static func groupText(_ group: UInt16?) -> String { group.map(\.hexDescription) ?? "none" }
    private static func listText(_ types: [UInt16]) -> String { "[" + types.sorted().map(\.hexDescription).joined(separator: ",") + "]" }
}
