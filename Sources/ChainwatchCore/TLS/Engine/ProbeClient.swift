/// chainwatch's own TLS client for probe handshakes: it sends the client's ClientHello (`HelloMirror`: the same
/// bytes, with every per-connection part drawn afresh), reads the server's flight and proves it is the server's.
/// Pure: no socket, no clock; bytes in (`receive`), bytes out (`start`, and each `Step`'s `send`).
///
/// TLS 1.3: the ServerHello's key share gives the handshake keys; the encrypted flight is opened record by record;
/// the Certificate (or CompressedCertificate, RFC 8879) gives the chain; the CertificateVerify must verify with the
/// leaf's key over this handshake's transcript, and the Finished with the server's handshake secret, so a chain
/// replayed by someone without the server's key is never accepted. The probe then ends as a browser ends a
/// connection it opened and will not use: a ChangeCipherSpec (compatibility mode, when its hello had a session id),
/// an empty Certificate if the server asked for one, its Finished, and a close_notify under the application keys.
///
/// TLS 1.2 (a server that does not take TLS 1.3): the chain is read in clear, and an (EC)DHE ServerKeyExchange
/// signature must verify with the leaf's key over both randoms and the parameters. The probe then closes without a
/// byte more, as a client that gave up before its key exchange (it sends no ClientKeyExchange: that would take a
/// TLS 1.2 key schedule and record layer for nothing the verdict needs).
public struct ProbeClient {
    public enum Step {
        /// Send `send` (may be empty) and feed the server's next bytes.
        case needsMoreBytes(send: [UInt8])
        /// The handshake is over: send `send`, then close the connection.
        case done(ProbeClientResult, send: [UInt8])
    }

    /// The largest non-certificate handshake message read (EncryptedExtensions, ServerKeyExchange, ...).
    static let maxOtherMessage = 64 * 1024
    static let maxPlaintextRecord = 1 << 14
    static let maxCiphertextRecord = (1 << 14) + 256

    private let crypto: any TLSCrypto
    private let offered: ClientHello
    private let compressionOffered: [UInt16]
    private let recordVersion: UInt16
    private let maxCertificateList: Int
    private var hello: MirroredHello
    private var firstHello: [UInt8]
    /// The probe's legacy session id (compatibility mode when not empty; a second hello keeps it).
    private let sessionID: [UInt8]
    private var sentChangeCipherSpec = false
    private var retried = false
    private var input: [UInt8] = []
    private var inputStart = 0
    private var handshake: [UInt8] = []
    private var handshakeStart = 0
    private var phase: Phase

    private enum Phase {
        /// `transcript`: the messages so far, as sent (the first hello; after a HelloRetryRequest, its message_hash
        /// form, the HRR and the second hello).
        case awaitingServerHello(transcript: [UInt8], retrySuite: UInt16?)
        case encrypted(EncryptedFlight)
        case plaintext(PlaintextFlight)
        case done
    }

    /// - Parameters:
    ///   - clientHello: the client's first ClientHello handshake message, header included.
    ///   - recordVersion: the record-layer version of the client's first record (0x0301 for most stacks).
    ///   - maxCertificateList: the largest Certificate (or decompressed CompressedCertificate) read.
    public init(clientHello: [UInt8], recordVersion: UInt16 = 0x0301, crypto: any TLSCrypto,
                maxCertificateList: Int) throws(ProbeClientError) {
        self.crypto = crypto
        do { offered = try ClientHello.parse(handshakeMessage: clientHello) } catch { throw .malformed(error) }
        self.recordVersion = recordVersion >> 8 == 3 ? recordVersion : 0x0301
        self.maxCertificateList = maxCertificateList
        let parts: HelloParts
        do {
            hello = try HelloMirror.mirror(clientHello, crypto: crypto)
            parts = try HelloParts(message: hello.message)
        } catch {
            throw .unsupported("the client's hello cannot be mirrored: \(error)")
        }
        compressionOffered = Self.compressionAlgorithms(parts)
        sessionID = parts.sessionID
        firstHello = hello.message
        phase = .awaitingServerHello(transcript: hello.message, retrySuite: nil)
    }

    /// The probe's first flight: its ClientHello in records.
    public func start() -> [UInt8] { Self.records(type: 22, version: recordVersion, hello.message) }

    /// Whether the server asked for a second hello (a HelloRetryRequest): the `send` of the step that read it is the
    /// second hello (after a ChangeCipherSpec in compatibility mode).
    public var hasRetried: Bool { retried }

    /// Feeds the server's bytes, in order, in any chunks.
    public mutating func receive(_ bytes: some Collection<UInt8>) throws(ProbeClientError) -> Step {
        input.append(contentsOf: bytes)
        var send: [UInt8] = []
        defer { compact() }
        while let record = try nextRecord() {
            if let result = try handle(record: record, send: &send) { return .done(result, send: send) }
        }
        return .needsMoreBytes(send: send)
    }

    // MARK: - Records

    private mutating func nextRecord() throws(ProbeClientError) -> (type: UInt8, header: [UInt8], payload: [UInt8])? {
        guard input.count - inputStart >= 5 else { return nil }
        let type = input[inputStart]
        let version = UInt16(input[inputStart + 1]) << 8 | UInt16(input[inputStart + 2])
        let length = Int(input[inputStart + 3]) << 8 | Int(input[inputStart + 4])
        guard (20...23).contains(type) else { throw .malformed(.unexpectedContentType(type)) }
        guard version >> 8 == 3 else { throw .malformed(.badRecordVersion(version)) }
        let limit = type == 23 ? Self.maxCiphertextRecord : Self.maxPlaintextRecord
        guard length <= limit else { throw .malformed(.recordTooLong(length: length, limit: limit)) }
        guard input.count - inputStart >= 5 + length else { return nil }
        let header = Array(input[inputStart..<(inputStart + 5)])
        let payload = Array(input[(inputStart + 5)..<(inputStart + 5 + length)])
        inputStart += 5 + length
        return (type, header, payload)
    }

    private mutating func compact() {
        if inputStart > 0 { input.removeSubrange(..<inputStart); inputStart = 0 }
        if handshakeStart > 0 { handshake.removeSubrange(..<handshakeStart); handshakeStart = 0 }
    }

    private mutating func handle(record: (type: UInt8, header: [UInt8], payload: [UInt8]), send: inout [UInt8]) throws(ProbeClientError) -> ProbeClientResult? {
        switch record.type {
        case 20:   // a TLS 1.3 server's compatibility ChangeCipherSpec: one byte, 1, before its encrypted flight
            guard record.payload == [1], !isPlaintextPhase else { throw .protocolViolation("unexpected ChangeCipherSpec") }
            return nil
        case 21:
            throw record.payload.count == 2 ? .alert(record.payload[1]) : .malformed(.truncatedField("Alert"))
        case 22:
            guard !isEncryptedPhase else { throw .protocolViolation("a plaintext handshake record after the ServerHello") }
            handshake.append(contentsOf: record.payload)
        default:
            guard case .encrypted(var flight) = phase else { throw .protocolViolation("application data before the handshake keys") }
            phase = .done
            let opened: (contentType: UInt8, content: [UInt8])
            do { opened = try flight.server.open(header: record.header, payload: record.payload) } catch {
                throw .crypto(error)
            }
            flight.recordLengths.append(record.payload.count)
            phase = .encrypted(flight)
            switch opened.contentType {
            case 22: handshake.append(contentsOf: opened.content)
            case 21: throw opened.content.count == 2 ? .alert(opened.content[1]) : .malformed(.truncatedField("Alert"))
            default: throw .protocolViolation("content type \(opened.contentType) inside the server's handshake flight")
            }
        }
        while let message = try nextMessage() {
            if let result = try handle(message: message, send: &send) { return result }
        }
        return nil
    }

    private var isEncryptedPhase: Bool { if case .encrypted = phase { true } else { false } }
    private var isPlaintextPhase: Bool { if case .plaintext = phase { true } else { false } }

    /// The next complete handshake message (type, whole message with header), or nil.
    private mutating func nextMessage() throws(ProbeClientError) -> (type: UInt8, message: [UInt8])? {
        guard handshake.count - handshakeStart >= 4 else { return nil }
        let type = handshake[handshakeStart]
        let length = Int(handshake[handshakeStart + 1]) << 16 | Int(handshake[handshakeStart + 2]) << 8 | Int(handshake[handshakeStart + 3])
        let limit = type == 11 || type == 25 ? maxCertificateList : Self.maxOtherMessage
        guard length <= limit else { throw .messageTooLarge(type: type, length: length, limit: limit) }
        guard handshake.count - handshakeStart >= 4 + length else { return nil }
        let message = Array(handshake[handshakeStart..<(handshakeStart + 4 + length)])
        handshakeStart += 4 + length
        return (type, message)
    }

    // MARK: - Messages

    private mutating func handle(message: (type: UInt8, message: [UInt8]), send: inout [UInt8]) throws(ProbeClientError) -> ProbeClientResult? {
        switch phase {
        case .awaitingServerHello(let transcript, let retrySuite):
            guard message.type == 2 else { throw .protocolViolation("handshake message \(message.type) before the ServerHello") }
            try serverHello(message.message, transcript: transcript, retrySuite: retrySuite, send: &send)
            return nil
        case .encrypted(var flight):
            phase = .done
            let finished = try flight.read(message.type, message.message, offered: offered, compression: compressionOffered,
                                           maxCertificateList: maxCertificateList, crypto: crypto)
            guard finished else { phase = .encrypted(flight); return nil }
            guard handshakeStart == handshake.count else { throw .protocolViolation("handshake bytes after the server's Finished in its record") }
            let compatibility = !sessionID.isEmpty && !sentChangeCipherSpec
            send += try flight.clientFinish(changeCipherSpec: compatibility)
            return flight.result(clientHello: firstHello, retried: retried)
        case .plaintext(var flight):
            phase = .done
            guard try flight.read(message.type, message.message, offered: offered, crypto: crypto) else {
                phase = .plaintext(flight)
                return nil
            }
            return flight.result(clientHello: firstHello)
        case .done:
            return nil
        }
    }

    private mutating func serverHello(_ message: [UInt8], transcript: [UInt8], retrySuite: UInt16?, send: inout [UInt8]) throws(ProbeClientError) {
        let parsed: ServerHello
        let extensions: ServerFlightMessages.HelloExtensions
        do {
            parsed = try ServerHello.parse(handshakeMessage: message)
            extensions = try ServerFlightMessages.helloExtensions(ofServerHello: message.dropFirst(4), isRetry: parsed.isHelloRetryRequest)
        } catch { throw .malformed(error) }
        let suite = parsed.cipherSuite.rawValue
        guard offered.cipherSuites.contains(parsed.cipherSuite) else { throw .protocolViolation("the server chose suite \(parsed.cipherSuite), which was not offered") }

        guard extensions.selectedVersion == 0x0304 else {
            guard !retried else { throw .protocolViolation("a TLS 1.2 ServerHello after a HelloRetryRequest") }
            // Below TLS 1.3 the version is the ServerHello's own (RFC 8446 §4.2.1): no supported_versions, and one the
            // client's legacy_version allows, TLS 1.0 to 1.2. Taken as it came, a legacy_version of 0x0304 made a plain
            // TLS 1.2 flight a TLS 1.3 result without TLS 1.3's proof (found by FuzzProbeClient's invariant).
            if let selected = extensions.selectedVersion {
                throw .protocolViolation("the ServerHello selects version \(selected.hexDescription), which is not TLS 1.3")
            }
            let clientVersion = UInt16(firstHello[4]) << 8 | UInt16(firstHello[5])
            let serverVersion = parsed.legacyVersion.rawValue
            guard serverVersion >= 0x0301, serverVersion <= 0x0303, serverVersion <= clientVersion else {
                throw .protocolViolation("the ServerHello names version \(serverVersion.hexDescription) without TLS 1.3's supported_versions")
            }
            // Offered, but never negotiable below TLS 1.3: a TLS 1.3 suite (RFC 8446 §B.4), a signalling value
            // (RFC 5746 §3.3, RFC 7507 §6) or GREASE (RFC 8701 §3). Read on, such a flight had no ServerKeyExchange to
            // check and would be returned as proven.
            guard !parsed.cipherSuite.isTLS13, suite != 0x00FF, suite != 0x5600, !isGREASE(suite) else {
                throw .protocolViolation("the server chose suite \(parsed.cipherSuite) for TLS 1.2 or older")
            }
            phase = .plaintext(PlaintextFlight(serverHello: message, version: parsed.version, suite: parsed.cipherSuite,
                                               clientRandom: Array(firstHello[6..<38]), serverRandom: parsed.random))
            return
        }
        guard parsed.cipherSuite.isTLS13, retrySuite == nil || retrySuite == suite else {
            throw .protocolViolation("the ServerHello's suite \(parsed.cipherSuite) is not a TLS 1.3 suite the HelloRetryRequest chose")
        }
        guard handshakeStart == handshake.count else { throw .protocolViolation("handshake bytes after the ServerHello in its record") }
        // TLS 1.3 echoes the client's session id (a TLS 1.2 server names its own session).
        guard parsed.sessionID == sessionID else { throw .protocolViolation("the ServerHello does not echo the session id") }
        let hash = TLSHashAlgorithm(suite: suite)

        if parsed.isHelloRetryRequest {
            guard !retried else { throw .protocolViolation("a second HelloRetryRequest") }
            if let group = extensions.keyShareGroup {
                guard offered.supportedGroups.contains(group), !hello.keyExchanges.contains(where: { $0.group == group }) else {
                    throw .protocolViolation("the HelloRetryRequest asks for group \(group.hexDescription), offered already or never")
                }
            }
            let second: MirroredHello
            do { second = try hello.retry(group: extensions.keyShareGroup, cookie: extensions.cookie, crypto: crypto) } catch {
                throw .unsupported("the second hello for group \(extensions.keyShareGroup?.hexDescription ?? "-"): \(error)")
            }
            hello = second
            retried = true
            // RFC 8446 §4.4.1: the first hello enters the transcript as a message_hash message.
            var digest = crypto.transcriptHash(hash)
            digest.update(transcript)
            let messageHash = [254, 0, 0, UInt8(hash.length)] + digest.current()
            if !sessionID.isEmpty {
                send += Self.changeCipherSpec
                sentChangeCipherSpec = true
            }
            send += Self.records(type: 22, version: 0x0303, second.message)
            phase = .awaitingServerHello(transcript: messageHash + message + second.message, retrySuite: suite)
            return
        }

        guard let group = extensions.keyShareGroup, let serverShare = extensions.keyShare else {
            throw .protocolViolation("the ServerHello has no key share (a resumption the probe did not offer)")
        }
        guard let exchange = hello.keyExchanges.first(where: { $0.group == group }) else {
            if offered.keyShareGroups.contains(group) { throw .unsupported("key share group \(group.hexDescription)") }
            throw .protocolViolation("the ServerHello's key share group \(group.hexDescription) was not offered")
        }
        let secret: [UInt8]
        do { secret = try exchange.sharedSecret(serverShare: serverShare) } catch { throw .crypto(error) }
        var digest = crypto.transcriptHash(hash)
        digest.update(transcript)
        digest.update(message)
        var schedule = TLS13KeySchedule(crypto: crypto, suite: suite)
        let secrets = schedule.handshakeTrafficSecrets(sharedSecret: secret, transcriptHash: digest.current())
        let keys = schedule.trafficKeys(secret: secrets.server)
        phase = .encrypted(EncryptedFlight(
            crypto: crypto, schedule: schedule, transcript: digest, suite: parsed.cipherSuite, serverHello: message,
            clientSecret: secrets.client, serverSecret: secrets.server,
            server: TLS13RecordProtection(crypto: crypto, suite: suite, key: keys.key, iv: keys.iv)))
    }

    // MARK: - Framing

    static let changeCipherSpec: [UInt8] = [20, 3, 3, 0, 1, 1]

    /// `bytes` in records of at most 2^14 bytes.
    static func records(type: UInt8, version: UInt16, _ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var offset = 0
        repeat {
            let chunk = bytes[offset..<min(bytes.count, offset + maxPlaintextRecord)]
            out += [type, UInt8(version >> 8), UInt8(version & 0xFF), UInt8(chunk.count >> 8), UInt8(chunk.count & 0xFF)]
            out += chunk
            offset += chunk.count
        } while offset < bytes.count
        return out
    }

    /// The algorithms of the hello's compress_certificate extension (27), in order; empty when absent or unreadable.
    static func compressionAlgorithms(_ hello: HelloParts) -> [UInt16] {
        guard let body = hello.body(of: 27) else { return [] }
        var reader = ByteReader(body[...])
        guard var list = try? reader.readVector(lengthBytes: 1, "algorithms") else { return [] }
        var algorithms: [UInt16] = []
        while let algorithm = try? list.readUInt16("algorithm") { algorithms.append(algorithm) }
        return algorithms
    }
}
