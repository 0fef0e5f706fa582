/// Why a ClientHello cannot be mirrored (or a mirrored one retried). Each case names what was wrong, so a probe that
/// could not start says why.
public enum HelloMirrorError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The handshake message is not a ClientHello (its type byte is not 1).
    case notClientHello(handshakeType: UInt8)
    /// A field or length prefix runs past the end of its container (the field's name).
    case truncated(field: String)
    /// A container holds bytes after its last field, or a length prefix disagrees with its container.
    case badLength(field: String)
    /// The same extension type appears twice.
    case duplicateExtension(UInt16)
    /// An extension this mirror rewrites (key_share, supported_groups, ECH, ...) does not parse.
    case malformedExtension(UInt16)
    /// The crypto's key share for `group` is not as long as the client's: the probe would differ in length.
    case keyShareLengthMismatch(group: UInt16, client: Int, probe: Int)
    /// The crypto failed to make a key for `group` for a reason other than not supporting it.
    case keyExchangeFailed(group: UInt16, reason: String)
    /// A HelloRetryRequest asked for a group the hello does not list in supported_groups (the client aborts).
    case retryGroupNotOffered(UInt16)
    /// A HelloRetryRequest asked for a group the hello already sent a share for (RFC 8446 §4.1.4: the client aborts).
    case retryGroupAlreadyShared(UInt16)
    /// A HelloRetryRequest asked for a group the crypto cannot perform.
    case retryGroupUnsupported(UInt16)

    public var description: String {
        switch self {
        case .notClientHello(let type): "not a ClientHello: handshake type \(type)"
        case .truncated(let field): "truncated ClientHello: \(field)"
        case .badLength(let field): "ClientHello length mismatch: \(field)"
        case .duplicateExtension(let type): "duplicate extension \(type.hexDescription) in ClientHello"
        case .malformedExtension(let type): "malformed extension \(type.hexDescription) in ClientHello"
        case .keyShareLengthMismatch(let group, let client, let probe):
            "key share for group \(group.hexDescription): the client's is \(client) bytes, the probe's \(probe)"
        case .keyExchangeFailed(let group, let reason): "key exchange for group \(group.hexDescription) failed: \(reason)"
        case .retryGroupNotOffered(let group): "HelloRetryRequest asked for group \(group.hexDescription), which the hello does not offer"
        case .retryGroupAlreadyShared(let group): "HelloRetryRequest asked for group \(group.hexDescription), which the hello already shared"
        case .retryGroupUnsupported(let group): "HelloRetryRequest asked for group \(group.hexDescription), which the probe cannot perform"
        }
    }

    /// A ByteReader failure as the mirror reports it.
    init(_ error: TLSParseError) {
        switch error {
        case .truncatedField(let field): self = .truncated(field: field)
        case .badLength(let field, _, _): self = .badLength(field: field)
        case .trailingBytes(let container): self = .badLength(field: container)
        case .duplicateExtension(let type): self = .duplicateExtension(type)
        case .unexpectedHandshakeType(let type): self = .notClientHello(handshakeType: type)
        default: self = .badLength(field: "\(error)")
        }
    }
}
