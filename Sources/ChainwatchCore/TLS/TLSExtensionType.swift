/// The hello extension types chainwatch reads (IANA "TLS ExtensionType Values"); all others are skipped.
enum TLSExtensionType {
    static let serverName: UInt16 = 0
    static let alpn: UInt16 = 16
    static let sessionTicket: UInt16 = 35
    static let preSharedKey: UInt16 = 41
    static let supportedVersions: UInt16 = 43
}
