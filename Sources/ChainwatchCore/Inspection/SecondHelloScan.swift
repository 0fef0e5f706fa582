/// Reads a client's bytes after a HelloRetryRequest reached it, until its second ClientHello is whole: the
/// compatibility-mode ChangeCipherSpec records a TLS 1.3 client may send first are skipped, the hello's handshake
/// records are walked to the end of its message. Keeps counts and the few bytes of a record's and the message's
/// headers, nothing more. Pure; any chunking.
public struct SecondHelloScan: Sendable, Equatable {
    public enum Progress: Sendable, Equatable {
        /// More of the hello is to come.
        case moreBytes
        /// The hello is whole: the stream offset (counted from this scan's first byte) just past its last record.
        case whole(end: Int)
        /// What came is not a ClientHello in records (an alert, data, a malformed record): the client's bytes are
        /// not held for it any longer.
        case notAHello
    }

    /// The largest second hello waited for; a longer one is let go (`notAHello`).
    static let maxHelloLength = 1 << 17

    private var offset = 0
    /// Bytes of the current record header read so far, and the header's bytes.
    private var header: [UInt8] = []
    /// Bytes of the current record's body still to come, and its content type.
    private var bodyLeft = 0
    private var bodyType: UInt8 = 0
    /// The hello's handshake header (4 bytes) as read so far, then its body bytes still to come.
    private var messageHeader: [UInt8] = []
    private var messageLeft: Int?
    public private(set) var progress: Progress = .moreBytes

    public init() {}

    /// Feeds the client's next bytes; what is known after them.
    @discardableResult
    public mutating func feed(_ bytes: some Collection<UInt8>) -> Progress {
        guard case .moreBytes = progress else { return progress }
        for byte in bytes {
            offset += 1
            if bodyLeft == 0 {
                header.append(byte)
                guard header.count == 5 else { continue }
                bodyType = header[0]
                bodyLeft = Int(header[3]) << 8 | Int(header[4])
                let versionOK = header[1] == 3
                header.removeAll(keepingCapacity: true)
                guard versionOK, bodyLeft > 0, bodyLeft <= (1 << 14) else { return fail() }
                switch bodyType {
                case 20: guard bodyLeft == 1 else { return fail() }   // ChangeCipherSpec: one byte
                case 22: break
                default: return fail()
                }
                continue
            }
            bodyLeft -= 1
            if bodyType == 22 {
                if let left = messageLeft {
                    messageLeft = left - 1
                } else {
                    messageHeader.append(byte)
                    if messageHeader.count == 4 {
                        let length = Int(messageHeader[1]) << 16 | Int(messageHeader[2]) << 8 | Int(messageHeader[3])
                        guard messageHeader[0] == 1, length <= Self.maxHelloLength else { return fail() }
                        messageLeft = length
                    }
                }
                // Whole once the message is and its record ends with it (nothing else may share the record).
                if messageLeft == 0 {
                    guard bodyLeft == 0 else { return fail() }
                    progress = .whole(end: offset)
                    return progress
                }
            } else if bodyType == 20, messageHeader.isEmpty == false || byte != 1 {
                return fail()   // a ChangeCipherSpec inside the hello, or not the one-byte value 1
            }
        }
        return progress
    }

    private mutating func fail() -> Progress {
        progress = .notAHello
        return progress
    }
}
