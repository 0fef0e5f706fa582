/// What a client offered in its ClientHello: the facts chainwatch logs, matches rules on, and repeats in a probe.
/// GREASE values are left out of every list.
public struct ClientHello: Equatable, Sendable {
    /// The version field of the hello itself (TLS 1.3 clients say TLS 1.2 here).
    public var legacyVersion: TLSVersion
    /// The 32-byte client random.
    public var random: [UInt8]
    /// The legacy session ID (0-32 bytes): a TLS 1.2 resumption attempt, or a random value in TLS 1.3 compatibility mode.
    public var sessionID: [UInt8]
    /// Offered cipher suites, in the client's order of preference.
    public var cipherSuites: [CipherSuite]
    /// The SNI host name (server_name extension, name type host_name), as sent; nil when absent (IP literal clients).
    public var serverName: String?
    /// The versions of the supported_versions extension, in the client's order; empty when the extension is absent.
    public var supportedVersions: [TLSVersion]
    /// The ALPN protocol names (`h2`, `http/1.1`), in order, decoded as UTF-8 (registered names are ASCII).
    public var alpnProtocols: [String]
    /// Whether the client offers a TLS 1.3 pre-shared key (pre_shared_key extension): a resumption attempt.
    public var offersPreSharedKey: Bool
    /// Whether the client presents a TLS 1.2 session ticket (a non-empty session_ticket extension).
    public var offersSessionTicket: Bool

    public init(legacyVersion: TLSVersion, random: [UInt8], sessionID: [UInt8], cipherSuites: [CipherSuite],
                serverName: String?, supportedVersions: [TLSVersion], alpnProtocols: [String],
                offersPreSharedKey: Bool, offersSessionTicket: Bool) {
        self.legacyVersion = legacyVersion; self.random = random; self.sessionID = sessionID
        self.cipherSuites = cipherSuites; self.serverName = serverName; self.supportedVersions = supportedVersions
        self.alpnProtocols = alpnProtocols; self.offersPreSharedKey = offersPreSharedKey
        self.offersSessionTicket = offersSessionTicket
    }

    /// The newest version offered: the highest of supported_versions, else the legacy version.
    public var maximumVersion: TLSVersion { supportedVersions.max() ?? legacyVersion }
}
