/// An HTTP head (request or response) arriving in pieces. Each byte is copied out of the socket buffer and scanned
/// for the blank line once: the machine peeks only the bytes after those it holds, and the search resumes where
/// the last one stopped. (Copying and scanning from byte 0 on every read made a 62 KB head sent one byte per
/// segment cost 0.5 s of loop CPU.) The head is parsed once, when its blank line is in.
public struct HeadReader: Sendable {
    /// The head's bytes so far, from the start of the side's input.
    public private(set) var bytes: [UInt8] = []
    /// Where the last search for the blank line ended.
    private var scanned = 0
    /// The largest head accepted (a few bytes more are read to see that a head is over it).
    public let limit: Int

    public init(limit: Int) { self.limit = limit }

    /// Where the next peek of the side's input starts (just past the bytes held) and the most it should take.
    public var nextPeek: (from: Int, max: Int) { (bytes.count, Swift.max(0, limit + 4 - bytes.count)) }

    /// Adds the bytes that followed those held; returns the request head and its length once its blank line is in.
    /// Starts afresh after a head or an error.
    public mutating func request(adding more: some Collection<UInt8>) throws(RequestHeadError)
        -> (head: RequestHead, length: Int)?
    {
        try read(more, checkIncomplete: RequestHeadParser.checkIncomplete(_:limit:), parse: RequestHeadParser.parse(_:end:limit:))
    }

    /// Adds the bytes that followed those held; returns the response head and its length once its blank line is in.
    /// Starts afresh after a head or an error.
    public mutating func response(adding more: some Collection<UInt8>) throws(RequestHeadError)
        -> (head: ResponseHead, length: Int)?
    {
        try read(more, checkIncomplete: ResponseHead.checkIncomplete(_:limit:), parse: ResponseHead.parse(_:end:limit:))
    }

    private mutating func read<Head>(
        _ more: some Collection<UInt8>,
        checkIncomplete: ([UInt8], Int) throws(RequestHeadError) -> Void,
        parse: ([UInt8], (contentEnd: Int, headLength: Int), Int) throws(RequestHeadError) -> (head: Head, length: Int)
    ) throws(RequestHeadError) -> (head: Head, length: Int)? {
        guard let end = append(more) else {
            do { try checkIncomplete(bytes, limit) } catch { self = HeadReader(limit: limit); throw error }
            return nil
        }
        defer { self = HeadReader(limit: limit) }
        return try parse(bytes, end, limit)
    }

    private mutating func append(_ more: some Collection<UInt8>) -> (contentEnd: Int, headLength: Int)? {
        bytes.append(contentsOf: more.prefix(nextPeek.max))
        // A blank line is found at its first LF, and needs up to two bytes after it: look again at the last two.
        let found = RequestHeadParser.headEnd(bytes, from: Swift.max(0, scanned - 2))
        scanned = bytes.count
        return found
    }
}
