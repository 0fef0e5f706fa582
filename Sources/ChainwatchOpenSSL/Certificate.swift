internal import COpenSSL
public import ChainwatchCore

/// An X.509 certificate held by OpenSSL, with its facts extracted once at init.
/// Owns one `X509 *`; immutable after init, so shareable across threads and event loops.
public final class Certificate: @unchecked Sendable {
    /// The `X509 *` this object owns.
    package let raw: OpaquePointer
    /// The DER encoding: the bytes given to `init(der:)`, else OpenSSL's `i2d_X509` encoding.
    public let der: [UInt8]
    /// Everything the checks need, computed at init (so repeated access costs nothing).
    public let facts: CertificateFacts

    /// Decodes one DER certificate. The bytes must hold exactly one certificate (no trailing bytes),
    /// and `der` keeps them as given, so `facts.sha256` is the fingerprint of what was sent.
    public convenience init(der: [UInt8]) throws(OpenSSLError) {
        ERR_clear_error()
        var consumed = 0
        let x509: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            let parsed = d2i_X509(nil, &cursor, buffer.count)
            if let cursor { consumed = cursor - base }
            return parsed
        }
        guard let x509 else { throw .drainingQueue(call: "d2i_X509") }
        guard consumed == der.count else {
            X509_free(x509)
            throw OpenSSLError(call: "d2i_X509", queue: ["\(der.count - consumed) bytes after the certificate"])
        }
        try self.init(takingOwnershipOf: x509, der: der)
    }

    /// Takes ownership of `raw` (freed with `X509_free` when this object goes, also when init throws).
    /// `der`, when given, must be the encoding `raw` was decoded from.
    package init(takingOwnershipOf raw: OpaquePointer, der: [UInt8]? = nil) throws(OpenSSLError) {
        self.raw = raw
        do throws(OpenSSLError) {
            let encoding: [UInt8]
            if let der { encoding = der } else { encoding = try Certificate.encode(raw) }
            self.der = encoding
            self.facts = try Certificate.extractFacts(raw, der: encoding)
        } catch {
            X509_free(raw)
            throw error
        }
    }

    /// Borrows `raw` (an `X509 *` owned by someone else) by taking a reference of its own (`X509_up_ref`).
    /// `der`, when given, must be `raw`'s encoding.
    package convenience init(borrowing raw: OpaquePointer, der: [UInt8]? = nil) throws(OpenSSLError) {
        guard X509_up_ref(raw) == 1 else { throw .drainingQueue(call: "X509_up_ref") }
        try self.init(takingOwnershipOf: raw, der: der)
    }

    deinit { X509_free(raw) }

    /// Every `CERTIFICATE` block of a PEM text (a bundle, a full chain), in order; other blocks
    /// (keys, parameters) are skipped. Throws when a block is corrupt or none is found.
    public static func parsePEM(_ pem: String) throws(OpenSSLError) -> [Certificate] {
        try parsePEM(Array(pem.utf8))
    }

    /// Every `CERTIFICATE` block of PEM bytes, in order. See `parsePEM(_: String)`.
    public static func parsePEM(_ pem: [UInt8]) throws(OpenSSLError) -> [Certificate] {
        ERR_clear_error()
        guard let bio = BIO_new(BIO_s_mem()) else { throw .drainingQueue(call: "BIO_new") }
        defer { BIO_free(bio) }
        if !pem.isEmpty {
            let written = pem.withUnsafeBytes { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
            guard written == Int32(pem.count) else { throw .drainingQueue(call: "BIO_write") }
        }
        var certificates: [Certificate] = []
        while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) {
            certificates.append(try Certificate(takingOwnershipOf: x509))
        }
        // The loop ends with "no start line" at the end of the text; anything else is a corrupt block.
        let last = ERR_peek_last_error()
        if last != 0 && !(ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
            throw .drainingQueue(call: "PEM_read_bio_X509")
        }
        ERR_clear_error()
        guard !certificates.isEmpty else {
            throw OpenSSLError(call: "PEM_read_bio_X509", queue: ["no CERTIFICATE block found"])
        }
        return certificates
    }

    /// `i2d_X509` of `raw` (borrowed).
    static func encode(_ raw: OpaquePointer) throws(OpenSSLError) -> [UInt8] {
        let length = i2d_X509(raw, nil)
        guard length > 0 else { throw .drainingQueue(call: "i2d_X509") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(raw, &cursor)
        }
        guard written == length else { throw .drainingQueue(call: "i2d_X509") }
        return bytes
    }
}

extension Certificate: Hashable {
    /// Certificates are equal when their DER encodings are.
    public static func == (a: Certificate, b: Certificate) -> Bool { a.der == b.der }
    public func hash(into hasher: inout Hasher) { hasher.combine(facts.sha256) }
}

extension Certificate: CustomStringConvertible {
    public var description: String { "Certificate(\(facts.subject), issuer: \(facts.issuer))" }
}
