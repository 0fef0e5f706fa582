/// What one finished probe handshake saw, as plain values: the server's chain, what it negotiated, and its flight as a
/// passive observer of a tunnel sees it (for `FlightAgreement`).
public struct ProbeClientResult: Hashable, Sendable {
    /// The server's certificates as sent (DER), leaf first: not a validated path. Never empty.
    public var chainDER: [[UInt8]]
    /// The OCSP response stapled to the leaf (TLS 1.3: its status_request extension; TLS 1.2: CertificateStatus).
    public var ocspResponse: [UInt8]?
    public var version: TLSVersion
    public var cipher: CipherSuite
    /// The protocol the server selected by ALPN, as sent.
    public var alpn: [UInt8]?
    /// The probe's own first ClientHello handshake message, header included.
    public var clientHello: [UInt8]
    /// The final ServerHello handshake message (never a HelloRetryRequest), header included.
    public var serverHello: [UInt8]
    /// TLS 1.3: the handshake messages after the final ServerHello, through the server's Finished (type, length with
    /// the header), as the server sent them (a CompressedCertificate as 25, its compressed length).
    public var serverMessages: [TLSMessageSize]
    /// TLS 1.3: the payload lengths of the encrypted records that carried `serverMessages`.
    public var serverRecordLengths: [Int]
    public var helloRetryRequested: Bool
    /// TLS 1.3: whether the server's CertificateVerify and Finished verified (the chain is the server's, not a replay);
    /// TLS 1.2: whether its ServerKeyExchange signature verified (true for RSA key exchange, which has none).
    public var proofVerified: Bool

    public init(chainDER: [[UInt8]], ocspResponse: [UInt8]?, version: TLSVersion, cipher: CipherSuite, alpn: [UInt8]?,
                clientHello: [UInt8], serverHello: [UInt8], serverMessages: [TLSMessageSize], serverRecordLengths: [Int],
                helloRetryRequested: Bool, proofVerified: Bool) {
        self.chainDER = chainDER; self.ocspResponse = ocspResponse; self.version = version; self.cipher = cipher
        self.alpn = alpn; self.clientHello = clientHello; self.serverHello = serverHello
        self.serverMessages = serverMessages; self.serverRecordLengths = serverRecordLengths
        self.helloRetryRequested = helloRetryRequested; self.proofVerified = proofVerified
    }
}

/// One handshake message's type and length, the 4-byte header included.
public struct TLSMessageSize: Hashable, Sendable, CustomStringConvertible {
    public var type: UInt8
    public var length: Int
    public init(type: UInt8, length: Int) { self.type = type; self.length = length }
    public var description: String { "\(type):\(length)" }
}

/// Why a probe handshake failed. The descriptions go into alert lines (`probe_failed: handshake failed: ...`).
public enum ProbeClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server sent a fatal alert (its description code).
    case alert(UInt8)
    /// The server broke the protocol (a message out of order, a suite or group the probe did not offer, ...).
    case protocolViolation(String)
    /// The server's CertificateVerify, Finished or ServerKeyExchange signature does not verify.
    case verificationFailed(String)
    /// The server chose something the engine cannot perform although the client offered it (a group, suite or
    /// compression algorithm).
    case unsupported(String)
    /// A handshake message over the limit the probe reads (`maxCertificateList` for a Certificate).
    case messageTooLarge(type: UInt8, length: Int, limit: Int)
    case malformed(TLSParseError)
    case crypto(TLSCryptoError)

    /// Whether a larger `maxCertificateList` could read this server's chain.
    public var isExcessiveMessageSize: Bool {
        if case .messageTooLarge(let type, _, _) = self { return type == 11 || type == 25 }
        return false
    }

    public var description: String {
        switch self {
        case .alert(let code): "the server sent alert \(Self.alertName(code)) (\(code))"
        case .protocolViolation(let what): what
        case .verificationFailed(let what): what
        case .unsupported(let what): "unsupported: \(what)"
        case .messageTooLarge(let type, let length, let limit): "handshake message \(type) of \(length) bytes is over the \(limit) read"
        case .malformed(let error): "malformed: \(error)"
        case .crypto(let error): "\(error)"
        }
    }

    /// RFC 8446 §6 names of the alerts servers send during a handshake.
    static func alertName(_ code: UInt8) -> String {
        switch code {
        case 0: "close_notify"
        case 10: "unexpected_message"
        case 20: "bad_record_mac"
        case 40: "handshake_failure"
        case 42: "bad_certificate"
        case 47: "illegal_parameter"
        case 50: "decode_error"
        case 51: "decrypt_error"
        case 70: "protocol_version"
        case 71: "insufficient_security"
        case 80: "internal_error"
        case 86: "inappropriate_fallback"
        case 90: "user_canceled"
        case 109: "missing_extension"
        case 110: "unsupported_extension"
        case 112: "unrecognized_name"
        case 116: "certificate_required"
        case 120: "no_application_protocol"
        default: "alert"
        }
    }
}
