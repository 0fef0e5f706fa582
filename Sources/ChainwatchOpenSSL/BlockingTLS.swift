import ChainwatchCore
internal import COpenSSL
import Glibc

/// TLS over a blocking socket the caller owns, for `chainwatch selftest`'s own servers and client: one request and
/// one answer per connection. Not for the proxy's loops (they never block).
public enum BlockingTLS {
    /// A TLS server context (TLS 1.2 and 1.3) with one chain and key. Owns one `SSL_CTX *`; immutable after init, so
    /// shareable across the threads that serve with it.
    public final class Server: @unchecked Sendable {
        private let context: OpaquePointer

        /// - Parameters: chainFile, keyFile: PEM files (leaf first, then intermediates; the leaf's key).
        public init(chainFile: String, keyFile: String) throws(OpenSSLError) {
            guard let context = SSL_CTX_new(TLS_server_method()) else { throw .drainingQueue(call: "SSL_CTX_new") }
            guard SSL_CTX_use_certificate_chain_file(context, chainFile) == 1,
                  SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1 else {
                SSL_CTX_free(context)
                throw .drainingQueue(call: "SSL_CTX_use_certificate_chain_file")
            }
            _ = c_openssl_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
            self.context = context
        }

        deinit { SSL_CTX_free(context) }

        /// Handshakes on `fd` (borrowed), reads a request head (up to 16 KiB), writes `answer` and shuts TLS down.
        public func serve(_ fd: Int32, answer: [UInt8]) {
            guard let ssl = SSL_new(context) else { return }
            defer { SSL_free(ssl) }
            SSL_set_fd(ssl, fd)
            guard SSL_accept(ssl) == 1 else { return ERR_clear_error() }
            var request: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096)
            while request.count < 16384, !request.hasSuffixBytes(Array("\r\n\r\n".utf8)) {
                let n = SSL_read(ssl, &buffer, Int32(buffer.count))
                guard n > 0 else { return ERR_clear_error() }
                request += buffer[..<Int(n)]
            }
            _ = answer.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            SSL_shutdown(ssl)
            ERR_clear_error()
        }
    }

    /// What a client exchange got: the server's bytes read during the handshake, and either the handshake's failure or
    /// the leaf's SHA-256 and the answer's bytes (up to 64 KiB).
    public struct Exchange: Sendable {
        public var serverBytesInHandshake: Int
        public var handshakeSucceeded: Bool
        public var leafSHA256: [UInt8]
        public var answer: [UInt8]
    }

    /// Handshakes on `fd` (borrowed) as a client of exactly `version` (TLS 1.2 or 1.3) with `serverName`, verifying
    /// nothing (the selftest judges by the leaf's digest), writes `request` and reads the answer until the server
    /// closes.
    public static func exchange(on fd: Int32, version: TLSVersion, serverName: String, request: [UInt8]) throws(OpenSSLError) -> Exchange {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .drainingQueue(call: "SSL_CTX_new") }
        defer { SSL_CTX_free(context) }
        let wire = version == .tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION
        _ = c_openssl_SSL_CTX_set_min_proto_version(context, wire)
        _ = c_openssl_SSL_CTX_set_max_proto_version(context, wire)
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        guard let ssl = SSL_new(context) else { throw .drainingQueue(call: "SSL_new") }
        defer { SSL_free(ssl) }
        SSL_set_fd(ssl, fd)
        _ = c_openssl_SSL_set_tlsext_host_name(ssl, serverName)
        let connected = SSL_connect(ssl)
        let serverBytes = Int(BIO_number_read(SSL_get_rbio(ssl)))
        guard connected == 1 else {
            ERR_clear_error()
            return Exchange(serverBytesInHandshake: serverBytes, handshakeSucceeded: false, leafSHA256: [], answer: [])
        }
        var leaf: [UInt8] = []
        if let certificate = SSL_get1_peer_certificate(ssl) {
            var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE)), length: UInt32 = 0
            X509_digest(certificate, EVP_sha256(), &digest, &length)
            leaf = Array(digest.prefix(Int(length)))
            X509_free(certificate)
        }
        _ = request.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        var answer: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096)
        while answer.count < 65536 {
            let n = SSL_read(ssl, &buffer, Int32(buffer.count))
            if n <= 0 { break }
            answer += buffer[..<Int(n)]
        }
        ERR_clear_error()
        return Exchange(serverBytesInHandshake: serverBytes, handshakeSucceeded: true, leafSHA256: leaf, answer: answer)
    }
}

private extension Array where Element == UInt8 {
    func hasSuffixBytes(_ suffix: [UInt8]) -> Bool { count >= suffix.count && self[(count - suffix.count)...].elementsEqual(suffix) }
}
