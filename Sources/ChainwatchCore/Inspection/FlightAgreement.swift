/// Whether a TLS 1.3 tunnel's encrypted server flight has the size of the one chainwatch's probe got from the same
/// address with the same offer. The certificate is encrypted, but its size is not: a forged chain is another chain,
/// and the EncryptedExtensions, Certificate, CertificateVerify and Finished messages it travels in add up to another
/// length. An interceptor that spares the probe, or forges only after the probe was cached, and copies the genuine
/// ServerHello (`EvidenceAgreement`) still has to send its own certificates here.
///
/// The probe knows its flight in plain text (each message's length) and as records (their lengths), so it first
/// tells whether this server's records are plain messages plus the fixed AEAD overhead (one content-type byte and
/// the tag): a server that pads its records, or packs other messages with them, cannot be compared
/// (`.undecidable`). Then the tunnel's first records, as many as the probe's flight took, must each have the length
/// of the probe's record, exactly, but for `signatureSlack` bytes where the CertificateVerify is (an ECDSA
/// signature's DER length varies). A genuine server that cut its flight into other records for the client than for
/// the probe would differ; OpenSSL, BoringSSL, Go and rustls cut the same flight the same way every time.
///
/// Cannot decide: a resumed session (no certificate), a server that pads records, and a probe that did not send the
/// client's hello (OpenSSL's client, for an offer made from no hello) when the client offered an extension the probe
/// did not (certificate compression, record_size_limit, application_settings change what the server sends). The
/// probe sends the client's own hello (`HelloMirror`), extensions and all, so for a tunnel's probe that last case
/// does not arise: a server that compresses its certificate for the client compresses it for the probe. Passes, by construction: a forged chain of exactly the
/// genuine chain's length, cut into the same records (a forger who knows this can re-sign until the DER lengths
/// match; the probe's freshness is then what bounds it).
public enum FlightAgreement {
    public enum Outcome: Equatable, Sendable {
        case agrees
        case differs(String)
        /// The tunnel's records do not reach the probe's flight yet: feed more, or decide `flightEnded`.
        case needsMoreRecords
        case undecidable(String)
    }

    /// Bytes a record carrying the CertificateVerify may differ by: an ECDSA signature's two DER integers each lose a
    /// byte when their top bit is clear, and may lose more, rarely. Every other record must match exactly (a staple
    /// refreshed since the probe differs too; the fresh probe made on any difference then agrees).
    public static let signatureSlack = 4

    /// The probe's side: the server's handshake messages after its ServerHello, in order (type, length with the
    /// 4-byte header), and the payload lengths of the encrypted records that carried them.
    public struct ProbeFlight: Hashable, Sendable {
        public struct Message: Hashable, Sendable {
            public var type: UInt8
            public var length: Int
        }
        public var messages: [Message]
        public var recordLengths: [Int]
        public init(messages: [(type: UInt8, length: Int)], recordLengths: [Int]) {
            self.messages = messages.map { Message(type: $0.type, length: $0.length) }
            self.recordLengths = recordLengths
        }
    }

    static let finished: UInt8 = 20
    static let certificateVerify: UInt8 = 15
    static let compressCertificate: UInt16 = 27
    /// Offered extensions that change nothing the server sends in a full handshake: padding, and a pre-shared key
    /// or early data the server turned down (had it taken them, the session is resumed and not compared).
    static let inert: [UInt16] = [21, 41, 42]

    /// - Parameters:
    ///   - tunnel: the encrypted records the tunnel's server sent after its ServerHello, in order, as far as seen.
    ///   - tracking: how the tunnel's record walk stands (`.full` and `.invalidHeader` end it).
    ///   - flightEnded: no more records will be waited for (the flight's deadline passed, or the stream ended).
    ///   - probeClientHello: the probe's own ClientHello: an extension the client offered and the probe did not (a
    ///     probe made by OpenSSL's client) can change what the server sends the client, so the flights are then not
    ///     compared.
    public static func compare(tunnel: [EncryptedRecord], tracking: EncryptedRecordTracking, flightEnded: Bool,
                               probe: ProbeFlight, serverHello: ServerHello, clientHello: ClientHello,
                               probeClientHello: ClientHello) -> Outcome {
        if serverHello.resumes(clientHello) { return .undecidable("a resumed session sends no certificate") }
        let unmatched = clientHello.extensionTypes.filter { !inert.contains($0) && !probeClientHello.extensionTypes.contains($0) }
        if !unmatched.isEmpty {
            let names = unmatched.map { $0 == compressCertificate ? "27 (certificate compression)" : String($0) }
            return .undecidable("the client offered extension(s) the probe cannot: \(names.joined(separator: ", "))")
        }
        guard let finishedIndex = probe.messages.firstIndex(where: { $0.type == finished }) else {
            return .undecidable("the probe saw no Finished")
        }
        let overhead = 1 + tagLength(serverHello.cipherSuite)
        let flight = probe.messages[...finishedIndex].reduce(0) { $0 + $1.length }
        let probeRecords = probe.recordLengths.reduce(0) { $0 + $1 - overhead }
        guard !probe.recordLengths.isEmpty, probeRecords == flight else {
            return .undecidable("the server's records are not its messages plus AEAD overhead (padding)")
        }
        if tracking == .invalidHeader { return .differs("the tunnel's server sent a record header no TLS server sends") }

        // The same server cuts the same flight into the same records, and every byte of it is the same but the
        // CertificateVerify signature's (an ECDSA signature's DER length varies by a few bytes): each record must
        // have the probe's length, exactly, or within `signatureSlack` for a record that carries the signature.
        // Record by record, not a running sum: a forger cannot line a longer certificate up with the genuine total.
        let signature = signatureRange(probe.messages[...finishedIndex])
        var plainOffset = 0
        var expected: [(length: Int, slack: Int)] = []
        for length in probe.recordLengths {
            let plain = plainOffset..<(plainOffset + length - overhead)
            plainOffset = plain.upperBound
            expected.append((length, signature.map { plain.overlaps($0) ? signatureSlack : 0 } ?? signatureSlack))
        }
        let records = Array(tunnel.lazy.filter { $0.contentType == 23 }.map(\.length).prefix(expected.count))
        for (index, length) in records.enumerated() where abs(length - expected[index].length) > expected[index].slack {
            return .differs("encrypted server record \(index + 1) of the flight is \(length) bytes in the tunnel, \(expected[index].length) in the probe")
        }
        guard records.count == expected.count else {
            if tracking == .full || flightEnded {
                return .differs("the encrypted server flight stopped after \(records.count) of the probe's \(expected.count) record(s)")
            }
            return .needsMoreRecords
        }
        return .agrees
    }

    /// Where the CertificateVerify message lies in the flight's plaintext.
    private static func signatureRange(_ messages: ArraySlice<ProbeFlight.Message>) -> Range<Int>? {
        var offset = 0
        for message in messages {
            if message.type == certificateVerify { return offset..<(offset + message.length) }
            offset += message.length
        }
        return nil
    }

    /// The AEAD tag of a TLS 1.3 suite: 16 bytes, 8 for TLS_AES_128_CCM_8_SHA256.
    static func tagLength(_ suite: CipherSuite) -> Int { suite.rawValue == 0x1305 ? 8 : 16 }
}
