/// A TLS protocol version as it travels on the wire (`0x0303` is TLS 1.2).
public struct TLSVersion: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let sslv3 = TLSVersion(rawValue: 0x0300)
    public static let tls1_0 = TLSVersion(rawValue: 0x0301)
    public static let tls1_1 = TLSVersion(rawValue: 0x0302)
    public static let tls1_2 = TLSVersion(rawValue: 0x0303)
    public static let tls1_3 = TLSVersion(rawValue: 0x0304)

    /// OpenSSL's name (`SSLv3`, `TLSv1`, `TLSv1.1`, `TLSv1.2`, `TLSv1.3`), else the hex value (`0x7F1C`).
    public var name: String {
        switch self {
        case .sslv3: "SSLv3"
        case .tls1_0: "TLSv1"
        case .tls1_1: "TLSv1.1"
        case .tls1_2: "TLSv1.2"
        case .tls1_3: "TLSv1.3"
        default: rawValue.hexDescription
        }
    }

    public var description: String { name }

    public static func < (a: TLSVersion, b: TLSVersion) -> Bool { a.rawValue < b.rawValue }
}
