/// A TLS protocol version as it travels on the wire (`0x0303` is TLS 1.2). The one version type: the parsers, the
/// probe, the policy's protocol floor and the alert line all use it.
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

    /// ECS `tls.version`: `3.0` (SSL), `1.0` … `1.3`, else the hex value.
    public var ecsName: String {
        switch self {
        case .sslv3: "3.0"
        case .tls1_0: "1.0"
        case .tls1_1: "1.1"
        case .tls1_2: "1.2"
        case .tls1_3: "1.3"
        default: rawValue.hexDescription
        }
    }

    /// For people: `TLS 1.2`, `SSL 3.0`, else the hex value.
    public var description: String {
        switch self {
        case .sslv3: "SSL 3.0"
        case .tls1_0, .tls1_1, .tls1_2, .tls1_3: "TLS \(ecsName)"
        default: rawValue.hexDescription
        }
    }

    /// Parses a policy's `1.0` … `1.3`, `TLS 1.2`, `tls1.2` or `TLSv1.2`.
    public init?(policyText text: String) {
        var t = HostName.normalize(text)
        for prefix in ["tlsv", "tls ", "tls"] where t.hasPrefix(prefix) { t = String(t.dropFirst(prefix.count)); break }
        switch t {
        case "1.0", "1": self = .tls1_0
        case "1.1": self = .tls1_1
        case "1.2": self = .tls1_2
        case "1.3": self = .tls1_3
        default: return nil
        }
    }

    public static func < (a: TLSVersion, b: TLSVersion) -> Bool { a.rawValue < b.rawValue }
}
