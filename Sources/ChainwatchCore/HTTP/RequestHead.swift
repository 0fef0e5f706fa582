/// A parsed HTTP/1.x request line and header block, as a forward proxy receives it.
public struct RequestHead: Sendable, Equatable {
    public var method: String
    /// The request target exactly as sent: `host:port` for CONNECT, `http://host/path` in absolute form.
    public var target: String
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String
    /// Header fields in order, names as sent.
    public var headers: [(name: String, value: String)]

    public init(method: String, target: String, version: String, headers: [(name: String, value: String)]) {
        self.method = method; self.target = target; self.version = version; self.headers = headers
    }

    public static func == (a: RequestHead, b: RequestHead) -> Bool {
        a.method == b.method && a.target == b.target && a.version == b.version
            && a.headers.elementsEqual(b.headers) { $0.name == $1.name && $0.value == $1.value }
    }

    /// The first value of a header, case-insensitively.
    public func value(of name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// All comma-separated tokens of every instance of a header, lowercased and trimmed. Read as bytes, the way the
    /// client and server on either side read them: split at the byte `,`, trimmed of SP and HTAB, ASCII letters
    /// lowercased and nothing else. (Read as Unicode, `Transfer-Encoding: chun\u{212A}ed` with a KELVIN SIGN
    /// lowercased to `chunked`, framing a body its peer does not frame; found by fuzzing, FUZZING.md.)
    public func tokens(of name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }
            .flatMap { $0.value.utf8.split(separator: UInt8(ascii: ",")) }
            .map { token in
                let start = token.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? token.endIndex
                let end = token.lastIndex { $0 != 0x20 && $0 != 0x09 }.map { token.index(after: $0) } ?? start
                return String(decoding: token[start..<end].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
            }
            .filter { !$0.isEmpty }
    }
}

/// Why a request head (or an upstream's response head: `ResponseHead`) can never be valid. Each maps to the status a
/// proxy user expects.
public enum RequestHeadError: Error, Sendable, Equatable {
    /// The head is larger than the cap before its blank line: `431`.
    case tooLarge(limit: Int)
    /// More header fields than `RequestHeadParser.maxHeaderCount` (the limit): `431`.
    case tooManyFields(limit: Int)
    /// Not HTTP/1.x syntax: `400`, with what was wrong.
    case malformed(String)

    public var status: Int {
        switch self {
        case .tooLarge, .tooManyFields: 431
        case .malformed: 400
        }
    }
    /// What was wrong with a request's head.
    public var detail: String { detail(of: "request") }

    /// What was wrong, `head` naming whose head it was ("request", "response").
    public func detail(of head: String) -> String {
        switch self {
        case .tooLarge(let limit): "\(head) header exceeds \(limit) bytes"
        case .tooManyFields(let limit): "\(head) header has more than \(limit) fields"
        case .malformed(let why): why
        }
    }
}

/// Splits a request head off the front of a byte stream.
public enum RequestHeadParser {
    /// Largest head accepted, request line and all headers together.
    public static let defaultLimit = 16 * 1024
    /// Most header fields accepted.
    public static let maxHeaderCount = 100

    /// Parses a complete head from the start of `bytes`.
    /// - Returns: nil when the blank line has not arrived yet (and the cap is not reached), else the head and
    ///   how many bytes it took, including the blank line.
    public static func parse(_ bytes: some RandomAccessCollection<UInt8>, limit: Int = defaultLimit)
        throws(RequestHeadError) -> (head: RequestHead, length: Int)?
    {
        let buffer = Array(bytes.prefix(limit + 4))
        guard let end = headEnd(buffer) else {
            try checkIncomplete(buffer, limit: limit)
            return nil
        }
        return try parse(buffer, end: end, limit: limit)
    }

    /// Throws when a head whose blank line has not arrived can already never be valid.
    static func checkIncomplete(_ buffer: [UInt8], limit: Int) throws(RequestHeadError) {
        if buffer.count > limit { throw .tooLarge(limit: limit) }
        // A first byte that cannot start a method is malformed right away (a TLS ClientHello sent to a proxy, say).
        if let first = buffer.first, !isTokenByte(first) { throw .malformed("request does not start with a method") }
    }

    /// Parses the head that ends at `end` (from `headEnd`).
    static func parse(_ buffer: [UInt8], end: (contentEnd: Int, headLength: Int), limit: Int)
        throws(RequestHeadError) -> (head: RequestHead, length: Int)
    {
        if end.headLength > limit { throw .tooLarge(limit: limit) }
        let lines = splitLines(buffer[..<end.contentEnd])
        guard let requestLine = lines.first, !requestLine.isEmpty else { throw .malformed("empty request line") }
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw .malformed("request line is not METHOD TARGET VERSION")
        }
        guard parts[0].allSatisfy(isTokenByte) else { throw .malformed("bad method") }
        guard parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .malformed("bad request target") }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else { throw .malformed("unsupported HTTP version") }

        let headers = try parseFields(lines.dropFirst())
        let head = RequestHead(method: String(decoding: parts[0], as: UTF8.self),
                               target: String(decoding: parts[1], as: UTF8.self), version: version, headers: headers)
        return (head, end.headLength)
    }

    /// Parses header field lines (everything after the start line).
    static func parseFields(_ lines: ArraySlice<ArraySlice<UInt8>>) throws(RequestHeadError) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        for line in lines {
            if line.first == UInt8(ascii: " ") || line.first == UInt8(ascii: "\t") {
                throw .malformed("obsolete header line folding")
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .malformed("header line without a colon") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw .malformed("bad header name") }
            let value = line[(colon + 1)...]
            guard value.allSatisfy({ $0 >= 0x20 || $0 == 0x09 }), !value.contains(0x7F) else {
                throw .malformed("control character in header value")
            }
            headers.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self).trimmedHTTPWhitespace()))
            if headers.count > maxHeaderCount { throw .tooManyFields(limit: maxHeaderCount) }
        }
        return headers
    }

    /// Finds the blank line: CRLFCRLF (or bare LFLF, which RFC 9112 lets a recipient accept), looking at line ends
    /// from `start` on.
    static func headEnd(_ b: [UInt8], from start: Int = 0) -> (contentEnd: Int, headLength: Int)? {
        var i = start
        while i < b.count {
            if b[i] == 0x0A {
                if i + 1 < b.count, b[i + 1] == 0x0A { return (i, i + 2) }
                if i + 2 < b.count, b[i + 1] == 0x0D, b[i + 2] == 0x0A { return (i, i + 3) }
            }
            i += 1
        }
        return nil
    }

    static func splitLines(_ b: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        b.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? line.dropLast() : line
        }
    }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }
}

extension String {
    /// Drops leading and trailing spaces and tabs.
    func trimmedHTTPWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
