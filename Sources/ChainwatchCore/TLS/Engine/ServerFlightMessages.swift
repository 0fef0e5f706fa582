/// The server handshake messages chainwatch's probe client reads, parsed from their bodies (no 4-byte header).
/// Every length is checked against what remains; an error names the field.
enum ServerFlightMessages {
    /// What the probe needs of a ServerHello or HelloRetryRequest beyond `ServerHello`: the selected version, the
    /// key_share (an HRR's names only a group), and an HRR's cookie.
    struct HelloExtensions {
        var selectedVersion: UInt16?
        var keyShareGroup: UInt16?
        var keyShare: [UInt8]?
        var cookie: [UInt8]?
    }

    static func helloExtensions(ofServerHello body: ArraySlice<UInt8>, isRetry: Bool) throws(TLSParseError) -> HelloExtensions {
        var reader = ByteReader(body)
        _ = try reader.readBytes(2 + 32, "ServerHello.version_random")
        _ = try reader.readVector(lengthBytes: 1, "ServerHello.legacy_session_id_echo")
        _ = try reader.readBytes(3, "ServerHello.cipher_suite_compression")
        var found = HelloExtensions()
        guard !reader.isAtEnd else { return found }
        var extensions = try reader.readVector(lengthBytes: 2, "ServerHello.extensions")
        try reader.expectEnd("ServerHello")
        while !extensions.isAtEnd {
            let type = try extensions.readUInt16("ServerHello.extension_type")
            var data = try extensions.readVector(lengthBytes: 2, "ServerHello.extension_data")
            switch type {
            case TLSExtensionType.supportedVersions:
                found.selectedVersion = try data.readUInt16("ServerHello.supported_versions")
            case TLSExtensionType.keyShare:
                found.keyShareGroup = try data.readUInt16("ServerHello.key_share.group")
                if !isRetry { found.keyShare = (try data.readVector(lengthBytes: 2, "ServerHello.key_share.key_exchange")).unread }
            case cookieExtension:
                found.cookie = (try data.readVector(lengthBytes: 2, "HelloRetryRequest.cookie")).unread
            default:
                continue
            }
            try data.expectEnd("ServerHello extension \(type)")
        }
        return found
    }

    static let cookieExtension: UInt16 = 44

    /// The protocol an EncryptedExtensions message selected by ALPN, if any.
    static func alpn(ofEncryptedExtensions body: ArraySlice<UInt8>) throws(TLSParseError) -> [UInt8]? {
        var reader = ByteReader(body)
        var extensions = try reader.readVector(lengthBytes: 2, "EncryptedExtensions.extensions")
        try reader.expectEnd("EncryptedExtensions")
        var selected: [UInt8]?
        while !extensions.isAtEnd {
            let type = try extensions.readUInt16("EncryptedExtensions.extension_type")
            var data = try extensions.readVector(lengthBytes: 2, "EncryptedExtensions.extension_data")
            guard type == TLSExtensionType.alpn else { continue }
            var names = try data.readVector(lengthBytes: 2, "EncryptedExtensions.alpn")
            selected = (try names.readVector(lengthBytes: 1, "EncryptedExtensions.alpn.name")).unread
            try names.expectEnd("EncryptedExtensions.alpn")
        }
        return selected
    }

    /// A TLS 1.3 Certificate body (RFC 8446 §4.4.2): the certificates (DER, leaf first) and the leaf's stapled OCSP
    /// response (its status_request extension), if any.
    static func certificate13(_ body: ArraySlice<UInt8>) throws(TLSParseError) -> (chain: [[UInt8]], ocsp: [UInt8]?) {
        var reader = ByteReader(body)
        _ = try reader.readVector(lengthBytes: 1, "Certificate.certificate_request_context")
        var list = try reader.readVector(lengthBytes: 3, "Certificate.certificate_list")
        try reader.expectEnd("Certificate")
        var chain: [[UInt8]] = []
        var ocsp: [UInt8]?
        while !list.isAtEnd {
            chain.append((try list.readVector(lengthBytes: 3, "Certificate.cert_data")).unread)
            var extensions = try list.readVector(lengthBytes: 2, "Certificate.extensions")
            while !extensions.isAtEnd {
                let type = try extensions.readUInt16("Certificate.extension_type")
                var data = try extensions.readVector(lengthBytes: 2, "Certificate.extension_data")
                guard chain.count == 1, type == TLSExtensionType.statusRequest,
                      (try? data.readUInt8("CertificateStatus.status_type")) == 1,
                      var response = try? data.readVector(lengthBytes: 3, "CertificateStatus.response") else { continue }
                ocsp = Array(response.readRest())
            }
        }
        return (chain, ocsp)
    }

    /// A CompressedCertificate body (RFC 8879 §4).
    static func compressedCertificate(_ body: ArraySlice<UInt8>) throws(TLSParseError) -> (algorithm: UInt16, length: Int, data: [UInt8]) {
        var reader = ByteReader(body)
        let algorithm = try reader.readUInt16("CompressedCertificate.algorithm")
        let length = try reader.readUInt24("CompressedCertificate.uncompressed_length")
        let data = (try reader.readVector(lengthBytes: 3, "CompressedCertificate.compressed_certificate_message")).unread
        try reader.expectEnd("CompressedCertificate")
        return (algorithm, length, data)
    }

    /// A CertificateVerify body (RFC 8446 §4.4.3), or a TLS 1.2 digitally-signed struct: scheme, then signature.
    static func signature(_ reader: inout ByteReader, _ field: String) throws(TLSParseError) -> (scheme: UInt16, signature: [UInt8]) {
        let scheme = try reader.readUInt16("\(field).algorithm")
        let signature = (try reader.readVector(lengthBytes: 2, "\(field).signature")).unread
        return (scheme, signature)
    }

    /// A TLS 1.2 ServerKeyExchange (RFC 8422 §5.4, RFC 5246 §7.4.3): the signed parameters and the signature.
    /// `ecdhe`: ECParameters (named_curve) and the point; else DHE's p, g and Ys.
    static func serverKeyExchange(_ body: ArraySlice<UInt8>, ecdhe: Bool) throws(TLSParseError) -> (params: [UInt8], scheme: UInt16, signature: [UInt8]) {
        var reader = ByteReader(body)
        if ecdhe {
            let curveType = try reader.readUInt8("ServerKeyExchange.curve_type")
            guard curveType == 3 else { throw .trailingBytes("ServerKeyExchange (curve type \(curveType), not named_curve)") }
            _ = try reader.readUInt16("ServerKeyExchange.named_curve")
            _ = try reader.readVector(lengthBytes: 1, "ServerKeyExchange.public")
        } else {
            for field in ["dh_p", "dh_g", "dh_Ys"] { _ = try reader.readVector(lengthBytes: 2, "ServerKeyExchange.\(field)") }
        }
        let params = Array(body.prefix(body.count - reader.remaining))
        let signed = try signature(&reader, "ServerKeyExchange")
        try reader.expectEnd("ServerKeyExchange")
        return (params, signed.scheme, signed.signature)
    }
}
