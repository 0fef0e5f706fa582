/// Whether a tunnel's block marks its upstream known-bad for every client (their next CONNECT gets `403` until the
/// mark expires). The one place that decides it; ARCHITECTURE.md lists the same conditions. Pure.
///
/// Only what the server's chain earned marks an upstream, and only when no one client could have steered it:
/// 1. the verdict blocks (an alert marks nothing);
/// 2. one of its blocking findings (the first such marks) is the chain's, not the client's nor the proxy's own state: not `not_tls` (the client's bytes),
///    `sni_mismatch`, `evidence_mismatch` (an offer whose handshake the probe's cannot match), `probe_failed` (an
///    offer the server refuses fails the probe made with it), `tls_version` and `no_forward_secrecy` (the version
///    and suite negotiated from what the client offered: an offer of TLS 1.2 only under `min_tls: "1.3"`),
///    `handshake_timeout` (a slow path is not a forged chain) or `oversized_handshake` (no room because other
///    tunnels held it: one client opening many would deny the host to all);
/// 3. the chain was judged for the CONNECT host: a ClientHello whose SNI names another host says nothing about it,
///    nor does one with no SNI to a CONNECT host that is a name (a server with many sites answers it with its default
///    certificate, which every client that names the host never sees);
/// 4. the chain was not one read with room (over 224 KiB): the mark keeps its evidence, tens of thousands of names,
///    for minutes;
/// 5. the client's offer did not pick the leaf's key type: a server with an RSA and an ECDSA certificate answers an
///    offer of one type only with the chain it keeps for that type, which may fail pins the other passes (one legacy
///    RSA-only client would otherwise have every client refused for five minutes).
public enum KnownBadRule {
    /// Reasons a block gives that mark nothing (condition 2).
    public static let steerableReasons: Set<Reason> = [.notTLS, .sniMismatch, .evidenceMismatch, .probeFailed, .tlsVersion,
                                                       .noForwardSecrecy, .handshakeTimeout, .oversizedHandshake]

    /// The finding a blocked verdict marks its upstream with: the first blocking finding the chain earned, not merely
    /// the deciding one (`leafKeyType`: the judged leaf's; `clientHello`: the tunnel's, when read; `largeChain`: the
    /// chain was over `TLSObserver.maxServerHandshakeMessageLength`). A forged chain served over an offer below the TLS floor decides as `tls_version`, which a
    /// client can steer, but its `root_mismatch` is the server's all the same. nil: the verdict marks nothing.
    public static func marking(_ verdict: Verdict, facts: ConnectionFacts, leafKeyType: CertificateFacts.KeyType?,
                               clientHello: ClientHello?, largeChain: Bool) -> Finding? {
        guard verdict.action == .block,
              tunnelSpeaksForTheHost(facts: facts, leafKeyType: leafKeyType, clientHello: clientHello, largeChain: largeChain)
        else { return nil }
        return verdict.findings.first { $0.action == .block && !steerableReasons.contains($0.reason) }
    }

    /// Conditions 3 to 5: the tunnel's chain speaks for its CONNECT host, whatever else the verdict found.
    private static func tunnelSpeaksForTheHost(facts: ConnectionFacts, leafKeyType: CertificateFacts.KeyType?,
                                               clientHello: ClientHello?, largeChain: Bool) -> Bool {
        guard !largeChain else { return false }
        if let serverName = facts.serverName {
            if HostName.normalize(serverName) != HostName.normalize(facts.connectHost) { return false }
        } else if clientHello != nil, HostName.ipAddressBytes(facts.connectHost) == nil {
            return false   // no SNI to a name: the server's default certificate
        }
        if let picked = clientHello?.onlyKeyType(version: facts.protocolVersion), leafKeyType == picked { return false }
        return true
    }
}

extension ClientHello {
    /// The one key type, RSA or ECDSA (`.ec`), this hello leaves the server: signature algorithms of one and none of
    /// the other (and, for TLS 1.2, cipher suites that authenticate with one of them only); nil when it leaves both.
    public func onlyKeyType(version: TLSVersion?) -> CertificateFacts.KeyType? {
        let ecdsaSchemes: Set<UInt16> = [0x0403, 0x0503, 0x0603, 0x0203]
        let rsaSchemes: Set<UInt16> = [0x0401, 0x0501, 0x0601, 0x0201, 0x0804, 0x0805, 0x0806, 0x0809, 0x080A, 0x080B]
        func one(_ ecdsa: Bool, _ rsa: Bool) -> CertificateFacts.KeyType? { ecdsa == rsa ? nil : ecdsa ? .ec : .rsa }
        if !signatureAlgorithms.isEmpty,
           let type = one(signatureAlgorithms.contains(where: ecdsaSchemes.contains),
                          signatureAlgorithms.contains(where: rsaSchemes.contains)) {
            return type
        }
        guard let version, version < .tls1_3 else { return nil }
        let names = cipherSuites.compactMap(\.name)
        return one(names.contains { $0.contains("_ECDSA_") }, names.contains { $0.contains("_RSA_") })
    }
}
