/// The hello with its per-connection parts blanked: equal for two hellos of the same client stack and settings. Used
/// to key probes (clients with equal shapes share a probe) and by tests comparing the probe's hello with the client's.
///
/// Blanked: the random and the legacy session id (zeros, length kept); key share values (zeros, lengths kept);
/// every GREASE value (all become 0x0A0A, GREASE extension types 0x0A0A, 0x1A1A, ... by place: where the stack
/// puts GREASE is its shape, which values it drew is not);
/// ECH GREASE config_id, enc (zeros, length kept) and payload (emptied: Chrome draws its length per connection).
/// Removed: pre_shared_key, early_data, padding; the session_ticket body is emptied. A stack that permutes its
/// extensions (`HelloStack`) has its permuted ones sorted by type, and its trust anchor IDs sorted.
///
/// Why not number GREASE values by first appearance (keeping which places repeat a value): BoringSSL draws its
/// cipher suite, extension, supported_versions and group GREASE independently, so two of them coincide by chance in
/// about half its hellos (three of the four Chrome fixtures: `chrome-1` repeats its first GREASE extension's value
/// in supported_versions); numbering would give one Chrome build many shapes. Equal values that are one draw (the
/// GREASE group in supported_groups and key_share) are one place in the stack's code, and the mirror keeps them equal.
///
/// Hashable by a digest taken once (FNV-1a, 64 bits): a shape keys the probe cache, the spot-check schedule and their
/// tables, several lookups per TLS 1.3 tunnel, and hashing its bytes one by one each time cost about 50 000
/// instructions per tunnel. Equality still compares the bytes.
public struct ClientHelloShape: Hashable, Sendable {
    /// The blanked hello, encoded as a handshake message.
    public let bytes: [UInt8]
    /// FNV-1a of `bytes`.
    public let digest: UInt64

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.digest == rhs.digest && lhs.bytes == rhs.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(digest) }

    /// `clientHello`: a ClientHello handshake message, 4-byte header included.
    public init(_ clientHello: [UInt8]) throws(HelloMirrorError) {
        var parts = try HelloParts(message: clientHello)
        let stack = HelloStack(parts)
        parts.random = [UInt8](repeating: 0, count: parts.random.count)
        parts.sessionID = [UInt8](repeating: 0, count: parts.sessionID.count)
        if var extensions = parts.extensions {
            if stack.permutes { extensions[stack.permutable].sort { $0.type < $1.type } }
            extensions.removeAll {
                $0.type == 21 || $0.type == TLSExtensionType.preSharedKey || $0.type == TLSExtensionType.earlyData
            }
            for index in extensions.indices {
                switch extensions[index].type {
                case TLSExtensionType.sessionTicket:
                    extensions[index].body = []
                case OuterECH.type:
                    if var ech = try OuterECH.parse(extensions[index].body) {
                        ech.configID = 0
                        ech.enc = [UInt8](repeating: 0, count: ech.enc.count)
                        ech.payload = []
                        extensions[index].body = ech.encoded()
                    }
                case TrustAnchorIDs.type where stack.permutes:
                    var anchors = try TrustAnchorIDs.parse(extensions[index].body)
                    anchors.ids.sort { $0.lexicographicallyPrecedes($1) }
                    extensions[index].body = anchors.encoded()
                case TLSExtensionType.keyShare:
                    let entries = try KeyShareEntry.parse(extensions[index].body).map {
                        KeyShareEntry(group: $0.group, value: [UInt8](repeating: 0, count: $0.value.count))
                    }
                    extensions[index].body = KeyShareEntry.encode(entries)
                default:
                    break
                }
            }
            parts.extensions = extensions
        }
        try parts.rewriteGREASE { _ in 0x0A0A }
        // GREASE extension types by place (first 0x0A0A, second 0x1A1A): two equal types would be one extension twice.
        if var extensions = parts.extensions {
            var place = 0
            for index in extensions.indices where isGREASE(extensions[index].type) {
                extensions[index].type = HelloMirrorRandom.greaseValues[place % 16]
                place += 1
            }
            parts.extensions = extensions
        }
        bytes = parts.encoded()
        digest = bytes.reduce(0xCBF2_9CE4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
    }
}
