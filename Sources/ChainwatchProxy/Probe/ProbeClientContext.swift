import ChainwatchOpenSSL
internal import COpenSSL

/// The one client `SSL_CTX` every probe handshake is made from. Owns it.
/// Configured once in `init` and only read afterwards (`SSL_new` on a shared context is thread-safe in
/// OpenSSL 3), hence the unchecked Sendable.
final class ProbeClientContext: @unchecked Sendable {
    let raw: OpaquePointer   // SSL_CTX *

    /// Cipher suites up to TLS 1.2: everything that authenticates with a certificate, at security level 0, so a
    /// weak server still completes and the policy (not the probe) flags it. Anonymous suites would send no chain.
    static let cipherList = "ALL:!aNULL:!eNULL:@SECLEVEL=0"

    init() throws(OpenSSLError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw .drainingQueue(call: "SSL_CTX_new") }
        raw = ctx
        // From TLS 1.0, overriding the system's MinProtocol: old servers are probed and judged by the policy.
        guard c_openssl_SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION) == 1 else {
            throw .drainingQueue(call: "SSL_CTX_set_min_proto_version")
        }
        SSL_CTX_set_security_level(ctx, 0)
        guard SSL_CTX_set_cipher_list(ctx, Self.cipherList) == 1 else { throw .drainingQueue(call: "SSL_CTX_set_cipher_list") }
        // The policy evaluates the chain; the probe only fetches it.
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        // Always a full handshake, so the server always presents its chain.
        _ = c_openssl_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_OFF))
        _ = SSL_CTX_set_options(ctx, UInt64(c_openssl_SSL_OP_NO_TICKET()))
    }

    deinit { SSL_CTX_free(raw) }
}
