extension ClientHello {
    /// Parses a ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2; the handshake header already removed).
    init(parsing body: ArraySlice<UInt8>) throws(TLSParseError) {
        var reader = ByteReader(body)
        message = [HandshakeType.clientHello, UInt8(body.count >> 16 & 0xFF), UInt8(body.count >> 8 & 0xFF), UInt8(body.count & 0xFF)] + body
        legacyVersion = TLSVersion(rawValue: try reader.readUInt16("ClientHello.legacy_version"))
        random = Array(try reader.readBytes(32, "ClientHello.random"))
        sessionID = try reader.readSessionID("ClientHello.legacy_session_id")

        // An odd-length list ends in half a suite: `truncatedField`.
        var suites = try reader.readVector(lengthBytes: 2, "ClientHello.cipher_suites")
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
        extensionTypes = []
        supportedGroups = []
        keyShareGroups = []
        signatureAlgorithms = []
        offersEarlyData = false
        firstALPNBytes = []
        // Hellos of SSLv3-era clients end here, without an extensions block.
        guard !reader.isAtEnd else { return }
        var extensions = try reader.readVector(lengthBytes: 2, "ClientHello.extensions")
        try reader.expectEnd("ClientHello")
        // Seen extension types: a bit each for the registry's first 64, a short list for the rest (GREASE,
        // renegotiation_info): no hashing or set growth per hello.
        var seenLow: UInt64 = 0
        var seenHigh: [UInt16] = []
        extensionTypes.reserveCapacity(min(extensions.remaining / 4, 32))   // one allocation for a browser's hello
        while !extensions.isAtEnd {
            let type = try extensions.readUInt16("ClientHello.extension_type")
            var data = try extensions.readVector(lengthBytes: 2, "ClientHello.extension_data")
            if type < 64 {
                let bit: UInt64 = 1 << UInt64(type)
                guard seenLow & bit == 0 else { throw .duplicateExtension(type) }
                seenLow |= bit
            } else {
                guard !seenHigh.contains(type) else { throw .duplicateExtension(type) }
                seenHigh.append(type)
            }
            if !isGREASE(type) { extensionTypes.append(type) }
            switch type {
            case TLSExtensionType.serverName:
                serverName = try data.readServerName()
            case TLSExtensionType.alpn:
                let names = try data.readALPNNames("ClientHello.application_layer_protocol_negotiation")
                alpnProtocols = names.map { String(decoding: $0, as: UTF8.self) }
                firstALPNBytes = Array(names.first ?? [])
            case TLSExtensionType.supportedGroups:
                supportedGroups = try data.readUInt16List(lengthBytes: 2, "ClientHello.supported_groups")
            case TLSExtensionType.signatureAlgorithms:
                signatureAlgorithms = try data.readUInt16List(lengthBytes: 2, "ClientHello.signature_algorithms")
            case TLSExtensionType.keyShare:
                keyShareGroups = try data.readKeyShareGroups()
            case TLSExtensionType.earlyData:
                offersEarlyData = true
            case TLSExtensionType.supportedVersions:
                supportedVersions = try data.readSupportedVersions()
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

extension ClientHello {
    /// The longest server_name accepted: a DNS name is at most 255 octets (RFC 1035 2.3.4). Longer names are not
    /// names, and each one would be kept per tunnel, written into alert lines and matched against every rule.
    public static let maxServerNameLength = 255

    /// Parses one whole handshake message holding a ClientHello: type 1, a 3-byte length, then exactly that many
    /// body bytes (no record header). For hellos chainwatch builds itself, such as a probe's, taken from its
    /// handshake transcript. Throws `unexpectedHandshakeType` for another message type, `messageTooLong` past
    /// `TLSObserver.maxHandshakeMessageLength`, `badLength` when the length disagrees with the bytes given.
    public static func parse(handshakeMessage: some Collection<UInt8>) throws(TLSParseError) -> ClientHello {
        try ClientHello(parsing: ByteReader.body(ofHandshakeMessage: handshakeMessage, type: HandshakeType.clientHello))
    }
}

extension ByteReader {
    /// The body of one whole handshake message of `type` (type, 3-byte length, exactly that many bytes), with the
    /// errors `ClientHello.parse(handshakeMessage:)` documents.
    static func body(ofHandshakeMessage message: some Collection<UInt8>, type expected: UInt8) throws(TLSParseError) -> ArraySlice<UInt8> {
        var reader = ByteReader(ArraySlice(message))
        let type = try reader.readUInt8("Handshake.msg_type")
        guard type == expected else { throw .unexpectedHandshakeType(type) }
        let length = try reader.readUInt24("Handshake.length")
        guard length <= TLSObserver.maxHandshakeMessageLength else {
            throw .messageTooLong(type: type, length: length, limit: TLSObserver.maxHandshakeMessageLength)
        }
        guard length == reader.remaining else {
            throw .badLength(field: "Handshake.length", declared: length, available: reader.remaining)
        }
        return reader.readRest()
    }
}

private extension ByteReader {
    /// The groups of a ClientHello key_share body (RFC 8446 4.2.8): a 2-byte list of entries, each a group and a
    /// 2-byte-length key; GREASE groups left out. Nothing may follow the list.
    mutating func readKeyShareGroups() throws(TLSParseError) -> [UInt16] {
        let field = "ClientHello.key_share"
        var list = try readVector(lengthBytes: 2, field)
        try expectEnd(field)
        var groups: [UInt16] = []
        while !list.isAtEnd {
            let group = try list.readUInt16(field)
            _ = try list.readVector(lengthBytes: 2, "ClientHello.key_share.key_exchange")
            if !isGREASE(group) { groups.append(group) }
        }
        return groups
    }

    /// The host_name of a server_name extension body (RFC 6066 3); other name types are skipped. Nothing may follow.
    mutating func readServerName() throws(TLSParseError) -> String? {
        var list = try readVector(lengthBytes: 2, "ClientHello.server_name_list")
        try expectEnd("ClientHello.server_name")
        var hostName: String?
        while !list.isAtEnd {
            let nameType = try list.readUInt8("ClientHello.server_name.name_type")
            var name = try list.readVector(lengthBytes: 2, "ClientHello.server_name.name")
            guard nameType == 0 else { continue }
            let bytes = name.readRest()
            guard hostName == nil, !bytes.isEmpty, bytes.count <= ClientHello.maxServerNameLength,
                  bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw .invalidServerName
            }
            hostName = String(decoding: bytes, as: UTF8.self)
        }
        return hostName
    }

    /// The ClientHello form of a supported_versions body (RFC 8446 4.2.1): a 1-byte list length, then 2-byte versions.
    /// GREASE versions are left out.
    mutating func readSupportedVersions() throws(TLSParseError) -> [TLSVersion] {
        let field = "ClientHello.supported_versions"
        var list = try readVector(lengthBytes: 1, field)
        try expectEnd(field)
        var versions: [TLSVersion] = []
        while !list.isAtEnd {
            let version = try list.readUInt16(field)
            if !isGREASE(version) { versions.append(TLSVersion(rawValue: version)) }
        }
        return versions
    }
}
