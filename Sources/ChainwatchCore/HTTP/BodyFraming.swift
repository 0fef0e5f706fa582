/// How an HTTP message body ends (RFC 9112 §6).
public enum BodyFraming: Sendable, Equatable {
    /// Exactly this many bytes (0: no body).
    case length(UInt64)
    /// Chunked transfer coding, ending with the zero chunk and trailers.
    case chunked
    /// Everything until the sender closes (responses only).
    case untilClose

    /// The framing of a request body; `nil` means the head is ambiguous and must be refused (request smuggling).
    public static func request(_ head: RequestHead) -> BodyFraming? {
        let te = head.tokens(of: "Transfer-Encoding")
        let lengths = head.headers.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if !te.isEmpty {
            guard lengths.isEmpty, te.last == "chunked" else { return nil }
            return .chunked
        }
        return contentLength(lengths).map { .length($0 ?? 0) }
    }

    /// The framing of a response body to a request with `method`; `nil` when the head is ambiguous.
    public static func response(_ head: ResponseHead, requestMethod method: String) -> BodyFraming? {
        if method == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
            return .length(0)
        }
        let te = head.tokens(of: "Transfer-Encoding")
        let lengths = head.headers.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if !te.isEmpty { return te.last == "chunked" ? .chunked : .untilClose }
        guard let length = contentLength(lengths) else { return nil }
        return length.map { .length($0) } ?? .untilClose
    }

    /// nil: invalid; .some(nil): absent; .some(n): every copy agrees on n.
    private static func contentLength(_ values: [String]) -> UInt64?? {
        let all = values.flatMap { $0.split(separator: ",") }.map { String($0).trimmedHTTPWhitespace() }
        guard let first = all.first else { return .some(nil) }
        guard first.allSatisfy(\.isASCIIDigit), first.count <= 18, let n = UInt64(first), all.allSatisfy({ $0 == first }) else {
            return nil
        }
        return .some(n)
    }
}

/// Finds where a body ends in a stream without copying it: feed each read, learn how many of its bytes belong
/// to the body. Pure; bytes are forwarded unchanged by the caller.
public struct BodyScanner: Sendable {
    public enum ScanError: Error, Sendable, Equatable { case badChunkSize, badChunkTerminator, chunkLineTooLong, bareLineFeed }

    private enum State: Sendable, Equatable {
        case remaining(UInt64)            // fixed length, or the data of a chunk (then `inChunk`)
        case chunkSize(digits: UInt64, seenDigit: Bool, inExtension: Bool, lineLength: Int)
        case chunkSizeCR(digits: UInt64, seenDigit: Bool)   // a CR ends the size line only right before its LF
        case chunkDataEnd(sawCR: Bool)
        case trailerLineStart(sawCR: Bool)
        case trailerLine(lineLength: Int)
        case untilClose
        case done
    }
    private var state: State
    private var inChunk = false
    /// Whether a chunked body's lines must end in CRLF (a request's, forwarded as sent: a bare LF the upstream may
    /// read otherwise than this scanner would let a body end in two places, request smuggling's ground).
    private let strict: Bool
    /// The framing byte before this one (a chunk's data leaves it as the size line's last).
    private var previous: UInt8 = 0
    /// Longest chunk-size or trailer line accepted.
    public static let maxLineLength = 4096

    public init(_ framing: BodyFraming, strict: Bool = false) {
        self.strict = strict
        switch framing {
        case .length(let n): state = n == 0 ? .done : .remaining(n)
        case .chunked: state = .chunkSize(digits: 0, seenDigit: false, inExtension: false, lineLength: 0)
        case .untilClose: state = .untilClose
        }
    }

    /// Whether the body ends only when the sender closes.
    public var endsAtClose: Bool { state == .untilClose }

    /// Whether the body has ended.
    public var isComplete: Bool { state == .done }

    /// Consumes bytes from the front of `bytes` that belong to the body; returns how many.
    /// Stops at the end of the body, so the rest (a pipelined next message) is left to the caller.
    public mutating func consume(_ bytes: some Collection<UInt8>) throws(ScanError) -> Int {
        var used = 0
        var index = bytes.startIndex
        while index != bytes.endIndex {
            switch state {
            case .done:
                return used
            case .untilClose:
                return used + bytes.distance(from: index, to: bytes.endIndex)
            case .remaining(let n):
                let available = UInt64(bytes.distance(from: index, to: bytes.endIndex))
                let take = min(n, available)
                index = bytes.index(index, offsetBy: Int(take))
                used += Int(take)
                if take == n { state = inChunk ? .chunkDataEnd(sawCR: false) : .done }
                else { state = .remaining(n - take) }
                continue
            default:
                break
            }
            let c = bytes[index]
            index = bytes.index(after: index)
            used += 1
            try step(c)
        }
        return used
    }

    private mutating func step(_ c: UInt8) throws(ScanError) {
        if strict, c == 0x0A, previous != 0x0D { throw .bareLineFeed }
        previous = c
        switch state {
        case .chunkSize(let digits, let seenDigit, let inExtension, let lineLength):
            guard lineLength < Self.maxLineLength else { throw .chunkLineTooLong }
            if c == 0x0A {
                guard seenDigit else { throw .badChunkSize }
                if digits == 0 { state = .trailerLineStart(sawCR: false) }
                else { inChunk = true; state = .remaining(digits) }
            } else if inExtension && c != 0x0D {
                state = .chunkSize(digits: digits, seenDigit: seenDigit, inExtension: inExtension, lineLength: lineLength + 1)
            } else if c == 0x0D {
                state = .chunkSizeCR(digits: digits, seenDigit: seenDigit)
            } else if c == UInt8(ascii: ";") || c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") {
                state = .chunkSize(digits: digits, seenDigit: seenDigit, inExtension: true, lineLength: lineLength + 1)
            } else if let v = Self.hexValue(c) {
                guard digits <= (UInt64.max >> 8) else { throw .badChunkSize }
                state = .chunkSize(digits: digits << 4 | UInt64(v), seenDigit: true, inExtension: false, lineLength: lineLength + 1)
            } else {
                throw .badChunkSize
            }
        case .chunkSizeCR(let digits, let seenDigit):
            guard c == 0x0A, seenDigit else { throw .badChunkSize }
            if digits == 0 { state = .trailerLineStart(sawCR: false) }
            else { inChunk = true; state = .remaining(digits) }
        case .chunkDataEnd(let sawCR):
            if c == 0x0D, !sawCR { state = .chunkDataEnd(sawCR: true) }
            else if c == 0x0A { inChunk = false; state = .chunkSize(digits: 0, seenDigit: false, inExtension: false, lineLength: 0) }
            else { throw .badChunkTerminator }
        case .trailerLineStart(let sawCR):
            if c == 0x0A { state = .done }
            else if c == 0x0D, !sawCR { state = .trailerLineStart(sawCR: true) }
            else { state = .trailerLine(lineLength: 1) }
        case .trailerLine(let lineLength):
            guard lineLength < Self.maxLineLength else { throw .chunkLineTooLong }
            state = c == 0x0A ? .trailerLineStart(sawCR: false) : .trailerLine(lineLength: lineLength + 1)
        case .remaining, .untilClose, .done:
            break
        }
    }

    /// A hex digit's value (also the admin listener's `%XX` decoding).
    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
