extension HandshakeFact {
    /// The fact a complete handshake message states, or nil for a message type chainwatch does not report
    /// (ServerKeyExchange, ClientKeyExchange, NewSessionTicket, ...).
    init?(type: UInt8, body: ArraySlice<UInt8>) throws(TLSParseError) {
        switch type {
        case HandshakeType.clientHello: self = .clientHello(try ClientHello(parsing: body))
        case HandshakeType.serverHello: self = .serverHello(try ServerHello(parsing: body))
        case HandshakeType.certificate: self = .certificate(try parseCertificateList(body))
        case HandshakeType.certificateStatus: self = .certificateStatus(parseCertificateStatus(body))
        case HandshakeType.serverHelloDone:
            guard body.isEmpty else { throw .trailingBytes("ServerHelloDone") }
            self = .serverHelloDone
        default: return nil
        }
    }
}

/// The handshake message types chainwatch reports (RFC 8446 4, RFC 5246 7.4).
enum HandshakeType {
    static let clientHello: UInt8 = 1
    static let serverHello: UInt8 = 2
    static let certificate: UInt8 = 11
    static let serverHelloDone: UInt8 = 14
    static let certificateStatus: UInt8 = 22
}

/// A CertificateStatus body (RFC 6066 8): status_type 1 (ocsp), then a 3-byte-length OCSPResponse. Anything else
/// (ocsp_multi, a malformed body) is no readable staple, `[]`: the chain is judged without it, never refused for it.
private func parseCertificateStatus(_ body: ArraySlice<UInt8>) -> [UInt8] {
    var reader = ByteReader(body)
    guard (try? reader.readUInt8("CertificateStatus.status_type")) == 1,
          var response = try? reader.readVector(lengthBytes: 3, "CertificateStatus.response"), reader.isAtEnd else { return [] }
    return Array(response.readRest())
}

/// A TLS 1.2-and-below Certificate body (RFC 5246 7.4.2): a 3-byte list length, then 3-byte-length DER certificates.
/// The TLS 1.3 form (a request context first, extensions after each certificate) fails here with a typed error.
private func parseCertificateList(_ body: ArraySlice<UInt8>) throws(TLSParseError) -> [[UInt8]] {
    var reader = ByteReader(body)
    var list = try reader.readVector(lengthBytes: 3, "Certificate.certificate_list")
    try reader.expectEnd("Certificate")
    var certificates: [[UInt8]] = []
    while !list.isAtEnd {
        var der = try list.readVector(lengthBytes: 3, "Certificate.cert_data")
        guard der.remaining > 0 else { throw .badLength(field: "Certificate.cert_data", declared: 0, available: list.remaining) }
        certificates.append(Array(der.readRest()))
    }
    return certificates
}
