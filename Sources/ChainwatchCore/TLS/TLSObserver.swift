/// Watches one direction of a tunnel and reports handshake facts as they complete.
///
/// Pure: `append` every byte in order, then call `next()` until it returns nil (needs more bytes). It never assumes
/// one message per read or one record per message: handshake messages are reassembled across records and reads,
/// and a record holding several messages yields them one per `next()`. Every length is checked against what
/// remains; malformed input throws a `TLSParseError`, and every later `next()` throws the same error.
///
/// Once the handshake is encrypted (after a TLS 1.3 ServerHello, a ChangeCipherSpec, or the first application data
/// record) it reports `.encrypted` once, frees its buffers and ignores further bytes (beyond the opt-in record
/// header walk below), so a finished observer costs nothing to keep feeding. A ChangeCipherSpec after a HelloRetryRequest is TLS 1.3 middlebox compatibility and is
/// skipped, so the real ServerHello is still read. The client direction cannot see that HelloRetryRequest: there
/// the ChangeCipherSpec a TLS 1.3 client may send before its second ClientHello ends parsing (the second hello
/// must repeat the first one's server name and ALPN, RFC 8446 4.1.2). Not thread-safe: one tunnel direction, one
/// event loop.
///
/// Memory: the bytes appended since the last `next()` that returned nil, plus the reassembly buffer, which never
/// holds more than `maxReassemblyLength` bytes.
///
/// Record headers after encryption (opt-in, `init(tracksEncryptedRecords: true)`): once the stream is encrypted
/// the observer keeps walking record headers, skipping payloads as they pass without buffering them (constant
/// memory, any chunking), and lists each record's content type and length in `encryptedRecords`: what a TLS 1.3
/// tunnel shows of the server's encrypted flight. ChangeCipherSpec records are skipped. The walk stops for good
/// after `maxTrackedEncryptedRecords` records or at a header that can never be valid (`encryptedRecordTracking`).
public struct TLSObserver: Sendable {
    /// The largest record payload of a plaintext content type (handshake, alert, change_cipher_spec): 2^14.
    public static let maxPlaintextRecordLength = 16_384
    /// The largest protected (application data) record payload: 2^14 + 2048 (RFC 5246 6.2.3).
    public static let maxCiphertextRecordLength = 16_384 + 2_048
    /// The largest handshake message body accepted by default (a client's direction): a ClientHello is a few hundred
    /// bytes to a few KiB; 64 KiB bounds what a hostile client can make a tunnel buffer.
    public static let maxHandshakeMessageLength = 65_536
    /// The largest server handshake message body a `HandshakeWatch` reads by default: the Certificate message.
    /// Chains are usually 3-20 KiB, but real servers send 75 KB and 210 KB (badssl's 1000-sans and 10000-sans). 224 KiB
    /// covers those and, with the ServerHello and record headers, fits under the 256 KiB a `block` tunnel holds
    /// while it waits for the verdict. The proxy reads larger ones, up to `maxProtocolMessageLength`, when it has the
    /// memory for them (`TunnelInspection`).
    public static let maxServerHandshakeMessageLength = 229_376
    /// The largest handshake message body the protocol can express (a 24-bit length): 16 MiB - 1.
    public static let maxProtocolMessageLength = 0xFF_FFFF
    /// The most the reassembly buffer ever holds with the default limit: a record is added only while no complete
    /// message is waiting, and a message header announcing more than the limit fails at once, so the buffer holds at
    /// most an incomplete message (header included) plus one record. `maxReassemblyByteCount` is this observer's.
    public static let maxReassemblyLength = 4 + maxHandshakeMessageLength + maxPlaintextRecordLength
    /// The version field of the first record's header (a client's: 0x0301 for most stacks); nil before it came.
    public private(set) var firstRecordVersion: UInt16?

    /// The largest handshake message body this observer accepts.
    public let messageLimit: Int
    /// The most this observer's reassembly buffer ever holds.
    public var maxReassemblyByteCount: Int { 4 + messageLimit + Self.maxPlaintextRecordLength }
    /// The most records `encryptedRecords` lists (9 bytes each). A TLS 1.3 server's first encrypted flight is 1-8
    /// records (one per message, or a few messages per record), but one with a Certificate of the protocol's largest
    /// size (16 MiB) is 1 024 records of 16 KiB: 1 056 covers that flight, tickets and the first response records.
    public static let maxTrackedEncryptedRecords = 1_056

    private enum Phase: Sendable {
        /// No record header seen yet: bytes that cannot start TLS are `.notTLS`.
        case start
        /// Reading plaintext records.
        case plaintext
        /// The last fact was a TLS 1.3 ServerHello: the next `next()` reports `.encrypted`.
        case encryptionBegins
        /// Encrypted (or failed): bytes are dropped.
        case finished
        case failed(TLSParseError)
    }

    private static let contentChangeCipherSpec: UInt8 = 20
    private static let contentAlert: UInt8 = 21
    private static let contentHandshake: UInt8 = 22
    private static let contentApplicationData: UInt8 = 23
    /// A record header: content type, protocol version, 2-byte length.
    private static let recordHeaderLength = 5
    /// A handshake message header: type, 3-byte length.
    private static let messageHeaderLength = 4

    private var phase = Phase.start
    /// Appended bytes; those before `inputStart` are consumed.
    private var input: [UInt8] = []
    private var inputStart = 0
    /// Whether handshake bytes are waiting after the last message returned (the rest of its record, or a message
    /// still incomplete).
    public var hasPendingHandshakeBytes: Bool { handshakeStart < handshake.count }
    /// The body length announced by the handshake message being reassembled, once its 4-byte header is in; nil when
    /// no message is pending. What its reassembly will hold, before the bytes arrive (`HandshakeWatch` asks for room).
    public var announcedMessageLength: Int? {
        guard handshake.count - handshakeStart >= Self.messageHeaderLength else { return nil }
        return Int(handshake[handshakeStart + 1]) << 16 | Int(handshake[handshakeStart + 2]) << 8 | Int(handshake[handshakeStart + 3])
    }
    /// Handshake record payloads being reassembled into messages; those before `handshakeStart` are consumed.
    private var handshake: [UInt8] = []
    private var handshakeStart = 0
    /// Alert record payload bytes (an alert is two bytes); those before `alertStart` are reported. An index, not
    /// `removeFirst`: a 16 KiB record of alerts cost quadratic time (about 20 ms per 192 KiB) shifted two at a time.
    private var alertBytes: [UInt8] = []
    private var alertStart = 0
    /// Set by a HelloRetryRequest: a ChangeCipherSpec is then TLS 1.3 middlebox compatibility, not encryption.
    private var changeCipherSpecIsCompatibility = false

    /// Stream bytes in complete records the observer has consumed, counted from the first byte appended; it changes
    /// only inside `next()`. Right after `next()` returns a fact, it is the offset just past the record that
    /// completed the fact's message (facts from one record share it): after a HelloRetryRequest, where that record
    /// ends, so the bytes before it can be passed on alone. After `.encrypted` it stays at the end of the last
    /// record the parser read (the TLS 1.3 ServerHello's, the ChangeCipherSpec's, or the first application data
    /// record's); the encrypted record walk does not move it. Bytes of an incomplete record are not counted.
    public private(set) var consumedByteCount = 0
    /// The records after the stream turned encrypted, in order, ChangeCipherSpec records left out; at most
    /// `maxTrackedEncryptedRecords`. A record is listed once its header arrived (its payload may still be on the
    /// way). Empty unless the observer was made with `tracksEncryptedRecords: true`.
    public private(set) var encryptedRecords: [EncryptedRecord] = []
    /// Where the walk over encrypted record headers stands.
    public private(set) var encryptedRecordTracking: EncryptedRecordTracking
    /// The payload bytes of `encryptedRecords` together: the length of the encrypted flight seen so far.
    public var encryptedRecordBytes: Int { encryptedRecords.reduce(0) { $0 + $1.length } }

    /// Header bytes of the encrypted record being walked, oldest in the high bits.
    private var walkedHeader: UInt64 = 0
    private var walkedHeaderCount = 0
    /// Payload bytes of the walked record still to pass.
    private var walkedPayloadLeft = 0

    /// - Parameter tracksEncryptedRecords: keep walking record headers after encryption (`encryptedRecords`).
    /// - Parameter messageLimit: the largest handshake message body accepted (`messageTooLong` past it).
    public init(tracksEncryptedRecords: Bool = false, messageLimit: Int = maxHandshakeMessageLength) {
        encryptedRecordTracking = tracksEncryptedRecords ? .waiting : .off
        self.messageLimit = messageLimit
    }

    /// Adds the next bytes of the stream. Once the observer has finished they only advance the encrypted record
    /// walk, if one is under way; after a failure they are dropped.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        switch phase {
        case .failed: return
        case .finished:
            walkEncryptedRecords(bytes)
            return
        case .start, .plaintext, .encryptionBegins: break
        }
        compactInput()
        input.append(contentsOf: bytes)
    }

    /// The next fact, or nil when more bytes are needed (or the observer has finished).
    public mutating func next() throws(TLSParseError) -> HandshakeFact? {
        switch phase {
        case .finished: return nil
        case .failed(let error): throw error
        case .encryptionBegins: return finish()
        case .start, .plaintext: break
        }
        do {
            return try step()
        } catch {
            phase = .failed(error)
            release()
            throw error
        }
    }

    /// Bytes held by the reassembly buffers (for tests of the memory bound).
    var reassemblyByteCount: Int { handshake.count + alertBytes.count - alertStart }
    /// Every byte buffered: input not yet consumed and the reassembly buffers (for tests of the memory bound).
    var bufferedByteCount: Int { input.count + reassemblyByteCount }

    private mutating func step() throws(TLSParseError) -> HandshakeFact? {
        while true {
            if let message = try nextMessage() {
                guard let fact = try HandshakeFact(type: message.type, body: message.body) else { continue }
                // Only TLS 1.3 has HelloRetryRequests; a TLS 1.2 hello with that random is an ordinary hello.
                if case .serverHello(let hello) = fact, hello.version > .tls1_2 {
                    if hello.isHelloRetryRequest {
                        changeCipherSpecIsCompatibility = true
                    } else {
                        phase = .encryptionBegins
                    }
                }
                return fact
            }
            if alertBytes.count - alertStart >= 2 {
                let fact = HandshakeFact.alert(level: alertBytes[alertStart], description: alertBytes[alertStart + 1])
                alertStart += 2
                if alertStart == alertBytes.count {
                    alertBytes.removeAll(keepingCapacity: true)
                    alertStart = 0
                }
                return fact
            }
            guard let record = try nextRecord() else {
                compactInput()
                return nil
            }
            switch record.type {
            case Self.contentHandshake:
                if handshakeStart > 0 {
                    handshake.removeSubrange(..<handshakeStart)
                    handshakeStart = 0
                }
                handshake.append(contentsOf: record.payload)
            case Self.contentAlert:
                if alertStart > 0 {   // an odd byte left from the last record: what is reported goes
                    alertBytes.removeSubrange(..<alertStart)
                    alertStart = 0
                }
                alertBytes.append(contentsOf: record.payload)
            case Self.contentChangeCipherSpec:
                guard record.payload.elementsEqual([1]) else { throw .badChangeCipherSpec }
                guard handshakeStart == handshake.count else { throw .changeCipherSpecInsideMessage }
                if !changeCipherSpecIsCompatibility { return finish() }
            default:
                // Application data: already encrypted, the first record of the encrypted stream.
                return finish(firstEncryptedRecord: EncryptedRecord(contentType: record.type, length: record.payload.count))
            }
        }
    }

    /// The next complete record, or nil when its header or payload is incomplete.
    private mutating func nextRecord() throws(TLSParseError) -> (type: UInt8, payload: ArraySlice<UInt8>)? {
        let available = input.count - inputStart
        if case .start = phase {
            // Judge the very first bytes at once: plain HTTP should not wait for a 5-byte header.
            if available >= 1, input[inputStart] != Self.contentHandshake, input[inputStart] != Self.contentAlert {
                throw .notTLS
            }
            if available >= 2, input[inputStart + 1] != 3 { throw .notTLS }
        }
        guard available >= Self.recordHeaderLength else { return nil }
        let type = input[inputStart]
        let version = UInt16(input[inputStart + 1]) << 8 | UInt16(input[inputStart + 2])
        let length = Int(input[inputStart + 3]) << 8 | Int(input[inputStart + 4])
        guard (Self.contentChangeCipherSpec...Self.contentApplicationData).contains(type) else {
            throw .unexpectedContentType(type)
        }
        guard version >> 8 == 3 else { throw .badRecordVersion(version) }
        if case .start = phase { firstRecordVersion = version }
        let limit = type == Self.contentApplicationData ? Self.maxCiphertextRecordLength : Self.maxPlaintextRecordLength
        guard length <= limit else { throw .recordTooLong(length: length, limit: limit) }
        phase = .plaintext
        guard available >= Self.recordHeaderLength + length else { return nil }
        let payloadStart = inputStart + Self.recordHeaderLength
        inputStart = payloadStart + length
        consumedByteCount += Self.recordHeaderLength + length
        return (type, input[payloadStart..<inputStart])
    }

    /// The next complete handshake message in the reassembly buffer, or nil when it is incomplete.
    private mutating func nextMessage() throws(TLSParseError) -> (type: UInt8, body: ArraySlice<UInt8>)? {
        let available = handshake.count - handshakeStart
        guard available >= Self.messageHeaderLength else { return nil }
        let type = handshake[handshakeStart]
        let length = Int(handshake[handshakeStart + 1]) << 16 | Int(handshake[handshakeStart + 2]) << 8
            | Int(handshake[handshakeStart + 3])
        guard length <= messageLimit else { throw .messageTooLong(type: type, length: length, limit: messageLimit) }
        guard available >= Self.messageHeaderLength + length else { return nil }
        let bodyStart = handshakeStart + Self.messageHeaderLength
        handshakeStart = bodyStart + length
        return (type, handshake[bodyStart..<handshakeStart])
    }

    /// Drops the consumed input, keeping only an incomplete record.
    private mutating func compactInput() {
        guard inputStart > 0 else { return }
        input.removeSubrange(..<inputStart)
        inputStart = 0
    }

    /// Stops parsing for good: the rest of the stream is encrypted. Starts the encrypted record walk, if asked for,
    /// with the bytes already appended after the last record read.
    private mutating func finish(firstEncryptedRecord: EncryptedRecord? = nil) -> HandshakeFact {
        phase = .finished
        let rest = input[inputStart...]
        release()
        if encryptedRecordTracking == .waiting {
            encryptedRecordTracking = .tracking
            if let firstEncryptedRecord { encryptedRecords.append(firstEncryptedRecord) }
            walkEncryptedRecords(rest)
        }
        return .encrypted
    }

    /// Advances the encrypted record walk over the next stream bytes: header bytes are gathered (five at most),
    /// payload bytes only counted.
    private mutating func walkEncryptedRecords(_ bytes: some Collection<UInt8>) {
        var index = bytes.startIndex
        while index != bytes.endIndex, encryptedRecordTracking == .tracking {
            if walkedPayloadLeft > 0 {
                let step = min(walkedPayloadLeft, bytes.distance(from: index, to: bytes.endIndex))
                index = bytes.index(index, offsetBy: step)
                walkedPayloadLeft -= step
                continue
            }
            walkedHeader = walkedHeader << 8 | UInt64(bytes[index])
            walkedHeaderCount += 1
            index = bytes.index(after: index)
            if walkedHeaderCount == Self.recordHeaderLength { walkedHeaderComplete() }
        }
    }

    /// Judges and lists the record header just gathered.
    private mutating func walkedHeaderComplete() {
        let type = UInt8(truncatingIfNeeded: walkedHeader >> 32)
        let version = UInt16(truncatingIfNeeded: walkedHeader >> 16)
        let length = Int(walkedHeader & 0xFFFF)
        walkedHeader = 0
        walkedHeaderCount = 0
        guard (Self.contentChangeCipherSpec...Self.contentApplicationData).contains(type), version >> 8 == 3,
              length <= Self.maxCiphertextRecordLength,
              type != Self.contentChangeCipherSpec || length == 1 else {
            encryptedRecordTracking = .invalidHeader
            return
        }
        if type != Self.contentChangeCipherSpec {
            guard encryptedRecords.count < Self.maxTrackedEncryptedRecords else {
                encryptedRecordTracking = .full
                return
            }
            encryptedRecords.append(EncryptedRecord(contentType: type, length: length))
        }
        walkedPayloadLeft = length
    }

    private mutating func release() {
        input = []
        inputStart = 0
        handshake = []
        handshakeStart = 0
        alertBytes = []
        alertStart = 0
    }
}
