/// Watches one direction of a tunnel and reports handshake facts as they complete.
///
/// Pure: `append` every byte in order, then call `next()` until it returns nil (needs more bytes). It never assumes
/// one message per read or one record per message: handshake messages are reassembled across records and reads,
/// and a record holding several messages yields them one per `next()`. Every length is checked against what
/// remains; malformed input throws a `TLSParseError`, and every later `next()` throws the same error.
///
/// Once the handshake is encrypted (after a TLS 1.3 ServerHello, a ChangeCipherSpec, or the first application data
/// record) it reports `.encrypted` once, frees its buffers and ignores further bytes, so a finished observer costs
/// nothing to keep feeding. A ChangeCipherSpec after a HelloRetryRequest is TLS 1.3 middlebox compatibility and is
/// skipped, so the real ServerHello is still read. The client direction cannot see that HelloRetryRequest: there
/// the ChangeCipherSpec a TLS 1.3 client may send before its second ClientHello ends parsing (the second hello
/// must repeat the first one's server name and ALPN, RFC 8446 4.1.2). Not thread-safe: one tunnel direction, one
/// event loop.
///
/// Memory: the bytes appended since the last `next()` that returned nil, plus the reassembly buffer, which never
/// holds more than `maxReassemblyLength` bytes.
public struct TLSObserver: Sendable {
    /// The largest record payload of a plaintext content type (handshake, alert, change_cipher_spec): 2^14.
    public static let maxPlaintextRecordLength = 16_384
    /// The largest protected (application data) record payload: 2^14 + 2048 (RFC 5246 6.2.3).
    public static let maxCiphertextRecordLength = 16_384 + 2_048
    /// The largest handshake message body accepted. Certificate chains are usually 3-20 KiB; 64 KiB leaves room
    /// for long chains while bounding what a hostile peer can make a tunnel buffer.
    public static let maxHandshakeMessageLength = 65_536
    /// The most the reassembly buffer ever holds: a record is added only while no complete message is waiting, and a
    /// message header announcing more than `maxHandshakeMessageLength` fails at once, so the buffer holds at most an
    /// incomplete message (header included) plus one record.
    public static let maxReassemblyLength = 4 + maxHandshakeMessageLength + maxPlaintextRecordLength

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
    /// Handshake record payloads being reassembled into messages; those before `handshakeStart` are consumed.
    private var handshake: [UInt8] = []
    private var handshakeStart = 0
    /// Alert record payload bytes not yet reported (an alert is two bytes).
    private var alertBytes: [UInt8] = []
    /// Set by a HelloRetryRequest: a ChangeCipherSpec is then TLS 1.3 middlebox compatibility, not encryption.
    private var changeCipherSpecIsCompatibility = false

    public init() {}

    /// Adds the next bytes of the stream. Dropped once the observer has finished or failed.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        switch phase {
        case .finished, .failed: return
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
    var reassemblyByteCount: Int { handshake.count + alertBytes.count }

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
            if alertBytes.count >= 2 {
                let fact = HandshakeFact.alert(level: alertBytes[0], description: alertBytes[1])
                alertBytes.removeFirst(2)
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
                alertBytes.append(contentsOf: record.payload)
            case Self.contentChangeCipherSpec:
                guard record.payload.elementsEqual([1]) else { throw .badChangeCipherSpec }
                guard handshakeStart == handshake.count else { throw .changeCipherSpecInsideMessage }
                if !changeCipherSpecIsCompatibility { return finish() }
            default:
                return finish()
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
        let limit = type == Self.contentApplicationData ? Self.maxCiphertextRecordLength : Self.maxPlaintextRecordLength
        guard length <= limit else { throw .recordTooLong(length: length, limit: limit) }
        phase = .plaintext
        guard available >= Self.recordHeaderLength + length else { return nil }
        let payloadStart = inputStart + Self.recordHeaderLength
        inputStart = payloadStart + length
        return (type, input[payloadStart..<inputStart])
    }

    /// The next complete handshake message in the reassembly buffer, or nil when it is incomplete.
    private mutating func nextMessage() throws(TLSParseError) -> (type: UInt8, body: ArraySlice<UInt8>)? {
        let available = handshake.count - handshakeStart
        guard available >= Self.messageHeaderLength else { return nil }
        let type = handshake[handshakeStart]
        let length = Int(handshake[handshakeStart + 1]) << 16 | Int(handshake[handshakeStart + 2]) << 8
            | Int(handshake[handshakeStart + 3])
        guard length <= Self.maxHandshakeMessageLength else { throw .messageTooLong(type: type, length: length) }
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

    /// Stops parsing for good: the rest of the stream is encrypted.
    private mutating func finish() -> HandshakeFact {
        phase = .finished
        release()
        return .encrypted
    }

    private mutating func release() {
        input = []
        inputStart = 0
        handshake = []
        handshakeStart = 0
        alertBytes = []
    }
}
