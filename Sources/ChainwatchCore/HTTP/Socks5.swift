/// SOCKS version 5 (RFC 1928) as chainwatch serves it on a `--socks` listener: no authentication, the CONNECT command
/// only, to a domain name, an IPv4 or an IPv6 address. What follows the request is a tunnel like a CONNECT's, with
/// the same inspection. Pure: bytes in, the next step out.
public enum Socks5 {
    /// The reply codes of RFC 1928 §6.
    public enum Reply: UInt8, Sendable {
        case succeeded = 0, generalFailure = 1, notAllowed = 2, networkUnreachable = 3, hostUnreachable = 4,
             connectionRefused = 5, ttlExpired = 6, commandNotSupported = 7, addressTypeNotSupported = 8

        /// The reply for a refusal chainwatch words as an HTTP status on its HTTP listener.
        public init(status: Int) {
            switch status {
            case 403: self = .notAllowed
            case 502: self = .connectionRefused
            case 504: self = .hostUnreachable
            default: self = .generalFailure
            }
        }
    }

    /// What the client's bytes read so far lead to.
    public enum Step: Equatable, Sendable {
        /// Not enough bytes yet.
        case needMore
        /// Answer the greeting with `reply` (the method chosen) and read on; `consumed` bytes were the greeting.
        case chooseMethod(reply: [UInt8], consumed: Int)
        /// The request: connect to `target`; `consumed` bytes were the request (anything after them is the tunnel's).
        case connect(Authority, consumed: Int)
        /// Answer with `reply` (nil: nothing a client of this version reads) and close; `reason` for the logs.
        case refuse(reply: [UInt8]?, reason: String)
    }

    /// The reply to a request: `code`, and an IPv4 bound address of zeros (a client has no use for chainwatch's own).
    public static func reply(_ code: Reply) -> [UInt8] { [5, code.rawValue, 0, 1, 0, 0, 0, 0, 0, 0] }

    /// "No acceptable methods": the greeting offered no method chainwatch serves.
    public static let noAcceptableMethods: [UInt8] = [5, 0xFF]

    /// The most bytes a greeting (2 + 255) or a request (6 + 1 + 255) can take.
    public static let maxMessage = 262

    /// Reads the greeting and then the request, from the client's buffered bytes not consumed yet.
    public struct Reader: Sendable {
        /// Whether the greeting was answered (a refusal after it is a request's reply).
        public private(set) var greeted = false

        public init() {}

        public mutating func read(_ bytes: [UInt8]) -> Step {
            guard let version = bytes.first else { return .needMore }
            guard version == 5 else {
                if !greeted, version == 4 {   // SOCKS 4: its own "request rejected" reply, so the client says why
                    return .refuse(reply: [0, 0x5B, 0, 0, 0, 0, 0, 0], reason: "SOCKS version 4 is not served (SOCKS 5 only)")
                }
                return .refuse(reply: nil, reason: "not SOCKS 5 (first byte \(version))")
            }
            return greeted ? request(bytes) : greeting(bytes)
        }

        private mutating func greeting(_ bytes: [UInt8]) -> Step {
            guard bytes.count >= 2 else { return .needMore }
            let count = Int(bytes[1])
            guard count > 0 else { return .refuse(reply: Socks5.noAcceptableMethods, reason: "the SOCKS greeting offers no method") }
            guard bytes.count >= 2 + count else { return .needMore }
            guard bytes[2..<(2 + count)].contains(0) else {
                return .refuse(reply: Socks5.noAcceptableMethods,
                               reason: "the SOCKS greeting offers no method chainwatch serves (only 0, no authentication)")
            }
            greeted = true
            return .chooseMethod(reply: [5, 0], consumed: 2 + count)
        }

        private func request(_ bytes: [UInt8]) -> Step {
            guard bytes.count >= 4 else { return .needMore }
            guard bytes[1] == 1 else {
                return .refuse(reply: Socks5.reply(.commandNotSupported), reason: "SOCKS command \(bytes[1]) is not served (CONNECT only)")
            }
            guard bytes[2] == 0 else { return .refuse(reply: Socks5.reply(.generalFailure), reason: "SOCKS request with a reserved byte of \(bytes[2])") }
            let host: String
            let start: Int
            switch bytes[3] {
            case 1:
                start = 8
                guard bytes.count >= start + 2 else { return .needMore }
                host = bytes[4..<8].map(String.init).joined(separator: ".")
            case 3:
                guard bytes.count >= 5 else { return .needMore }
                let length = Int(bytes[4])
                start = 5 + length
                guard bytes.count >= start + 2 else { return .needMore }
                let name = bytes[5..<start]
                guard length > 0, let authority = Authority.parse(String(decoding: name, as: UTF8.self) + ":1"),
                      name.allSatisfy({ $0 < 0x80 }) else {
                    return .refuse(reply: Socks5.reply(.hostUnreachable), reason: "the SOCKS request names no valid host")
                }
                host = authority.host
            case 4:
                start = 20
                guard bytes.count >= start + 2 else { return .needMore }
                host = Socks5.ipv6Text(Array(bytes[4..<20]))
            default:
                return .refuse(reply: Socks5.reply(.addressTypeNotSupported), reason: "SOCKS address type \(bytes[3]) is not one of 1, 3, 4")
            }
            let port = UInt16(bytes[start]) << 8 | UInt16(bytes[start + 1])
            guard port != 0 else { return .refuse(reply: Socks5.reply(.generalFailure), reason: "the SOCKS request names port 0") }
            return .connect(Authority(host: host, port: port), consumed: start + 2)
        }
    }

    /// An IPv6 address in RFC 5952's text form (lowercase, the longest run of two or more zero groups as `::`), as a
    /// CONNECT to `[::1]:443` names it: the same upstream is the same host.
    static func ipv6Text(_ bytes: [UInt8]) -> String {
        let groups = (0..<8).map { Int(bytes[2 * $0]) << 8 | Int(bytes[2 * $0 + 1]) }
        var best = (start: -1, length: 0)
        var run = (start: -1, length: 0)
        for (i, group) in groups.enumerated() {
            if group == 0 {
                run = run.start < 0 ? (i, 1) : (run.start, run.length + 1)
                if run.length > best.length { best = run }
            } else {
                run = (-1, 0)
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard best.length >= 2 else { return hex.joined(separator: ":") }
        let head = hex[..<best.start].joined(separator: ":")
        let tail = hex[(best.start + best.length)...].joined(separator: ":")
        return head + "::" + tail
    }
}
