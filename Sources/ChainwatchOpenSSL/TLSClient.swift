import ChainwatchCore
internal import COpenSSL

/// One TLS client handshake with no socket: feed it the server's bytes (`receive`), send what it has written
/// (`takeOutgoing`), and ask it to go on (`advance`) until it reports `.done`. It sends no application data; after
/// the handshake `closeNotify` gives the bytes of a close_notify alert. The ClientHello repeats a `ClientOffer`
/// as far as OpenSSL allows (see `TLSClient.apply`). The server's certificate is not verified here.
///
/// Owns one client `SSL *` (which owns its two memory BIOs) and the capture its message callback writes to.
/// Not thread-safe: one thread at a time (an event loop's, or the caller's in `ChainFetcher`).
public final class TLSClient {
    /// How far the handshake is.
    public enum Progress: Hashable, Sendable {
        /// Waiting for the server: send `takeOutgoing()` if not empty, then `receive` more bytes.
        case needsMoreBytes
        /// Finished; `takeOutgoing()` may still hold the client's last flight (its Finished), to be sent.
        case done(TLSClientResult)
    }

    private let ssl: OpaquePointer          // SSL *
    private let incoming: OpaquePointer     // BIO * the SSL reads from, owned by the SSL
    private let outgoing: OpaquePointer     // BIO * the SSL writes to, owned by the SSL
    private let context: TLSClientContext   // keeps the custom-extension context's configuration alive
    private let capture = HandshakeCapture()
    private var result: TLSClientResult?

    /// The largest Certificate message a client accepts unless told otherwise: 512 KiB (OpenSSL's own default,
    /// 100 KiB, fails real chains: badssl's 10000-sans is 210 KB).
    public static let defaultMaxCertificateList = TLSClientContext.maxCertificateListBytes

    /// A client ready to start; the first `advance()` writes the ClientHello.
    /// - Parameter maxCertificateList: the largest Certificate message accepted (OpenSSL then fails the handshake
    ///   with `excessive message size`, `isExcessiveMessageSize`); OpenSSL buffers that much as it arrives.
    public init(offer: ClientOffer, maxCertificateList: Int = TLSClient.defaultMaxCertificateList) throws(OpenSSLError) {
        ERR_clear_error()
        context = try TLSClientContext.context(customExtensions: Self.customExtensions(for: offer))
        guard let ssl = SSL_new(context.raw) else { throw .drainingQueue(call: "SSL_new") }
        guard let incoming = BIO_new(BIO_s_mem()) else { SSL_free(ssl); throw .drainingQueue(call: "BIO_new") }
        guard let outgoing = BIO_new(BIO_s_mem()) else {
            let error = OpenSSLError.drainingQueue(call: "BIO_new")
            BIO_free(incoming); SSL_free(ssl)
            throw error
        }
        _ = c_openssl_BIO_set_mem_eof_return(incoming, -1)   // empty means "retry", not end of stream
        SSL_set_bio(ssl, incoming, outgoing)                  // the SSL takes ownership of both
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        SSL_set_connect_state(ssl)
        if maxCertificateList != Self.defaultMaxCertificateList {
            _ = SSL_ctrl(ssl, SSL_CTRL_SET_MAX_CERT_LIST, maxCertificateList, nil)
        }
        try Self.apply(offer, to: ssl, catalogue: TLSCatalogue.shared)   // on throw, deinit frees the SSL
        c_openssl_SSL_set_msg_callback_arg(ssl, Unmanaged.passUnretained(capture).toOpaque())
        SSL_set_msg_callback(ssl) { sent, _, contentType, bytes, count, _, argument in
            guard let argument, let bytes else { return }
            Unmanaged<HandshakeCapture>.fromOpaque(argument).takeUnretainedValue()
                .message(sent: sent != 0, contentType: contentType, bytes: UnsafeRawBufferPointer(start: bytes, count: count))
        }
    }

    deinit { SSL_free(ssl) }

    /// Hands bytes received from the server to the handshake (copied).
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(OpenSSLError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard BIO_write(incoming, base, Int32(bytes.count)) == Int32(bytes.count) else { throw .drainingQueue(call: "BIO_write") }
    }

    public func receive(_ bytes: [UInt8]) throws(OpenSSLError) {
        let written = bytes.withUnsafeBytes { raw in raw.isEmpty ? 0 : BIO_write(incoming, raw.baseAddress, Int32(raw.count)) }
        guard written == Int32(bytes.count) else { throw .drainingQueue(call: "BIO_write") }
    }

    /// Whether bytes are waiting to be sent.
    public var hasOutgoing: Bool { BIO_ctrl_pending(outgoing) > 0 }

    /// Takes every byte the handshake wants sent to the server (empty when none).
    public func takeOutgoing() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(outgoing))
        guard pending > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: pending) { buffer, count in
            count = max(0, Int(BIO_read(outgoing, buffer.baseAddress, Int32(pending))))
        }
    }

    /// Runs the handshake as far as the bytes received allow. A failure names `SSL_connect` with the error queue;
    /// `takeOutgoing()` then may hold the alert that tells the server why.
    public func advance() throws(OpenSSLError) -> Progress {
        if let result { return .done(result) }
        ERR_clear_error()
        let status = SSL_connect(ssl)
        if status == 1 {
            let finished = try makeResult()
            result = finished
            return .done(finished)
        }
        switch SSL_get_error(ssl, status) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsMoreBytes
        case SSL_ERROR_ZERO_RETURN:
            throw OpenSSLError(call: "SSL_connect", queue: ["the server sent close_notify during the handshake"])
        default:
            throw .drainingQueue(call: "SSL_connect")
        }
    }

    /// After `.done`: the bytes of a close_notify alert (empty before the handshake is done). Does not wait for the
    /// server's.
    public func closeNotify() -> [UInt8] {
        guard result != nil else { return [] }
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        return takeOutgoing()
    }

    /// The OCSP response the server stapled, when one was asked for and sent.
    private func stapledResponse() -> [UInt8]? {
        var response: UnsafePointer<UInt8>? = nil
        let length = c_openssl_SSL_get_tlsext_status_ocsp_resp(ssl, &response)
        guard let response, length > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: response, count: length))
    }

    /// Reads the finished handshake.
    private func makeResult() throws(OpenSSLError) -> TLSClientResult {
        var chain: [[UInt8]] = []
        // On the client side the peer chain includes the leaf. libssl decoded each certificate (the costly part of a
        // certificate, OpenSSL 3.0's public-key decoding): the validator gets them from the cache, not decoded again.
        if let stack = SSL_get_peer_cert_chain(ssl) {
            for index in 0..<c_openssl_sk_X509_num(stack) {
                guard let x509 = c_openssl_sk_X509_value(stack, index) else { continue }
                let der = try Certificate.encode(x509)
                chain.append(der)
                // Only what the validator considers (a hostile server's 200 certificates would evict useful entries).
                // Handing it over is an optimisation: a certificate whose facts cannot be read here is decoded (and
                // judged) by the validator as before, never a failed probe.
                if index < PathValidator.maxConsideredCertificates {
                    DecodedCertificates.shared.keep(der: der) { try? Certificate(borrowing: x509, der: der) }
                }
            }
        }
        if chain.isEmpty, let leaf = SSL_get0_peer_certificate(ssl) { chain = [try Certificate.encode(leaf)] }
        let cipher = SSL_get_current_cipher(ssl).map { SSL_CIPHER_get_protocol_id($0) } ?? 0
        var selected: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &length)
        let alpn = selected.flatMap { length > 0 ? String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) : nil }
        return TLSClientResult(
            chainDER: chain, version: TLSVersion(rawValue: UInt16(truncatingIfNeeded: SSL_version(ssl))),
            cipher: CipherSuite(rawValue: cipher), alpn: alpn, clientHello: capture.clientHello, serverHello: capture.serverHello,
            serverMessages: capture.serverMessages, serverRecordLengths: capture.serverRecordLengths,
            helloRetryRequested: capture.helloRetryRequested, ocspResponse: stapledResponse())
    }

    /// OpenSSL's name for `suite` (`ECDHE-ECDSA-AES128-GCM-SHA256`), nil when this OpenSSL does not know it.
    public static func openSSLName(of suite: CipherSuite) -> String? {
        TLSCatalogue.shared.cipherNames[suite.rawValue]
    }
}
