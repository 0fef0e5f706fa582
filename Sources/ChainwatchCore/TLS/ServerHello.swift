/// What a server chose in its ServerHello (or HelloRetryRequest, which has the same shape).
public struct ServerHello: Hashable, Sendable {
    /// SHA-256("HelloRetryRequest"): the random of a HelloRetryRequest (RFC 8446 4.1.3).
    public static let helloRetryRequestRandom: [UInt8] = [
        0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
        0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
    ]

    /// The version field of the hello itself (TLS 1.3 servers say TLS 1.2 here).
    public var legacyVersion: TLSVersion
    /// The negotiated version: supported_versions when present, else the legacy version.
    public var version: TLSVersion
    /// The 32-byte server random.
    public var random: [UInt8]
    /// The legacy session ID; in TLS 1.2 an echo of the client's non-empty ID means the session is resumed.
    public var sessionID: [UInt8]
    public var cipherSuite: CipherSuite
    /// The ALPN protocol the server picked (TLS 1.2 carries it here; TLS 1.3 in the encrypted EncryptedExtensions).
    public var alpnProtocol: String?
    /// Whether the server accepted a TLS 1.3 pre-shared key (pre_shared_key extension): a resumed session.
    public var acceptsPreSharedKey: Bool
    /// Whether this is a HelloRetryRequest: the server wants another ClientHello, and a real ServerHello follows.
    public var isHelloRetryRequest: Bool
    /// The extension types, in the server's order (GREASE left out, though servers send none).
    public var extensionTypes: [UInt16]
    /// TLS 1.3: the group of the server's key_share; in a HelloRetryRequest, the `selected_group` the client must
    /// retry with. Nil without a key_share extension (TLS 1.2, or a pure pre-shared-key resumption).
    public var keyShareGroup: UInt16?

    public init(legacyVersion: TLSVersion, version: TLSVersion, random: [UInt8], sessionID: [UInt8],
                cipherSuite: CipherSuite, alpnProtocol: String?, acceptsPreSharedKey: Bool, isHelloRetryRequest: Bool,
                extensionTypes: [UInt16] = [], keyShareGroup: UInt16? = nil) {
        self.legacyVersion = legacyVersion; self.version = version; self.random = random; self.sessionID = sessionID
        self.cipherSuite = cipherSuite; self.alpnProtocol = alpnProtocol; self.acceptsPreSharedKey = acceptsPreSharedKey
        self.isHelloRetryRequest = isHelloRetryRequest; self.extensionTypes = extensionTypes
        self.keyShareGroup = keyShareGroup
    }

    /// Whether this hello resumes a session the client offered, so no Certificate will follow:
    /// in TLS 1.3 an accepted pre-shared key; in TLS 1.2 and below an echo of the client's non-empty session ID
    /// (servers echo it for ticket resumption too, RFC 5077 3.4).
    public func resumes(_ clientHello: ClientHello) -> Bool {
        if version >= .tls1_3 { return acceptsPreSharedKey }
        return !sessionID.isEmpty && sessionID == clientHello.sessionID
    }
}
