import COpenSSL

/// A TLS protocol version the bench can pin a run to.
enum TLSVersion: String, CaseIterable, Sendable, Codable {
    case v12 = "1.2"
    case v13 = "1.3"
    var openSSL: Int32 { self == .v12 ? TLS1_2_VERSION : TLS1_3_VERSION }
}

/// The bench's TLS settings. Owns one `SSL_CTX *`; configured in init and only read afterwards
/// (`SSL_new` on a shared `SSL_CTX` is thread-safe), so it is shared by all worker threads.
final class TLSContext: @unchecked Sendable {
    let raw: OpaquePointer  // SSL_CTX *

    private init(method: OpaquePointer?) throws(BenchError) {
        guard let ctx = SSL_CTX_new(method) else { throw BenchError("SSL_CTX_new failed: \(drainOpenSSLErrors())") }
        raw = ctx
    }

    /// `--fresh-certificates`: mints the leaf each fresh name gets (server contexts only).
    private var minter: LeafMinter?

    deinit { SSL_CTX_free(raw) }

    /// From now on, a ClientHello for a name under `.fresh.bench.test` gets a leaf of its own from `minter`; other
    /// names get the context's certificate. Call before the context serves; the callback runs on the serving thread.
    func presentFreshLeaves(from minter: LeafMinter) {
        self.minter = minter
        SSL_CTX_set_client_hello_cb(raw, { ssl, alert, arg in
            guard let ssl, let arg else { return 1 }
            guard let name = LeafMinter.serverName(of: ssl), name.hasSuffix(".fresh.bench.test") else { return 1 }
            let minter = Unmanaged<LeafMinter>.fromOpaque(arg).takeUnretainedValue()
            if minter.present(name, on: ssl) { return 1 }   // SSL_CLIENT_HELLO_SUCCESS
            alert?.pointee = SSL_AD_INTERNAL_ERROR
            return 0                                          // SSL_CLIENT_HELLO_ERROR
        }, Unmanaged.passUnretained(minter).toOpaque())
    }

    /// A client pinned to `version`, trusting `caFile` when given (no certificate check otherwise).
    /// Without `resumption` every handshake is a full one: no client session cache.
    static func client(version: TLSVersion, caFile: String?, resumption: Bool) throws(BenchError) -> TLSContext {
        let context = try TLSContext(method: TLS_client_method())
        _ = c_openssl_SSL_CTX_set_min_proto_version(context.raw, version.openSSL)
        _ = c_openssl_SSL_CTX_set_max_proto_version(context.raw, version.openSSL)
        _ = c_openssl_SSL_CTX_set_session_cache_mode(context.raw, resumption ? Int(SSL_SESS_CACHE_CLIENT) : Int(SSL_SESS_CACHE_OFF))
        if let caFile {
            guard SSL_CTX_load_verify_locations(context.raw, caFile, nil) == 1 else {
                throw BenchError("SSL_CTX_load_verify_locations(\(caFile)) failed: \(drainOpenSSLErrors())")
            }
            SSL_CTX_set_verify(context.raw, SSL_VERIFY_PEER, nil)
        } else {
            SSL_CTX_set_verify(context.raw, SSL_VERIFY_NONE, nil)
        }
        return context
    }

    /// A server presenting `chainFile` (leaf first) with `keyFile`, TLS 1.2 and 1.3.
    /// Without `resumption` it issues no tickets and keeps no session cache.
    static func server(chainFile: String, keyFile: String, resumption: Bool) throws(BenchError) -> TLSContext {
        let context = try TLSContext(method: TLS_server_method())
        _ = c_openssl_SSL_CTX_set_min_proto_version(context.raw, TLS1_2_VERSION)
        guard SSL_CTX_use_certificate_chain_file(context.raw, chainFile) == 1 else {
            throw BenchError("SSL_CTX_use_certificate_chain_file(\(chainFile)) failed: \(drainOpenSSLErrors())")
        }
        guard SSL_CTX_use_PrivateKey_file(context.raw, keyFile, SSL_FILETYPE_PEM) == 1 else {
            throw BenchError("SSL_CTX_use_PrivateKey_file(\(keyFile)) failed: \(drainOpenSSLErrors())")
        }
        if !resumption {
            _ = SSL_CTX_set_num_tickets(context.raw, 0)
            _ = SSL_CTX_set_options(context.raw, UInt64(c_openssl_SSL_OP_NO_TICKET()))
            _ = c_openssl_SSL_CTX_set_session_cache_mode(context.raw, Int(SSL_SESS_CACHE_OFF))
        }
        return context
    }
}
