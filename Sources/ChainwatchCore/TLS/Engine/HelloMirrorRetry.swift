/// The probe's ClientHello: the client's, with every per-connection part drawn afresh (`HelloMirror.mirror`).
public struct MirroredHello: Sendable {
    /// The handshake message (type 1, 3-byte length, body), ready to frame in records.
    public let message: [UInt8]
    /// The key exchanges behind the key_share entries this engine can perform, in order (GREASE and unsupported
    /// groups left out).
    public let keyExchanges: [any TLSKeyExchange]
    /// The message's fields, for the retry.
    let parts: HelloParts

    init(parts: HelloParts, keyExchanges: [any TLSKeyExchange]) {
        self.parts = parts
        self.keyExchanges = keyExchanges
        message = parts.encoded()
    }

    /// The second ClientHello after a HelloRetryRequest that asked for `group` (nil: no key_share change) and sent
    /// `cookie` (nil: none): built as the client's stack builds it (RFC 8446 §4.1.2: same as the first but key_share
    /// holds one share for the group, the cookie extension added, early_data removed; same GREASE values and
    /// extension order as this hello). The random, session id and ECH GREASE stay as in this hello. The cookie goes
    /// where the client's stack puts it (`HelloStack.cookieIndex`); padding is recomputed (BoringSSL: dropped).
    public func retry(group: UInt16?, cookie: [UInt8]?, crypto: any TLSCrypto) throws(HelloMirrorError) -> MirroredHello {
        var next = parts
        var exchanges = keyExchanges
        let stack = HelloStack(parts)
        if let group {
            guard try next.codePoints(of: TLSExtensionType.supportedGroups).contains(group) else {
                throw .retryGroupNotOffered(group)
            }
            guard let index = next.index(of: TLSExtensionType.keyShare), let body = next.extensions?[index].body else {
                throw .malformedExtension(TLSExtensionType.keyShare)
            }
            guard try !KeyShareEntry.parse(body).contains(where: { $0.group == group }) else {
                throw .retryGroupAlreadyShared(group)
            }
            guard let exchange = try HelloMirror.exchange(group, x25519: nil, crypto) else {
                throw .retryGroupUnsupported(group)
            }
            next.extensions?[index].body = KeyShareEntry.encode([KeyShareEntry(group: group, value: exchange.publicShare)])
            exchanges = [exchange]
        }
        next.extensions?.removeAll { $0.type == TLSExtensionType.earlyData }
        if let cookie {
            guard !cookie.isEmpty, cookie.count <= 0xFFFF - 2 else { throw .badLength(field: "cookie") }
            var body: [UInt8] = []
            body.appendUInt16(UInt16(cookie.count))
            body += cookie
            let cookieExtension = HelloParts.Extension(type: Self.cookieType, body: body)
            if let index = next.index(of: Self.cookieType) {
                next.extensions?[index] = cookieExtension
            } else {
                let index = stack.cookieIndex(in: next, random: HelloMirrorRandom(crypto: crypto))
                next.extensions = (next.extensions ?? [])
                next.extensions?.insert(cookieExtension, at: index)
            }
        }
        // Checked before encoding (repad encodes): padding only ever fills a hello up to 0x200 bytes.
        guard next.extensionsLength <= 0xFFFF else { throw .badLength(field: "cookie") }
        stack.repad(&next, afterRetry: true)
        return MirroredHello(parts: next, keyExchanges: exchanges)
    }

    /// The cookie extension (RFC 8446 §4.2.2).
    static let cookieType: UInt16 = 44
}

extension HelloParts {
    /// The bytes of the extensions block's contents.
    var extensionsLength: Int { (extensions ?? []).reduce(0) { $0 + 4 + $1.body.count } }

    /// The code points listed in the extension of `type` (supported_groups, signature_algorithms, ...), GREASE
    /// included; empty when the hello has no such extension.
    func codePoints(of type: UInt16) throws(HelloMirrorError) -> [UInt16] {
        guard let index = index(of: type), let ext = extensions?[index] else { return [] }
        return try Self.codePointOffsets(ext).map { UInt16(ext.body[$0]) << 8 | UInt16(ext.body[$0 + 1]) }
    }
}
