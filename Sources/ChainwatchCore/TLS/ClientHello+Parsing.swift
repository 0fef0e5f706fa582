extension ClientHello {
    /// Parses a ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2; the handshake header already removed).
    init(parsing body: ArraySlice<UInt8>) throws(TLSParseError) {
        var reader = ByteReader(body)
        legacyVersion = TLSVersion(rawValue: try reader.readUInt16("ClientHello.legacy_version"))
        random = Array(try reader.readBytes(32, "ClientHello.random"))
        sessionID = try readSessionID(&reader, "ClientHello.legacy_session_id")

        var suites = try reader.readVector(lengthBytes: 2, "ClientHello.cipher_suites")
        guard suites.remaining % 2 == 0 else {
            throw .badLength(field: "ClientHello.cipher_suites", declared: suites.remaining, available: suites.remaining)
        }
        cipherSuites = []
        cipherSuites.reserveCapacity(suites.remaining / 2)
        while !suites.isAtEnd {
            let suite = try suites.readUInt16("ClientHello.cipher_suites")
            if !isGREASE(suite) { cipherSuites.append(CipherSuite(rawValue: suite)) }
        }
        _ = try reader.readVector(lengthBytes: 1, "ClientHello.legacy_compression_methods")

        serverName = nil
        supportedVersions = []
        alpnProtocols = []
        offersPreSharedKey = false
        offersSessionTicket = false
        // Hellos of SSLv3-era clients end here, without an extensions block.
        guard !reader.isAtEnd else { return }
        var extensions = try reader.readVector(lengthBytes: 2, "ClientHello.extensions")
        try reader.expectEnd("ClientHello")
        var seen = Set<UInt16>()
        while !extensions.isAtEnd {
            let type = try extensions.readUInt16("ClientHello.extension_type")
            var data = try extensions.readVector(lengthBytes: 2, "ClientHello.extension_data")
            guard seen.insert(type).inserted else { throw .duplicateExtension(type) }
            switch type {
            case TLSExtensionType.serverName:
                serverName = try readServerName(&data)
            case TLSExtensionType.alpn:
                alpnProtocols = try readALPN(&data, "ClientHello.application_layer_protocol_negotiation")
            case TLSExtensionType.supportedVersions:
                supportedVersions = try readSupportedVersions(&data)
            case TLSExtensionType.preSharedKey:
                offersPreSharedKey = true
            case TLSExtensionType.sessionTicket:
                offersSessionTicket = !data.isAtEnd
            default:
                break
            }
        }
    }
}

/// A legacy session ID: a 1-byte length of at most 32.
func readSessionID(_ reader: inout ByteReader, _ field: String) throws(TLSParseError) -> [UInt8] {
    var id = try reader.readVector(lengthBytes: 1, field)
    guard id.remaining <= 32 else { throw .badLength(field: field, declared: id.remaining, available: 32) }
    return Array(id.readRest())
}

/// An ALPN ProtocolNameList (RFC 7301 3.1): a 2-byte list length, then 1-byte-length names, none empty.
func readALPN(_ data: inout ByteReader, _ field: String) throws(TLSParseError) -> [String] {
    var list = try data.readVector(lengthBytes: 2, field)
    try data.expectEnd(field)
    var names: [String] = []
    while !list.isAtEnd {
        var name = try list.readVector(lengthBytes: 1, field)
        guard name.remaining > 0 else { throw .badLength(field: field, declared: 0, available: list.remaining) }
        let bytes = name.readRest()
        if bytes.count == 2, isGREASE(UInt16(bytes[bytes.startIndex]) << 8 | UInt16(bytes[bytes.startIndex + 1])) {
            continue
        }
        names.append(String(decoding: bytes, as: UTF8.self))
    }
    return names
}

/// The host_name of a ServerNameList (RFC 6066 3); other name types are skipped.
private func readServerName(_ data: inout ByteReader) throws(TLSParseError) -> String? {
    var list = try data.readVector(lengthBytes: 2, "ClientHello.server_name_list")
    try data.expectEnd("ClientHello.server_name")
    var hostName: String?
    while !list.isAtEnd {
        let nameType = try list.readUInt8("ClientHello.server_name.name_type")
        var name = try list.readVector(lengthBytes: 2, "ClientHello.server_name.name")
        guard nameType == 0 else { continue }
        let bytes = name.readRest()
        guard hostName == nil, !bytes.isEmpty, bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .invalidServerName
        }
        hostName = String(decoding: bytes, as: UTF8.self)
    }
    return hostName
}

/// The ClientHello form of supported_versions (RFC 8446 4.2.1): a 1-byte list length, then 2-byte versions.
private func readSupportedVersions(_ data: inout ByteReader) throws(TLSParseError) -> [TLSVersion] {
    let field = "ClientHello.supported_versions"
    var list = try data.readVector(lengthBytes: 1, field)
    try data.expectEnd(field)
    guard list.remaining % 2 == 0 else { throw .badLength(field: field, declared: list.remaining, available: list.remaining) }
    var versions: [TLSVersion] = []
    while !list.isAtEnd {
        let version = try list.readUInt16(field)
        if !isGREASE(version) { versions.append(TLSVersion(rawValue: version)) }
    }
    return versions
}
