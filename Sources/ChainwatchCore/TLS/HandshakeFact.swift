/// One thing a `TLSObserver` learned from the handshake, in stream order.
public enum HandshakeFact: Equatable, Sendable {
    case clientHello(ClientHello)
    /// A ServerHello, or a HelloRetryRequest (`isHelloRetryRequest`) after which another ServerHello follows.
    case serverHello(ServerHello)
    /// The DER certificates of a TLS 1.2-and-below Certificate message, in the order sent (leaf first, normally).
    case certificate([[UInt8]])
    /// A TLS 1.2-and-below CertificateStatus (RFC 6066 8): the OCSP response (DER) the server staples.
    case certificateStatus([UInt8])
    /// The server's TLS 1.2 flight is complete.
    case serverHelloDone
    /// A plaintext alert (RFC 8446 6): level 1 warning, 2 fatal; description e.g. 40 handshake_failure.
    case alert(level: UInt8, description: UInt8)
    /// The handshake is encrypted from here on (after a TLS 1.3 ServerHello, a ChangeCipherSpec, or the first
    /// application data record): the observer reports nothing more and ignores further bytes.
    case encrypted
}
