/// A TLS 1.3 server's encrypted flight as the probe reads it: EncryptedExtensions, an optional CertificateRequest,
/// Certificate or CompressedCertificate, CertificateVerify, Finished, in that order (RFC 8446 §4.4).
struct EncryptedFlight {
    let crypto: any TLSCrypto
    var schedule: TLS13KeySchedule
    var transcript: any TLSTranscriptHash
    let suite: CipherSuite
    let serverHello: [UInt8]
    let clientSecret: [UInt8]
    let serverSecret: [UInt8]
    var server: TLS13RecordProtection
    var messages: [TLSMessageSize] = []
    var recordLengths: [Int] = []
    var alpn: [UInt8]?
    var chain: [[UInt8]] = []
    var ocsp: [UInt8]?
    var certificateRequestContext: [UInt8]?
    private var next: Expected = .encryptedExtensions

    private enum Expected { case encryptedExtensions, certificate, certificateVerify, finished }

    init(crypto: any TLSCrypto, schedule: TLS13KeySchedule, transcript: any TLSTranscriptHash, suite: CipherSuite,
         serverHello: [UInt8], clientSecret: [UInt8], serverSecret: [UInt8], server: TLS13RecordProtection) {
        self.crypto = crypto; self.schedule = schedule; self.transcript = transcript; self.suite = suite
        self.serverHello = serverHello; self.clientSecret = clientSecret; self.serverSecret = serverSecret; self.server = server
    }

    static let certificateVerifyContext: [UInt8] =
        [UInt8](repeating: 0x20, count: 64) + Array("TLS 1.3, server CertificateVerify".utf8) + [0]

    /// Reads one message; true when it was the server's Finished and it verified.
    mutating func read(_ type: UInt8, _ message: [UInt8], offered: ClientHello, compression: [UInt16],
                       maxCertificateList: Int, crypto: any TLSCrypto) throws(ProbeClientError) -> Bool {
        let body = message.dropFirst(4)
        do {
            switch (next, type) {
            case (.encryptedExtensions, 8):
                alpn = try ServerFlightMessages.alpn(ofEncryptedExtensions: body)
                if let alpn, !offered.alpnProtocols.contains(String(decoding: alpn, as: UTF8.self)) {
                    throw ProbeClientError.protocolViolation("the server selected a protocol the hello did not offer")
                }
                next = .certificate
            case (.certificate, 13) where certificateRequestContext == nil:
                var reader = ByteReader(body)
                certificateRequestContext = (try reader.readVector(lengthBytes: 1, "CertificateRequest.context")).unread
            case (.certificate, 11):
                (chain, ocsp) = try ServerFlightMessages.certificate13(body)
                next = .certificateVerify
            case (.certificate, 25):
                let compressed = try ServerFlightMessages.compressedCertificate(body)
                guard compression.contains(compressed.algorithm) else {
                    throw ProbeClientError.protocolViolation("the server compressed its certificate with algorithm \(compressed.algorithm), which was not offered")
                }
                guard compressed.length <= maxCertificateList else {
                    throw ProbeClientError.messageTooLarge(type: 25, length: compressed.length, limit: maxCertificateList)
                }
                let plain: [UInt8]
                do { plain = try crypto.decompress(algorithm: compressed.algorithm, compressed.data, uncompressedLength: compressed.length) } catch {
                    throw ProbeClientError.crypto(error)
                }
                (chain, ocsp) = try ServerFlightMessages.certificate13(plain[...])
                next = .certificateVerify
            case (.certificateVerify, 15):
                guard let leaf = chain.first else { throw ProbeClientError.protocolViolation("no certificate") }
                var reader = ByteReader(body)
                let signed = try ServerFlightMessages.signature(&reader, "CertificateVerify")
                try reader.expectEnd("CertificateVerify")
                guard offered.signatureAlgorithms.contains(signed.scheme) else {
                    throw ProbeClientError.protocolViolation("the CertificateVerify uses scheme \(signed.scheme.hexDescription), which was not offered")
                }
                let content = Self.certificateVerifyContext + transcript.current()
                guard crypto.verify(scheme: signed.scheme, certificateDER: leaf, content: content, signature: signed.signature) else {
                    throw ProbeClientError.verificationFailed("the server's CertificateVerify does not verify with its certificate's key")
                }
                next = .finished
            case (.finished, 20):
                let expected = schedule.finishedVerifyData(baseKey: serverSecret, transcriptHash: transcript.current())
                guard Array(body) == expected else { throw ProbeClientError.verificationFailed("the server's Finished does not verify") }
                append(type, message)
                return true
            default:
                throw ProbeClientError.protocolViolation("handshake message \(type) out of order in the server's encrypted flight")
            }
        } catch let error as TLSParseError {
            throw .malformed(error)
        } catch let error as ProbeClientError {
            throw error
        } catch {
            throw .protocolViolation("\(error)")
        }
        append(type, message)
        return false
    }

    private mutating func append(_ type: UInt8, _ message: [UInt8]) {
        transcript.update(message)
        messages.append(TLSMessageSize(type: type, length: message.count))
    }

    /// The probe's last flight after the server's Finished (see `ProbeClient`).
    mutating func clientFinish(changeCipherSpec: Bool) throws(ProbeClientError) -> [UInt8] {
        let application = schedule.applicationTrafficSecrets(transcriptHash: transcript.current())
        let handshakeKeys = schedule.trafficKeys(secret: clientSecret)
        var protection = TLS13RecordProtection(crypto: crypto, suite: suite.rawValue, key: handshakeKeys.key, iv: handshakeKeys.iv)
        var flight: [UInt8] = []
        if let context = certificateRequestContext {
            let certificate: [UInt8] = [11] + Self.uint24(1 + context.count + 3) + [UInt8(context.count)] + context + [0, 0, 0]
            transcript.update(certificate)
            flight += certificate
        }
        let verifyData = schedule.finishedVerifyData(baseKey: clientSecret, transcriptHash: transcript.current())
        flight += [20] + Self.uint24(verifyData.count) + verifyData
        let applicationKeys = schedule.trafficKeys(secret: application.client)
        var applicationProtection = TLS13RecordProtection(crypto: crypto, suite: suite.rawValue, key: applicationKeys.key, iv: applicationKeys.iv)
        do {
            return (changeCipherSpec ? ProbeClient.changeCipherSpec : [])
                + (try protection.seal(contentType: 22, flight))
                + (try applicationProtection.seal(contentType: 21, [1, 0]))   // close_notify
        } catch {
            throw .crypto(error)
        }
    }

    func result(clientHello: [UInt8], retried: Bool) -> ProbeClientResult {
        ProbeClientResult(chainDER: chain, ocspResponse: ocsp, version: .tls1_3, cipher: suite, alpn: alpn,
                          clientHello: clientHello, serverHello: serverHello, serverMessages: messages,
                          serverRecordLengths: recordLengths, helloRetryRequested: retried, proofVerified: true)
    }

    static func uint24(_ value: Int) -> [UInt8] { [UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
}

/// A TLS 1.2 (or older) server's flight in clear: Certificate, CertificateStatus, ServerKeyExchange,
/// CertificateRequest, ServerHelloDone.
struct PlaintextFlight {
    let serverHello: [UInt8]
    let version: TLSVersion
    let suite: CipherSuite
    let clientRandom: [UInt8]
    let serverRandom: [UInt8]
    private var chain: [[UInt8]] = []
    private var ocsp: [UInt8]?
    private var keyExchange: [UInt8]?
    private var verified = false

    init(serverHello: [UInt8], version: TLSVersion, suite: CipherSuite, clientRandom: [UInt8], serverRandom: [UInt8]) {
        self.serverHello = serverHello; self.version = version; self.suite = suite
        self.clientRandom = clientRandom; self.serverRandom = serverRandom
    }

    /// Reads one message; true at the ServerHelloDone, once the key exchange's signature verified.
    mutating func read(_ type: UInt8, _ message: [UInt8], offered: ClientHello, crypto: any TLSCrypto) throws(ProbeClientError) -> Bool {
        let body = message.dropFirst(4)
        switch type {
        case 11, 22:
            let fact: HandshakeFact?
            do { fact = try HandshakeFact(type: type, body: body) } catch { throw .malformed(error) }
            if case .certificate(let list) = fact { chain = list }
            if case .certificateStatus(let response) = fact, !response.isEmpty { ocsp = response }
        case 12: keyExchange = Array(body)
        case 13: break
        case 14:
            guard let leaf = chain.first else { throw .protocolViolation("no certificate") }
            try verifyKeyExchange(leaf: leaf, offered: offered, crypto: crypto)
            return true
        default:
            throw .protocolViolation("handshake message \(type) in a TLS 1.2 server flight")
        }
        return false
    }

    /// An (EC)DHE suite's ServerKeyExchange must be signed by the leaf's key over both randoms and the parameters
    /// (RFC 5246 §7.4.3). TLS 1.0 and 1.1 sign with MD5+SHA-1 and no scheme: not checked (`proofVerified` false).
    private mutating func verifyKeyExchange(leaf: [UInt8], offered: ClientHello, crypto: any TLSCrypto) throws(ProbeClientError) {
        let name = suite.name ?? ""
        let ephemeral = name.contains("_ECDHE_") || name.contains("_DHE_")
        guard ephemeral else { verified = true; return }
        guard let keyExchange else { throw .protocolViolation("no ServerKeyExchange for \(suite)") }
        guard version >= .tls1_2 else { return }
        let signed: (params: [UInt8], scheme: UInt16, signature: [UInt8])
        do { signed = try ServerFlightMessages.serverKeyExchange(keyExchange[...], ecdhe: name.contains("_ECDHE_")) } catch {
            throw .malformed(error)
        }
        if !offered.signatureAlgorithms.isEmpty, !offered.signatureAlgorithms.contains(signed.scheme) {
            throw .protocolViolation("the ServerKeyExchange uses scheme \(signed.scheme.hexDescription), which was not offered")
        }
        guard crypto.verify(scheme: signed.scheme, certificateDER: leaf, content: clientRandom + serverRandom + signed.params,
                            signature: signed.signature) else {
            throw .verificationFailed("the server's ServerKeyExchange signature does not verify with its certificate's key")
        }
        verified = true
    }

    func result(clientHello: [UInt8]) -> ProbeClientResult {
        let alpn = (try? ServerHello.parse(handshakeMessage: serverHello))?.alpnProtocol.map { Array($0.utf8) }
        return ProbeClientResult(chainDER: chain, ocspResponse: ocsp, version: version, cipher: suite, alpn: alpn,
                                 clientHello: clientHello, serverHello: serverHello, serverMessages: [],
                                 serverRecordLengths: [], helloRetryRequested: false, proofVerified: verified)
    }
}
