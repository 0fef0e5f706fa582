/// Why a chain or a tunnel failed a check. One list, documented once; `policies/REFERENCE.md` repeats it.
/// The raw value is the code written to the alert log as `event.reason`.
public enum Reason: String, Sendable, Hashable, CaseIterable, Codable {
    /// The chain does not build a path to any of the rule's trust anchors.
    case untrustedChain = "untrusted_chain"
    /// The leaf does not name the host (SNI, else the CONNECT host).
    case hostnameMismatch = "hostname_mismatch"
    /// A certificate on the path is past its not-after date.
    case expired = "expired"
    /// A certificate on the path is not valid yet (not-before in the future).
    case notYetValid = "not_yet_valid"
    /// The path's anchor is not in the rule's root pin set.
    case rootMismatch = "root_mismatch"
    /// No intermediate on the path matches the rule's intermediate pin set.
    case intermediateMismatch = "intermediate_mismatch"
    /// The leaf's subject (or SAN) does not match the rule's leaf subject pins.
    case leafSubjectMismatch = "leaf_subject_mismatch"
    /// No SPKI or certificate SHA-256 pin of the rule matches the validated path.
    case spkiMismatch = "spki_mismatch"
    /// The negotiated TLS version is below the rule's floor.
    case tlsVersion = "tls_version"
    /// A certificate on the path is signed with a hash weaker than SHA-256.
    case weakSignature = "weak_signature"
    /// A key on the path is too small (RSA < 2048, EC < 256 bits under ATS).
    case weakKey = "weak_key"
    /// The negotiated cipher suite has no forward secrecy.
    case noForwardSecrecy = "no_forward_secrecy"
    /// The tunnel carries bytes that are not TLS.
    case notTLS = "not_tls"
    /// The TLS 1.3 probe (or a needed probe) could not get the server's chain.
    case probeFailed = "probe_failed"
    /// The ClientHello's SNI and the CONNECT host disagree.
    case sniMismatch = "sni_mismatch"
    /// A pin set is past its `expires` date: reported, no longer enforced.
    case pinExpired = "pin_expired"
    /// The chain validates only through a root added to this machine's OS trust store, not a public root and not an
    /// anchor the operator named: how a TLS-inspection gateway's installed CA looks.
    case localRoot = "local_root"
    /// Under a rule that holds the server's bytes, the server's handshake did not show its chain within
    /// `--probe-timeout` (a server dripping its flight a byte at a time): no verdict; the tunnel is closed.
    case handshakeTimeout = "handshake_timeout"
    /// The server stapled an OCSP response, signed by the leaf's issuer, that says the leaf is revoked.
    case revoked = "revoked"
    /// A server handshake message (its Certificate) is larger than chainwatch reads: the chain cannot be judged.
    case oversizedHandshake = "oversized_handshake"
    /// Plain HTTP to a host whose rule says `https_only`.
    case httpsOnly = "https_only"
    /// A TLS 1.3 tunnel's visible handshake (version, suite, key-share group, ServerHello extensions, encrypted flight
    /// length) disagrees with the probe evidence it relies on, even after a fresh probe.
    case evidenceMismatch = "evidence_mismatch"
}

/// The level of the validated path a finding is about.
public enum ChainLevel: String, Sendable, Hashable, Codable {
    case root, intermediate, leaf
}

/// What a rule does with a failed check.
public enum Action: String, Sendable, Hashable, Codable {
    /// Hold upstream bytes until the verdict; on a failure close both sides.
    case block
    /// Forward without waiting; log the finding.
    case alert
}

/// Where the evidence for a verdict came from.
public enum EvidenceSource: String, Sendable, Hashable, Codable {
    /// Read from the tunnel's own handshake (TLS 1.2 and below).
    case passive
    /// Read from chainwatch's own probe handshake (TLS 1.3, resumption).
    case probe
    /// A verdict cached from earlier evidence.
    case cache
    /// Read from a spot check: chainwatch's probe of an upstream in use, at a time no tunnel asked for
    /// (`SpotCheckSchedule`).
    case spotCheck = "spot_check"
}
