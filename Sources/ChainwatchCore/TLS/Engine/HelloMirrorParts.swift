/// A ClientHello split into its fields, each kept as the bytes sent, so that rewriting a few parts and encoding it
/// again reproduces every other byte. Shared by the mirror, the retry and `ClientHelloShape`.
struct HelloParts: Sendable, Equatable {
    /// One extension: its type and body, as sent.
    struct Extension: Sendable, Equatable {
        var type: UInt16
        var body: [UInt8]
    }

    var legacyVersion: UInt16
    var random: [UInt8]
    var sessionID: [UInt8]
    var cipherSuites: [UInt16]
    var compressionMethods: [UInt8]
    /// nil: the hello ended without an extensions block (SSLv3-era clients).
    var extensions: [Extension]?

    /// Parses a ClientHello handshake message, 4-byte header included; the header's length must match exactly.
    init(message: [UInt8]) throws(HelloMirrorError) {
        do {
            self = try Self.parse(message)
        } catch {
            throw HelloMirrorError(error)
        }
    }

    private init(legacyVersion: UInt16, random: [UInt8], sessionID: [UInt8], cipherSuites: [UInt16],
                 compressionMethods: [UInt8], extensions: [Extension]?) {
        self.legacyVersion = legacyVersion
        self.random = random
        self.sessionID = sessionID
        self.cipherSuites = cipherSuites
        self.compressionMethods = compressionMethods
        self.extensions = extensions
    }

    private static func parse(_ message: [UInt8]) throws(TLSParseError) -> HelloParts {
        var reader = ByteReader(message[...])
        let type = try reader.readUInt8("handshake type")
        guard type == 1 else { throw .unexpectedHandshakeType(type) }
        var body = try reader.readVector(lengthBytes: 3, "ClientHello")
        try reader.expectEnd("ClientHello handshake message")

        let version = try body.readUInt16("ClientHello.legacy_version")
        let random = Array(try body.readBytes(32, "ClientHello.random"))
        let sessionID = try body.readSessionID("ClientHello.legacy_session_id")
        var suiteList = try body.readVector(lengthBytes: 2, "ClientHello.cipher_suites")
        var suites: [UInt16] = []
        while !suiteList.isAtEnd { suites.append(try suiteList.readUInt16("ClientHello.cipher_suites")) }
        var compression = try body.readVector(lengthBytes: 1, "ClientHello.legacy_compression_methods")
        let methods = Array(compression.readRest())
        guard !body.isAtEnd else {
            return HelloParts(legacyVersion: version, random: random, sessionID: sessionID, cipherSuites: suites,
                              compressionMethods: methods, extensions: nil)
        }
        var list = try body.readVector(lengthBytes: 2, "ClientHello.extensions")
        try body.expectEnd("ClientHello")
        var extensions: [Extension] = []
        while !list.isAtEnd {
            let type = try list.readUInt16("ClientHello.extension_type")
            var data = try list.readVector(lengthBytes: 2, "ClientHello.extension_data")
            guard !extensions.contains(where: { $0.type == type }) else { throw .duplicateExtension(type) }
            extensions.append(Extension(type: type, body: Array(data.readRest())))
        }
        return HelloParts(legacyVersion: version, random: random, sessionID: sessionID, cipherSuites: suites,
                          compressionMethods: methods, extensions: extensions)
    }

    /// The handshake message: type 1, 3-byte length, body.
    func encoded() -> [UInt8] {
        var body: [UInt8] = []
        body.appendUInt16(legacyVersion)
        body += random
        body.append(UInt8(sessionID.count))
        body += sessionID
        body.appendUInt16(UInt16(cipherSuites.count * 2))
        for suite in cipherSuites { body.appendUInt16(suite) }
        body.append(UInt8(compressionMethods.count))
        body += compressionMethods
        if let extensions {
            body.appendUInt16(UInt16(extensions.reduce(0) { $0 + 4 + $1.body.count }))
            for ext in extensions {
                body.appendUInt16(ext.type)
                body.appendUInt16(UInt16(ext.body.count))
                body += ext.body
            }
        }
        return [1, UInt8(body.count >> 16 & 0xFF), UInt8(body.count >> 8 & 0xFF), UInt8(body.count & 0xFF)] + body
    }

    /// The index of the extension of `type`, if present.
    func index(of type: UInt16) -> Int? { extensions?.firstIndex { $0.type == type } }

    /// The body of the extension of `type`, if present.
    func body(of type: UInt16) -> [UInt8]? { index(of: type).flatMap { extensions?[$0].body } }
}

extension Array where Element == UInt8 {
    /// Appends `value` big-endian.
    mutating func appendUInt16(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xFF))
    }
}
