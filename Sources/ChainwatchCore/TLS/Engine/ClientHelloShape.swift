/// The hello with its per-connection parts blanked: equal for two hellos of the same client stack and settings. Used
/// to key probes (clients with equal shapes share a probe) and by tests comparing the probe's hello with the client's.
///
/// Blanked: the random and the legacy session id (zeros, length kept); key share values (zeros, lengths kept), but
/// for a GREASE share's value, kept as sent (BoringSSL's one zero byte), and for a hybrid's X25519 half
/// (X25519MLKEM768's last 32 bytes, X25519Kyber768Draft00's first 32), which is ones when it is the hello's x25519
/// share (Go's), zeros when not;
/// every GREASE value (all become 0x0A0A, GREASE extension types 0x0A0A, 0x1A1A, ... by place: where the stack
/// puts GREASE is its shape, which values it drew is not);
/// ECH GREASE config_id, enc (zeros, length kept) and payload (zeros, length kept; for a BoringSSL-shaped hello whose
/// length is one of BoringSSL's four, `OuterECH.boringSSLPayloadLengths`, which it draws per connection, the one byte
/// `OuterECH.drawnPayloadMark`, which no kept length blanks to).
/// Removed: pre_shared_key; padding and early_data keep their place with an empty body; the session_ticket body is
/// emptied. A stack that permutes its
/// extensions (`HelloStack`) has its permuted ones sorted by type, and its trust anchor IDs sorted.
///
/// Whatever the mirror copies from the hello it is given is kept here, and whatever the shape blanks the mirror
/// draws by the stack's rules alone (`HelloMirror`): clients with equal shapes share a probe, made from the hello of
/// whichever came first, so a byte the mirror copied and the shape blanked would let one client mark the probe of
/// every other (a client that sent the victim stack's hello with another GREASE key share value, or other GREASE
/// values repeated, and an interceptor that spared hellos bearing that mark). The record's version, which the probe
/// also copies, is part of `ClientOffer`'s equality.
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
///
/// Made in one pass over the hello, written into one buffer: every warm TLS 1.3 tunnel makes its client's shape to
/// find its probe, and taking the hello apart into an array per extension and putting it back together cost about
/// 37 000 instructions a tunnel. `HelloParts` (the mirror's reading) and this pass agree byte for byte, thrown or not
/// (`HelloMirrorShapeTests`, over every fixture and mutations of them).
public struct ClientHelloShape: Hashable, Sendable {
    /// The blanked hello, encoded as a handshake message.
    public let bytes: [UInt8]
    /// FNV-1a of `bytes`.
    public let digest: UInt64

    /// The digests, then the bytes eight at a time (a probe-cache hit compares a whole blanked hello).
    public static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.digest == rhs.digest, lhs.bytes.count == rhs.bytes.count else { return false }
        // Reads within both buffers only: `offset + 8 <= count`, then single bytes below `count` (the counts are equal).
        return unsafe lhs.bytes.withUnsafeBytes { left in
            unsafe rhs.bytes.withUnsafeBytes { right in
                var offset = 0
                while offset + 8 <= left.count {
                    guard unsafe left.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                        == right.loadUnaligned(fromByteOffset: offset, as: UInt64.self) else { return false }
                    offset += 8
                }
                while offset < left.count {
                    guard unsafe left[offset] == right[offset] else { return false }
                    offset += 1
                }
                return true
            }
        }
    }
    public func hash(into hasher: inout Hasher) { hasher.combine(digest) }

    /// A shape as given (tests: equal digests over other bytes).
    init(bytes: [UInt8], digest: UInt64) {
        self.bytes = bytes
        self.digest = digest
    }

    /// `clientHello`: a ClientHello handshake message, 4-byte header included.
    public init(_ clientHello: [UInt8]) throws(HelloMirrorError) {
        let layout: Layout
        do {
            layout = try Layout(clientHello)
        } catch {
            throw HelloMirrorError(error)
        }
        bytes = try Self.blanked(clientHello, layout)
        digest = bytes.reduce(0xCBF2_9CE4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
    }

    /// Where a hello's fields lie in its message, read with `HelloParts`' checks (the same hellos are refused).
    private struct Layout {
        var version: Range<Int>
        var sessionIDCount: Int
        var suites: Range<Int>
        var compression: Range<Int>
        /// nil: no extensions block.
        var extensions: [(type: UInt16, body: Range<Int>)]?

        init(_ message: [UInt8]) throws(TLSParseError) {
            var reader = ByteReader(message[...])
            let type = try reader.readUInt8("handshake type")
            guard type == 1 else { throw .unexpectedHandshakeType(type) }
            var body = try reader.readVector(lengthBytes: 3, "ClientHello")
            try reader.expectEnd("ClientHello handshake message")
            version = try body.readBytes(2, "ClientHello.legacy_version").indices
            _ = try body.readBytes(32, "ClientHello.random")
            sessionIDCount = try body.readSessionID("ClientHello.legacy_session_id").count
            var suiteList = try body.readVector(lengthBytes: 2, "ClientHello.cipher_suites")
            suites = suiteList.readRest().indices
            if suites.count % 2 == 1 { throw .truncatedField("ClientHello.cipher_suites") }
            var methods = try body.readVector(lengthBytes: 1, "ClientHello.legacy_compression_methods")
            compression = methods.readRest().indices
            guard !body.isAtEnd else { extensions = nil; return }
            var list = try body.readVector(lengthBytes: 2, "ClientHello.extensions")
            try body.expectEnd("ClientHello")
            var found: [(type: UInt16, body: Range<Int>)] = []
            found.reserveCapacity(32)
            while !list.isAtEnd {
                let type = try list.readUInt16("ClientHello.extension_type")
                var data = try list.readVector(lengthBytes: 2, "ClientHello.extension_data")
                guard !found.contains(where: { $0.type == type }) else { throw .duplicateExtension(type) }
                found.append((type, data.readRest().indices))
            }
            extensions = found
        }
    }

    private static func blanked(_ message: [UInt8], _ layout: Layout) throws(HelloMirrorError) -> [UInt8] {
        var out: [UInt8] = [1, 0, 0, 0]
        out.reserveCapacity(message.count)
        out += message[layout.version]
        out.append(contentsOf: repeatElement(0, count: 32))
        out.append(UInt8(layout.sessionIDCount))
        out.append(contentsOf: repeatElement(0, count: layout.sessionIDCount))
        out.appendUInt16(UInt16(layout.suites.count))
        appendCodePoints(message[...], layout.suites, to: &out)
        out.append(UInt8(layout.compression.count))
        out += message[layout.compression]
        if let extensions = layout.extensions {
            let stack = HelloStack(types: extensions.map(\.type))
            let (hybridSharesX25519, kyberSharesX25519) = Self.hybridsShareX25519(message, extensions)
            var order = Array(extensions.indices)
            if stack.permutes { order[stack.permutable].sort { extensions[$0].type < extensions[$1].type } }
            let listStart = out.count
            out += [0, 0]
            var place = 0
            for index in order {
                let (type, body) = extensions[index]
                if type == TLSExtensionType.preSharedKey { continue }
                // padding and early_data: where they are, not what they hold. The mirror keeps a padding extension
                // where the hello has one (and adds none), and `HelloStack` reads both types' places: a hello that
                // moved or left out either (to mark the probe made from it, or to have it follow another stack's
                // rules) is a shape of its own.
                if type == 21 || type == TLSExtensionType.earlyData {
                    out.appendUInt16(type)
                    out += [0, 0]
                    continue
                }
                // GREASE extension types by place (first 0x0A0A, second 0x1A1A): two equal types would be one
                // extension twice.
                if isGREASE(type) {
                    out.appendUInt16(HelloMirrorRandom.greaseValues[place % 16])
                    place += 1
                } else {
                    out.appendUInt16(type)
                }
                let bodyStart = out.count
                out += [0, 0]
                try appendBlankedBody(type, message[body], stack: stack, hybridSharesX25519: hybridSharesX25519,
                                      kyberSharesX25519: kyberSharesX25519, to: &out)
                patchUInt16(out.count - bodyStart - 2, at: bodyStart, in: &out)
            }
            patchUInt16(out.count - listStart - 2, at: listStart, in: &out)
        }
        let length = out.count - 4
        out[1] = UInt8(length >> 16 & 0xFF)
        out[2] = UInt8(length >> 8 & 0xFF)
        out[3] = UInt8(length & 0xFF)
        return out
    }

    /// One extension's body, blanked: what `HelloParts` would hold after the shape's rewrites, then every GREASE code
    /// point (`HelloParts.codePointOffsets`) as 0x0A0A.
    private static func appendBlankedBody(_ type: UInt16, _ body: ArraySlice<UInt8>, stack: HelloStack,
                                          hybridSharesX25519: Bool, kyberSharesX25519: Bool,
                                          to out: inout [UInt8]) throws(HelloMirrorError) {
        let start = body.startIndex, count = body.count
        switch type {
        case TLSExtensionType.sessionTicket:
            break
        case OuterECH.type:
            guard var ech = try OuterECH.parse(Array(body)) else { return out += body }
            ech.configID = 0
            ech.enc = [UInt8](repeating: 0, count: ech.enc.count)
            ech.payload = ech.drawsPayloadLength(stack) ? OuterECH.drawnPayloadMark : [UInt8](repeating: 0, count: ech.payload.count)
            out += ech.encoded()
        case TrustAnchorIDs.type where stack.permutes:
            var anchors = try TrustAnchorIDs.parse(Array(body))
            anchors.ids.sort { $0.lexicographicallyPrecedes($1) }
            out += anchors.encoded()
        case TLSExtensionType.keyShare:
            // A 2-byte list length, then entries (group, 2-byte length, value); nothing after.
            guard count >= 2, Int(body[start]) << 8 | Int(body[start + 1]) == count - 2 else {
                throw .malformedExtension(type)
            }
            out += body.prefix(2)
            var offset = start + 2
            while offset < body.endIndex {
                guard body.endIndex - offset >= 4 else { throw .malformedExtension(type) }
                let length = Int(body[offset + 2]) << 8 | Int(body[offset + 3])
                guard body.endIndex - offset - 4 >= length else { throw .malformedExtension(type) }
                let group = UInt16(body[offset]) << 8 | UInt16(body[offset + 1])
                appendCodePoints(body, offset..<offset + 2, to: &out)
                out += body[offset + 2..<offset + 4]
                if isGREASE(group) {
                    out += body[offset + 4..<offset + 4 + length]
                } else if group == Self.hybridGroup, length >= 32 {
                    out.append(contentsOf: repeatElement(0, count: length - 32))
                    out.append(contentsOf: repeatElement(hybridSharesX25519 ? 1 : 0, count: 32))
                } else if group == Self.kyberDraftGroup, length >= 32 {
                    out.append(contentsOf: repeatElement(kyberSharesX25519 ? 1 : 0, count: 32))
                    out.append(contentsOf: repeatElement(0, count: length - 32))
                } else {
                    out.append(contentsOf: repeatElement(0, count: length))
                }
                offset += 4 + length
            }
        case 10, 13, 34, 50:   // supported_groups, signature_algorithms, delegated_credentials, signature_algorithms_cert
            guard count >= 2, Int(body[start]) << 8 | Int(body[start + 1]) == count - 2, count % 2 == 0 else {
                throw .malformedExtension(type)
            }
            out += body.prefix(2)
            appendCodePoints(body, start + 2..<body.endIndex, to: &out)
        case 27, 43:           // compress_certificate, supported_versions: a 1-byte length
            guard count >= 1, Int(body[start]) == count - 1, count % 2 == 1 else { throw .malformedExtension(type) }
            out.append(body[start])
            appendCodePoints(body, start + 1..<body.endIndex, to: &out)
        default:
            out += body
        }
    }

    static let hybridGroup: UInt16 = 0x11EC
    static let kyberDraftGroup: UInt16 = 0x6399
    static let x25519Group: UInt16 = 0x001D

    /// The X25519 half of a hybrid share of `group`: X25519MLKEM768's last 32 bytes, X25519Kyber768Draft00's first
    /// 32; nil for a group that is no X25519 hybrid.
    static func x25519Half(of group: UInt16) -> (([UInt8]) -> [UInt8])? {
        switch group {
        case hybridGroup: { Array($0.suffix(32)) }
        case kyberDraftGroup: { Array($0.prefix(32)) }
        default: nil
        }
    }

    /// Whether the hello's X25519MLKEM768 and X25519Kyber768Draft00 shares hold its x25519 share as their X25519
    /// half (one X25519 key for both, as Go sends them), which the mirror keeps (`HelloMirror.freshKeyShares`). One
    /// walk over the key_share's bytes, nothing copied: every warm TLS 1.3 tunnel makes its client's shape. A
    /// key_share that cannot be read is refused when its body is blanked.
    private static func hybridsShareX25519(_ message: [UInt8], _ extensions: [(type: UInt16, body: Range<Int>)])
        -> (mlkem: Bool, kyber: Bool) {
        guard let body = extensions.first(where: { $0.type == TLSExtensionType.keyShare })?.body, body.count >= 2 else {
            return (false, false)
        }
        var x25519: Range<Int>?, mlkem: Range<Int>?, kyber: Range<Int>?
        var offset = body.lowerBound + 2
        while body.upperBound - offset >= 4 {
            let group = UInt16(message[offset]) << 8 | UInt16(message[offset + 1])
            let length = Int(message[offset + 2]) << 8 | Int(message[offset + 3])
            guard body.upperBound - offset - 4 >= length else { break }
            let value = offset + 4..<offset + 4 + length
            switch group {   // the first entry of each group, as the mirror reads them
            case x25519Group where x25519 == nil: x25519 = value
            case hybridGroup where mlkem == nil: mlkem = value
            case kyberDraftGroup where kyber == nil: kyber = value
            default: break
            }
            offset = value.upperBound
        }
        guard let x25519, x25519.count == 32 else { return (false, false) }
        func holds(_ hybrid: Range<Int>?, atEnd: Bool) -> Bool {
            guard let hybrid, hybrid.count >= 32 else { return false }
            let half = atEnd ? hybrid.upperBound - 32..<hybrid.upperBound : hybrid.lowerBound..<hybrid.lowerBound + 32
            return message[half].elementsEqual(message[x25519])
        }
        return (holds(mlkem, atEnd: true), holds(kyber, atEnd: false))
    }

    private static func patchUInt16(_ value: Int, at index: Int, in out: inout [UInt8]) {
        out[index] = UInt8(value >> 8 & 0xFF)
        out[index + 1] = UInt8(value & 0xFF)
    }

    /// 2-byte code points, GREASE ones as 0x0A0A (`range`, in `bytes`' indices, holds a whole number of them).
    private static func appendCodePoints(_ bytes: ArraySlice<UInt8>, _ range: Range<Int>, to out: inout [UInt8]) {
        var offset = range.lowerBound
        while offset + 1 < range.upperBound {
            let high = bytes[offset], low = bytes[offset + 1]
            let grease = low == high && high & 0x0F == 0x0A
            out.append(grease ? 0x0A : high)
            out.append(grease ? 0x0A : low)
            offset += 2
        }
    }
}
