/// A parsed HTTP/1.x status line and header block from an upstream server.
public struct ResponseHead: Sendable {
    public var version: String
    public var status: Int
    public var reasonPhrase: String
    public var headers: [(name: String, value: String)]

    public init(version: String, status: Int, reasonPhrase: String, headers: [(name: String, value: String)]) {
        self.version = version; self.status = status; self.reasonPhrase = reasonPhrase; self.headers = headers
    }

    public func value(of name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
    public func tokens(of name: String) -> [String] {
        RequestHead(method: "", target: "", version: version, headers: headers).tokens(of: name)
    }

    /// Parses a complete response head from the start of `bytes`; nil while the blank line is missing.
    public static func parse(_ bytes: some RandomAccessCollection<UInt8>, limit: Int = 64 * 1024)
        throws(RequestHeadError) -> (head: ResponseHead, length: Int)?
    {
        let buffer = Array(bytes.prefix(limit + 4))
        guard let end = RequestHeadParser.headEnd(buffer) else {
            try checkIncomplete(buffer, limit: limit)
            return nil
        }
        return try parse(buffer, end: end, limit: limit)
    }

    /// Throws when a head whose blank line has not arrived can already never be valid.
    static func checkIncomplete(_ buffer: [UInt8], limit: Int) throws(RequestHeadError) {
        if buffer.count > limit { throw .tooLarge(limit: limit) }
        if buffer.count >= 5, !buffer.starts(with: "HTTP/".utf8) { throw .malformed("response does not start with HTTP/") }
    }

    /// Parses the head that ends at `end` (from `RequestHeadParser.headEnd`).
    static func parse(_ buffer: [UInt8], end: (contentEnd: Int, headLength: Int), limit: Int)
        throws(RequestHeadError) -> (head: ResponseHead, length: Int)
    {
        let lines = RequestHeadParser.splitLines(buffer[..<end.contentEnd])
        guard let statusLine = lines.first, statusLine.starts(with: "HTTP/1.".utf8), statusLine.count >= 12 else {
            throw .malformed("bad status line")
        }
        let parts = statusLine.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[1].count == 3, let status = Int(String(decoding: parts[1], as: UTF8.self)), status >= 100 else {
            throw .malformed("bad status code")
        }
        let headers = try RequestHeadParser.parseFields(lines.dropFirst())
        return (ResponseHead(version: String(decoding: parts[0], as: UTF8.self), status: status,
                             reasonPhrase: parts.count > 2 ? String(decoding: parts[2], as: UTF8.self) : "",
                             headers: headers), end.headLength)
    }
}
