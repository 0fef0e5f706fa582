/// What an investigator does next about a finding, one sentence per reason: written in every alert line
/// (`chainwatch.next`); README's "An alert fired: what now" says more, reason by reason.
extension Reason {
    public var nextStep: String {
        switch self {
        case .untrustedChain:
            "Fetch the chain from another network (openssl s_client -connect HOST:PORT -showcerts) and compare its fingerprints with chainwatch.chain.sha256: another chain here is an interception; the same one means the server's chain (or its missing intermediate) needs fixing"
        case .hostnameMismatch:
            "Compare tls.server.x509.alternative_names with the host: a certificate for another name from the same CA is often a misrouted virtual host; a certificate from an unknown CA is an interception"
        case .expired, .notYetValid:
            "Check this machine's clock and the server's certificate from another network: the same dates there mean the server needs a new certificate; other dates here mean someone serves an old or forged one"
        case .rootMismatch, .intermediateMismatch, .spkiMismatch, .leafSubjectMismatch:
            "Compare chainwatch.seen with chainwatch.expected (same encoding); fetch the chain from another network: the same fingerprints there mean the server changed its CA or key (re-pin with chainwatch pin HOST:PORT after checking it); others mean an interception"
        case .tlsVersion, .weakSignature, .weakKey, .noForwardSecrecy:
            "The server (or whoever answers for it) offers less than the rule's profile: test the server directly; a difference from what it offers elsewhere is a downgrade in the path"
        case .notTLS:
            "Something in the tunnel is not a TLS client or server: see chainwatch.detail; a captive portal or a plain-text service on a TLS port is a misconfiguration"
        case .probeFailed:
            "chainwatch could not get the chain with its own handshake: see chainwatch.detail; repeated failures to one host while clients connect fine mean something treats chainwatch's address differently"
        case .sniMismatch:
            "The client asked the proxy for one host and the server for another: domain fronting or a misconfigured client; find the client by source.ip"
        case .pinExpired:
            "The rule's pins are past their expires date and no longer enforced: check the server's chain and renew them (chainwatch pin HOST:PORT)"
        case .localRoot:
            "The chain validates only through a root added to this machine's trust store (chainwatch.chain.subjects, last): a TLS-inspection gateway's CA; name it with --ca if it is yours, else remove it from the store"
        case .handshakeTimeout:
            "The server did not show its chain in time: a stalled or overloaded server, or a relay holding the handshake; retry it directly"
        case .revoked:
            "The server's own CA says the leaf is revoked: the server must get a new certificate; a revoked certificate still served by someone else is a stolen key in use"
        case .oversizedHandshake:
            "The chain was larger than the memory chainwatch may use for it (--large-handshake-memory): raise it, or look for many large handshakes at once"
        case .httpsOnly:
            "A client sent plain HTTP to a host whose rule says https_only: find the client by source.ip and make it use https"
        case .evidenceMismatch:
            "The tunnel's handshake differs from chainwatch's own with the same hello, made again up to three times: someone may forge this client's connections only; capture the tunnel (source.ip, destination.ip) and compare with a fetch from another network"
        }
    }
}
