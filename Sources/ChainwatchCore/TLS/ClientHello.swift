/// What a client offered in its ClientHello: the facts chainwatch logs, matches rules on, and repeats in a probe.
/// GREASE values are left out of every list.
public struct ClientHello: Hashable, Sendable {
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
    /// The extension types, in the client's order.
    public var extensionTypes: [UInt16]
    /// The named groups of the supported_groups extension, in the client's order; empty when absent.
    public var supportedGroups: [UInt16]
    /// The groups of the key_share extension's entries, in order; empty when absent (TLS 1.2 clients).
    public var keyShareGroups: [UInt16]
    /// The signature_algorithms extension's schemes, in the client's order; empty when absent.
    public var signatureAlgorithms: [UInt16]
    /// Whether the client sends TLS 1.3 0-RTT data (early_data extension present).
    public var offersEarlyData: Bool
    /// The bytes of the first ALPN protocol name as sent (`alpnProtocols` decodes names as UTF-8, which is lossy
    /// for the rare non-UTF-8 name); JA4 reads its first and last byte.
    var firstALPNBytes: [UInt8]
    /// The whole handshake message as the client sent it (type, length, body): what the probe mirrors. Empty for a
    /// hello built from its fields (tests).
    public internal(set) var message: [UInt8] = []
    /// The record-layer version of the record that carried the hello's first bytes (0x0301 for most stacks).
    public var recordVersion: UInt16 = 0x0301

    public init(legacyVersion: TLSVersion, random: [UInt8], sessionID: [UInt8], cipherSuites: [CipherSuite],
                serverName: String?, supportedVersions: [TLSVersion], alpnProtocols: [String],
                offersPreSharedKey: Bool, offersSessionTicket: Bool, extensionTypes: [UInt16] = [],
                supportedGroups: [UInt16] = [], keyShareGroups: [UInt16] = [], signatureAlgorithms: [UInt16] = [],
                offersEarlyData: Bool = false) {
        self.legacyVersion = legacyVersion; self.random = random; self.sessionID = sessionID
        self.cipherSuites = cipherSuites; self.serverName = serverName; self.supportedVersions = supportedVersions
        self.alpnProtocols = alpnProtocols; self.offersPreSharedKey = offersPreSharedKey
        self.offersSessionTicket = offersSessionTicket; self.extensionTypes = extensionTypes
        self.supportedGroups = supportedGroups; self.keyShareGroups = keyShareGroups
        self.signatureAlgorithms = signatureAlgorithms; self.offersEarlyData = offersEarlyData
        self.firstALPNBytes = Array((alpnProtocols.first ?? "").utf8)
    }

    /// The newest version offered: the highest of supported_versions, else the legacy version.
    public var maximumVersion: TLSVersion { supportedVersions.max() ?? legacyVersion }
}
