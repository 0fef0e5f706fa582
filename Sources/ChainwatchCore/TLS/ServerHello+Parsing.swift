extension ServerHello {
    /// Parses a ServerHello or HelloRetryRequest body (RFC 8446 4.1.3, RFC 5246 7.4.1.3).
    init(parsing body: ArraySlice<UInt8>) throws(TLSParseError) {
        var reader = ByteReader(body)
        legacyVersion = TLSVersion(rawValue: try reader.readUInt16("ServerHello.legacy_version"))
        random = Array(try reader.readBytes(32, "ServerHello.random"))
        sessionID = try reader.readSessionID("ServerHello.legacy_session_id_echo")
        cipherSuite = CipherSuite(rawValue: try reader.readUInt16("ServerHello.cipher_suite"))
        _ = try reader.readUInt8("ServerHello.legacy_compression_method")
        isHelloRetryRequest = random == Self.helloRetryRequestRandom

        version = legacyVersion
        alpnProtocol = nil
        acceptsPreSharedKey = false
        extensionTypes = []
        keyShareGroup = nil
        guard !reader.isAtEnd else { return }
        var extensions = try reader.readVector(lengthBytes: 2, "ServerHello.extensions")
        try reader.expectEnd("ServerHello")
        var seen = Set<UInt16>()
        while !extensions.isAtEnd {
            let type = try extensions.readUInt16("ServerHello.extension_type")
            var data = try extensions.readVector(lengthBytes: 2, "ServerHello.extension_data")
            guard seen.insert(type).inserted else { throw .duplicateExtension(type) }
            if !isGREASE(type) { extensionTypes.append(type) }
            switch type {
            case TLSExtensionType.supportedVersions:
                version = TLSVersion(rawValue: try data.readUInt16("ServerHello.supported_versions"))
                try data.expectEnd("ServerHello.supported_versions")
            case TLSExtensionType.alpn:
                let field = "ServerHello.application_layer_protocol_negotiation"
                let names = try data.readALPN(field)
                guard names.count == 1 else { throw .badLength(field: field, declared: names.count, available: 1) }
                alpnProtocol = names[0]
            case TLSExtensionType.preSharedKey:
                acceptsPreSharedKey = true
            case TLSExtensionType.keyShare:
                // RFC 8446 4.2.8: a HelloRetryRequest names only the selected group; a ServerHello sends one entry.
                let field = "ServerHello.key_share"
                keyShareGroup = try data.readUInt16(field)
                if !isHelloRetryRequest { _ = try data.readVector(lengthBytes: 2, "ServerHello.key_share.key_exchange") }
                try data.expectEnd(field)
            default:
                break
            }
        }
    }
}

extension ServerHello {
    /// Parses one whole handshake message (type 2, 3-byte length, body): the probe's own ServerHello. Errors as for
    /// `ClientHello.parse(handshakeMessage:)`.
    public static func parse(handshakeMessage: some Collection<UInt8>) throws(TLSParseError) -> ServerHello {
        try ServerHello(parsing: ByteReader.body(ofHandshakeMessage: handshakeMessage, type: HandshakeType.serverHello))
    }
}
