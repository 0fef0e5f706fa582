import ChainwatchCore
internal import COpenSSL

/// What one finished `TLSClient` handshake saw. Plain values.
public struct TLSClientResult: Hashable, Sendable {
    /// The server's certificates as sent (DER), leaf first, in the server's order: not a validated path.
    /// Empty when the server sent none.
    public let chainDER: [[UInt8]]
    /// The OCSP response the server stapled (when the offer asked for one, as the client's did); nil when none.
    public let ocspResponse: [UInt8]?
    /// `Digest.sha256(chain: chainDER, stapled: ocspResponse)`, made once with the result (it keys the verdict cache,
    /// and a probe's result is judged for every tunnel it covers); nil when OpenSSL could not make it, or for a chain
    /// over 224 KiB, which the verdict cache does not keep.
    public let chainDigest: [UInt8]?
    /// The negotiated version.
    public var version: TLSVersion
    /// The negotiated suite.
    public var cipher: CipherSuite
    /// The protocol the server selected from the ALPN offer, if any.
    public var alpn: String?
    /// The client's own first ClientHello handshake message, 4-byte header included.
    public var clientHello: [UInt8]
    /// The final ServerHello handshake message (never a HelloRetryRequest), header included.
    public var serverHello: [UInt8]
    /// The handshake messages received after the final ServerHello, in order (TLS 1.3: EncryptedExtensions 8,
    /// Certificate 11, CertificateVerify 15, Finished 20).
    public var serverMessages: [TLSMessageSize]
    /// The payload lengths of the server's application_data (23) records read after the final ServerHello: in
    /// TLS 1.3 the encrypted flight as a passive observer of a tunnel sees it.
    public var serverRecordLengths: [Int]
    /// Whether the server answered the first ClientHello with a HelloRetryRequest.
    public var helloRetryRequested: Bool
    /// `clientHello` and `serverHello` parsed, once, when the result was made (a probe's result is compared with
    /// every tunnel it covers); nil when they cannot be (OpenSSL's own bytes: not expected).
    public private(set) var parsedClientHello: ClientHello?
    public private(set) var parsedServerHello: ServerHello?
    /// The JA4 of `parsedClientHello`, made once (every alert line about a tunnel this probe covers carries it).
    public private(set) var ja4: String?
    /// `serverMessages` and `serverRecordLengths` as `FlightAgreement` compares them, made once with the result.
    public private(set) var flight: FlightAgreement.ProbeFlight

    public init(chainDER: [[UInt8]], version: TLSVersion, cipher: CipherSuite, alpn: String?, clientHello: [UInt8] = [],
                serverHello: [UInt8] = [], serverMessages: [TLSMessageSize] = [], serverRecordLengths: [Int] = [],
                helloRetryRequested: Bool = false, ocspResponse: [UInt8]? = nil) {
        self.chainDER = chainDER; self.ocspResponse = ocspResponse
        // Not for a chain the verdict cache does not keep (over 224 KiB, read with room): the hash of up to 16 MiB
        // would be taken on the loop for a key nothing looks up.
        chainDigest = chainDER.reduce(0) { $0 + $1.count } <= TLSObserver.maxServerHandshakeMessageLength
            ? try? Digest.sha256(chain: chainDER, stapled: ocspResponse) : nil
        self.version = version; self.cipher = cipher; self.alpn = alpn
        self.clientHello = clientHello; self.serverHello = serverHello; self.serverMessages = serverMessages
        self.serverRecordLengths = serverRecordLengths; self.helloRetryRequested = helloRetryRequested
        parsedClientHello = clientHello.isEmpty ? nil : try? ClientHello.parse(handshakeMessage: clientHello)
        parsedServerHello = serverHello.isEmpty ? nil : try? ServerHello.parse(handshakeMessage: serverHello)
        ja4 = parsedClientHello?.ja4
        flight = FlightAgreement.ProbeFlight(messages: serverMessages.map { ($0.type, $0.length) }, recordLengths: serverRecordLengths)
    }
}

extension TLSClientResult {
    /// What chainwatch's own client (`ProbeClient`) saw, in the form the inspection compares.
    public init(_ result: ProbeClientResult) {
        self.init(chainDER: result.chainDER, version: result.version, cipher: result.cipher,
                  alpn: result.alpn.map { String(decoding: $0, as: UTF8.self) }, clientHello: result.clientHello,
                  serverHello: result.serverHello, serverMessages: result.serverMessages,
                  serverRecordLengths: result.serverRecordLengths, helloRetryRequested: result.helloRetryRequested,
                  ocspResponse: result.ocspResponse)
    }
}

/// Collects what `SSL_set_msg_callback` reports during one handshake. Owned by its `TLSClient`; the callback
/// borrows it through the `SSL`'s callback argument. Thread of the client only.
final class HandshakeCapture {
    var clientHello: [UInt8] = []
    var serverHello: [UInt8] = []
    var serverMessages: [TLSMessageSize] = []
    var serverRecordLengths: [Int] = []
    var helloRetryRequested = false
    private var afterServerHello = false

    /// The ServerHello random that marks a HelloRetryRequest (RFC 8446 §4.1.3).
    static let helloRetryRandom: [UInt8] = [
        0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
        0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
    ]

    func message(sent: Bool, contentType: Int32, bytes: UnsafeRawBufferPointer) {
        if contentType == c_openssl_SSL3_RT_HEADER() {
            // A record header: type, version, length. Only the server's application_data after the ServerHello.
            guard !sent, afterServerHello, bytes.count >= 5, bytes[0] == 23 else { return }
            serverRecordLengths.append(Int(bytes[3]) << 8 | Int(bytes[4]))
            return
        }
        guard contentType == SSL3_RT_HANDSHAKE, bytes.count >= 4 else { return }
        let type = bytes[0]
        if sent {
            if type == 1, clientHello.isEmpty { clientHello = Array(bytes) }
            return
        }
        if type == 2 {
            let isRetry = bytes.count >= 38 && bytes[6..<38].elementsEqual(Self.helloRetryRandom)
            if isRetry {
                helloRetryRequested = true
                afterServerHello = false
            } else {
                serverHello = Array(bytes)
                afterServerHello = true
            }
            serverMessages = []
            serverRecordLengths = []
        } else if afterServerHello {
            serverMessages.append(TLSMessageSize(type: type, length: bytes.count))
        }
    }
}

extension TLSClientResult: InspectionProbe {}
