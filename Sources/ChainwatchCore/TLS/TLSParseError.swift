/// Why a byte stream can never be a valid TLS handshake. "Needs more bytes" is not an error: `TLSObserver.next()` returns nil.
public enum TLSParseError: Error, Equatable, Sendable {
    /// The stream does not start like TLS: the first record is not a handshake or alert record of protocol 3.x
    /// (e.g. `GET ` of plain HTTP, an SSLv2-framed hello).
    case notTLS
    /// A later record header names a content type outside 20...23.
    case unexpectedContentType(UInt8)
    /// A ChangeCipherSpec record arrived while a handshake message was only partly received.
    case changeCipherSpecInsideMessage
    /// A ChangeCipherSpec record does not hold exactly the single byte 1.
    case badChangeCipherSpec
    /// A later record header's protocol version is not 3.x.
    case badRecordVersion(UInt16)
    /// A record announces more payload than TLS allows for its content type.
    case recordTooLong(length: Int, limit: Int)
    /// A single handshake message given to a parser (`ClientHello.parse(handshakeMessage:)`) is of another type.
    case unexpectedHandshakeType(UInt8)
    /// A handshake message announces a body larger than the parser's limit (`TLSObserver.messageLimit`).
    case messageTooLong(type: UInt8, length: Int, limit: Int)
    /// A fixed-size field (or a length prefix) runs past the end of its container.
    case truncatedField(String)
    /// A length prefix disagrees with the bytes its container holds.
    case badLength(field: String, declared: Int, available: Int)
    /// A container holds bytes after its last field.
    case trailingBytes(String)
    /// The same extension type appears twice in one hello (two SNIs could make chainwatch and the server disagree).
    case duplicateExtension(UInt16)
    /// The server_name extension is malformed: empty or non-printable host name, or two host names.
    case invalidServerName
}

/// A sentence for findings and logs (`client: not TLS ...`, not the case name).
extension TLSParseError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .notTLS: "not TLS: the first bytes are not a TLS handshake or alert record"
        case .unexpectedContentType(let type): "a record of content type \(type), which TLS does not have"
        case .changeCipherSpecInsideMessage: "a ChangeCipherSpec record inside a handshake message"
        case .badChangeCipherSpec: "a ChangeCipherSpec record that is not the single byte 1"
        case .badRecordVersion(let version): "a record of protocol version 0x\(String(version, radix: 16)), not 3.x"
        case .recordTooLong(let length, let limit): "a record of \(length) bytes, over TLS's \(limit)"
        case .unexpectedHandshakeType(let type): "a handshake message of type \(type) where another was expected"
        case .messageTooLong(let type, let length, let limit): "a handshake message of type \(type) announcing \(length) bytes, over the \(limit) read"
        case .truncatedField(let field): "\(field) runs past the end of its container"
        case .badLength(let field, let declared, let available): "\(field) declares \(declared) bytes where \(available) are"
        case .trailingBytes(let container): "bytes after the last field of \(container)"
        case .duplicateExtension(let type): "extension \(type) twice in one hello"
        case .invalidServerName: "a server_name that is not one printable host name"
        }
    }
}
