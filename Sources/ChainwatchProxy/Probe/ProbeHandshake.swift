import ChainwatchCore
import ChainwatchEventLoop
internal import CLibevent
internal import COpenSSL
import Glibc

/// One probe handshake on one loop: a non-blocking OpenSSL client in a libevent `bufferevent_openssl`.
/// Owns its bufferevent (and through it the `SSL` and the socket) and its timeout. Keeps itself alive from
/// `start` until it reports, whatever happens to whoever asked. Reports exactly once; sends no application data.
/// Loop thread only.
final class ProbeHandshake {
    private let key: ProbeKey
    private let timeoutMilliseconds: Int
    private var report: ((ProbeResult) -> Void)?
    private var bev: OpaquePointer?        // bufferevent *
    private var timer: Timer?
    private var selfReference: Unmanaged<ProbeHandshake>?

    init(key: ProbeKey, timeoutMilliseconds: Int, report: @escaping (ProbeResult) -> Void) {
        self.key = key
        self.timeoutMilliseconds = timeoutMilliseconds
        self.report = report
    }

    deinit { if let bev { bufferevent_free(bev) } }

    /// Connects to `key.address` and starts the handshake; the report comes from a later callback (or from
    /// here when a step fails at once).
    func start(on loop: EventLoop, context: ProbeClientContext) {
        guard let ssl = SSL_new(context.raw) else { return finish(.failure(Self.openSSLFailure("SSL_new"))) }
        if let failure = Self.configure(ssl, for: key) {
            SSL_free(ssl)
            return finish(.failure(failure))
        }
        // Takes ownership of `ssl` (BEV_OPT_CLOSE_ON_FREE: freed with the bufferevent, as is the socket).
        // On failure libevent 2.1 may or may not have freed it; leaking it in that (allocation-failure) case is
        // safer than a double free.
        guard let bev = bufferevent_openssl_socket_new(loop.base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                       Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            return finish(.failure("bufferevent_openssl_socket_new failed"))
        }
        self.bev = bev
        let reference = Unmanaged.passRetained(self)
        selfReference = reference
        bufferevent_setcb(bev, nil, nil, { _, what, ctx in
            let savedErrno = errno
            Unmanaged<ProbeHandshake>.fromOpaque(ctx!).takeUnretainedValue().handle(what, errno: savedErrno)
        }, reference.toOpaque())

        let timer = Timer(loop: loop) { [unowned self] in
            finish(.failure("timed out after \(timeoutMilliseconds) ms"))
        }
        self.timer = timer
        timer.schedule(milliseconds: timeoutMilliseconds)

        let started = key.address.withProbeSockaddr { sa, length in bufferevent_socket_connect(bev, sa, Int32(length)) }
        if started != 0 {
            let code = errno
            finish(.failure(Self.connectFailure(errno: code)))
        }
    }

    /// SNI, ALPN and maximum version from the key; nil, or why the `SSL` could not be set up.
    private static func configure(_ ssl: OpaquePointer, for key: ProbeKey) -> String? {
        // SNI carries host names only (RFC 6066 §3): an IP literal is not sent.
        if let name = key.serverName, !name.isEmpty, SocketAddress(numeric: name, port: 0) == nil {
            guard c_openssl_SSL_set_tlsext_host_name(ssl, name) == 1 else { return openSSLFailure("SSL_set_tlsext_host_name") }
        }
        let alpn = alpnWire(key.alpn)
        if !alpn.isEmpty {
            // Returns 0 on success (unlike most of OpenSSL).
            guard SSL_set_alpn_protos(ssl, alpn, UInt32(alpn.count)) == 0 else { return openSSLFailure("SSL_set_alpn_protos") }
        }
        if let max = key.maxVersion, max >= .tls1_0, max <= .tls1_3 {
            guard c_openssl_SSL_set_max_proto_version(ssl, Int32(max.rawValue)) == 1 else {
                return openSSLFailure("SSL_set_max_proto_version")
            }
        }
        return nil
    }

    /// ALPN protocol names in wire form (each with a one-byte length); names empty or over 255 bytes are skipped.
    static func alpnWire(_ names: [String]) -> [UInt8] {
        var wire: [UInt8] = []
        for name in names {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else { continue }
            wire.append(UInt8(bytes.count))
            wire += bytes
        }
        return wire
    }

    private func handle(_ what: Int16, errno code: Int32) {
        guard let bev else { return }
        if what & Int16(BEV_EVENT_CONNECTED) != 0 {
            // The handshake is complete (for an SSL bufferevent, "connected" means that).
            finish(Self.chain(of: bufferevent_openssl_get_ssl(bev)))
            return
        }
        var reasons: [String] = []
        while true {
            let error = bufferevent_get_openssl_error(bev)
            if error == 0 { break }
            // libevent also records SSL_get_error's code (1...8) in this list: not an error-queue entry.
            if error > 0xFF { reasons.append(Self.describe(openSSLError: error)) }
        }
        if !reasons.isEmpty {
            finish(.failure("handshake failed: " + reasons.joined(separator: "; ")))
        } else if what & Int16(BEV_EVENT_EOF) != 0 || code == 0 {
            finish(.failure("handshake failed: connection closed by server"))
        } else {
            finish(.failure(Self.connectFailure(errno: code)))
        }
    }

    /// Socket errors worded for the alert: the connect ones as such, the rest as a failed handshake.
    private static func connectFailure(errno code: Int32) -> String {
        switch code {
        case ECONNREFUSED: "connect refused"
        case ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ETIMEDOUT, EAFNOSUPPORT: "connect failed: \(String(cString: strerror(code)))"
        default: "handshake failed: \(String(cString: strerror(code)))"
        }
    }

    /// Reads the finished handshake: the chain as sent (leaf first), version, cipher, ALPN.
    private static func chain(of ssl: OpaquePointer?) -> ProbeResult {
        guard let ssl else { return .failure("no SSL in the bufferevent") }
        var chainDER: [[UInt8]] = []
        // On the client side the peer chain includes the leaf.
        if let stack = SSL_get_peer_cert_chain(ssl) {
            for index in 0..<c_openssl_sk_X509_num(stack) {
                guard let certificate = c_openssl_sk_X509_value(stack, index) else { continue }
                guard let der = der(certificate) else { return .failure("certificate \(index) could not be encoded") }
                chainDER.append(der)
            }
        }
        if chainDER.isEmpty, let leaf = SSL_get0_peer_certificate(ssl), let der = der(leaf) {
            chainDER = [der]
        }
        guard !chainDER.isEmpty else { return .failure("no certificate") }
        let version = TLSVersion(rawValue: UInt16(truncatingIfNeeded: SSL_version(ssl)))
        let cipher = CipherSuite(rawValue: SSL_get_current_cipher(ssl).map { SSL_CIPHER_get_protocol_id($0) } ?? 0)
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        let alpn = data.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
        return .success(ProbeChain(chainDER: chainDER, version: version, cipher: cipher, alpn: length > 0 ? alpn : nil))
    }

    /// `X509 *` (borrowed) to DER.
    private static func der(_ certificate: OpaquePointer) -> [UInt8]? {
        let length = Int(i2d_X509(certificate, nil))
        guard length > 0 else { return nil }
        let der = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            var cursor = buffer.baseAddress
            count = Int(i2d_X509(certificate, &cursor)) == length ? length : 0
        }
        return der.isEmpty ? nil : der
    }

    /// Reports once: stops the timer, closes the connection (a close_notify after a completed handshake, not
    /// waited for), then lets go of itself.
    private func finish(_ result: ProbeResult) {
        guard let report else { return }
        self.report = nil
        timer?.cancel()
        timer = nil
        if let bev {
            if case .success = result, let ssl = bufferevent_openssl_get_ssl(bev) { _ = SSL_shutdown(ssl) }
            ERR_clear_error()
            bufferevent_free(bev)   // also frees the SSL and closes the socket
            self.bev = nil
        }
        let reference = selfReference
        selfReference = nil
        report(result)
        reference?.release()
    }

    private static func describe(openSSLError code: UInt) -> String {
        if let reason = ERR_reason_error_string(code) { return String(cString: reason) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func openSSLFailure(_ call: String) -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            reasons.append(describe(openSSLError: code))
        }
        return reasons.isEmpty ? "\(call) failed" : "\(call) failed: \(reasons.joined(separator: "; "))"
    }
}

extension SocketAddress {
    /// The address as a `sockaddr`, rebuilt from its public parts (family, address bytes, port).
    /// An IPv6 scope id is not kept (`SocketAddress.withSockaddr` is internal to ChainwatchEventLoop).
    func withProbeSockaddr<R>(_ body: (UnsafeMutablePointer<sockaddr>, socklen_t) -> R) -> R {
        let bytes = addressBytes
        if family == AF_INET6 {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: bytes) }
            return withUnsafeMutablePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: bytes) }
        return withUnsafeMutablePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
