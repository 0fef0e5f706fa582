/// The hello extension types chainwatch reads (IANA "TLS ExtensionType Values"); all others are skipped.
enum TLSExtensionType {
    static let serverName: UInt16 = 0
    static let statusRequest: UInt16 = 5
    static let supportedGroups: UInt16 = 10
    static let signatureAlgorithms: UInt16 = 13
    static let alpn: UInt16 = 16
    static let sessionTicket: UInt16 = 35
    static let preSharedKey: UInt16 = 41
    static let earlyData: UInt16 = 42
    static let supportedVersions: UInt16 = 43
    static let keyShare: UInt16 = 51
}
