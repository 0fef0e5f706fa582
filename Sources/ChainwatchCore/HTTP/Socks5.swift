/// SOCKS version 5 (RFC 1928) as chainwatch serves it on a `--socks` listener: no authentication, or username and
/// password (RFC 1929) when the listener has credentials, and the CONNECT command only, to a domain name, an IPv4 or
/// an IPv6 address. What follows the request is a tunnel like a CONNECT's, with the same inspection. Pure: bytes in,
/// the next step out.
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
        /// Answer with `reply` (the method chosen, or the password accepted) and read on; `consumed` bytes were the
        /// greeting or the username/password message.
        case answer(reply: [UInt8], consumed: Int)
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

    /// A credentials file that cannot be read: its path, line and problem.
    public struct CredentialsError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The users a listener admits (`--socks-credentials`): each name with the SHA-256 of its password (a user name
    /// has no colon; the password is everything after the first).
    public struct Credentials: Sendable, Hashable {
        private var digests: [String: [UInt8]] = [:]

        /// Reads `user:password` lines (`#` comments and blank lines skipped); an error names the line and problem.
        public init(text: String, path: String) throws(CredentialsError) {
            // Bytes, not Characters: "\r\n" is one Character, and a password is bytes (RFC 1929).
            for (index, raw) in Array(text.utf8).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
                let line = raw.last == UInt8(ascii: "\r") ? raw.dropLast() : raw[...]
                if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) || line.first == UInt8(ascii: "#") { continue }
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                    throw CredentialsError("\(path):\(index + 1): expected user:password")
                }
                let user = String(decoding: line[..<colon], as: UTF8.self), password = Array(line[(colon + 1)...])
                guard (1...255).contains(user.utf8.count), (1...255).contains(password.count) else {
                    throw CredentialsError("\(path):\(index + 1): a user name and a password are each 1 to 255 bytes (RFC 1929)")
                }
                guard digests[user] == nil else { throw CredentialsError("\(path):\(index + 1): user '\(user)' listed twice") }
                digests[user] = SHA256.hash(password)
            }
            guard !digests.isEmpty else { throw CredentialsError("\(path): no user:password line") }
        }

        /// Whether `password` is `user`'s, compared without an early exit.
        func admits(user: String, password: some Collection<UInt8>) -> Bool {
            let given = SHA256.hash(password)
            let known = digests[user] ?? [UInt8](repeating: 0, count: SHA256.digestLength)
            var difference: UInt8 = digests[user] == nil ? 1 : 0
            for (a, b) in zip(given, known) { difference |= a ^ b }
            return difference == 0
        }
    }

    /// Reads the greeting, the username and password when the listener has credentials, then the request, from the
    /// client's buffered bytes not consumed yet.
    public struct Reader: Sendable {
        private enum Stage: Sendable { case greeting, password, request }
        private var stage = Stage.greeting
        private let credentials: Credentials?
        /// The user a password admitted, for the logs.
        public private(set) var user: String?

        public init(credentials: Credentials? = nil) { self.credentials = credentials }

        /// Whether the greeting was answered (a refusal after it is a request's reply).
        public var greeted: Bool { stage != .greeting }

        /// What a client at this stage can read as a refusal for a proxy error worded as an HTTP status.
        public func refusal(status: Int) -> [UInt8] {
            switch stage {
            case .greeting: Socks5.noAcceptableMethods
            case .password: [1, 1]
            case .request: Socks5.reply(Reply(status: status))
            }
        }

        public mutating func read(_ bytes: [UInt8]) -> Step {
            guard let version = bytes.first else { return .needMore }
            if stage == .password { return password(bytes) }
            guard version == 5 else {
                if stage == .greeting, version == 4 {   // SOCKS 4: its own "request rejected" reply, so the client says why
                    return .refuse(reply: [0, 0x5B, 0, 0, 0, 0, 0, 0], reason: "SOCKS version 4 is not served (SOCKS 5 only)")
                }
                return .refuse(reply: nil, reason: "not SOCKS 5 (first byte \(version))")
            }
            return stage == .request ? request(bytes) : greeting(bytes)
        }

        private mutating func greeting(_ bytes: [UInt8]) -> Step {
            guard bytes.count >= 2 else { return .needMore }
            let count = Int(bytes[1])
            guard count > 0 else { return .refuse(reply: Socks5.noAcceptableMethods, reason: "the SOCKS greeting offers no method") }
            guard bytes.count >= 2 + count else { return .needMore }
            let method: UInt8 = credentials == nil ? 0 : 2
            guard bytes[2..<(2 + count)].contains(method) else {
                let wanted = credentials == nil ? "0, no authentication" : "2, username/password: this listener has --socks-credentials"
                return .refuse(reply: Socks5.noAcceptableMethods, reason: "the SOCKS greeting does not offer method \(wanted)")
            }
            stage = credentials == nil ? .request : .password
            return .answer(reply: [5, method], consumed: 2 + count)
        }

        /// RFC 1929: version 1, the user name and the password, each with its length.
        private mutating func password(_ bytes: [UInt8]) -> Step {
            guard bytes[0] == 1 else { return .refuse(reply: [1, 1], reason: "SOCKS username/password message of version \(bytes[0])") }
            guard bytes.count >= 2 else { return .needMore }
            let userEnd = 2 + Int(bytes[1])
            guard bytes.count >= userEnd + 1 else { return .needMore }
            let end = userEnd + 1 + Int(bytes[userEnd])
            guard bytes.count >= end else { return .needMore }
            let name = String(decoding: bytes[2..<userEnd], as: UTF8.self)
            guard let credentials, credentials.admits(user: name, password: bytes[(userEnd + 1)..<end]) else {
                return .refuse(reply: [1, 1], reason: "SOCKS username/password refused (user '\(name.prefix(64))')")
            }
            user = name
            stage = .request
            return .answer(reply: [1, 0], consumed: end)
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
