/// What the mirror reads about the client's TLS stack from its hello alone: which extensions it permutes per
/// connection, and its padding rule.
///
/// Permutation (Chrome and Edge since 110, BoringSSL's `SSL_set_permute_extensions`): BoringSSL writes a GREASE
/// extension first and another GREASE extension last (then padding and pre_shared_key), and in between its other
/// extensions in a fixed order, or, when permuting, in a fresh random order per connection. So a hello is from a
/// permuting stack when it is shaped so (GREASE first, GREASE last before padding/pre_shared_key) and the extensions
/// in between that BoringSSL's fixed order ranks (`fixedOrder`) are not in that order. A permuting hello falls in
/// the fixed order by chance with probability 1/n! (n about 14 for Chrome); extensions the table does not rank
/// (newer ones: ECH, the new ALPS code point, ...) are left out of the comparison. Chrome 101 (Edge 101) and Safari
/// are BoringSSL-shaped but keep the fixed order; Firefox, curl, OpenSSL, Python and GnuTLS have no GREASE extension.
struct HelloStack: Sendable, Equatable {
    /// BoringSSL's extension order when not permuting, as Chrome 101 (`edge.bin`) and Safari 27 send it.
    static let fixedOrder: [UInt16] = [0x0000, 0x0017, 0xFF01, 0x000A, 0x000B, 0x0023, 0x0010, 0x0005, 0x000D,
                                       0x0012, 0x0033, 0x002D, 0x002B, 0x001B, 0x4469]

    /// Indices of the extensions the stack permutes per connection; empty for a stack that keeps its order.
    let permutable: Range<Int>

    init(_ parts: HelloParts) {
        let types = (parts.extensions ?? []).map(\.type)
        var last = types.count - 1
        while last > 0, types[last] == 21 || types[last] == TLSExtensionType.preSharedKey { last -= 1 }
        guard last > 1, let first = types.first, isGREASE(first), isGREASE(types[last]) else {
            permutable = 0..<0
            return
        }
        let ranks = types[1..<last].compactMap { Self.fixedOrder.firstIndex(of: $0) }
        let inFixedOrder = zip(ranks, ranks.dropFirst()).allSatisfy { $0 < $1 }
        permutable = inFixedOrder ? 0..<0 : 1..<last
    }

    /// Whether the stack draws its extension order per connection.
    var permutes: Bool { !permutable.isEmpty }

    /// Recomputes the padding extension (type 21) of `parts`, if it has one, by the rule BoringSSL and OpenSSL 3
    /// share (F5 workaround, RFC 7685): with L the handshake message's length (4-byte header included) without the
    /// padding extension, a hello with 0xFF < L < 0x200 is padded to 0x200 bytes: a body of 0x200 - L - 4 bytes, or
    /// 1 byte when that is 1 or less (neither stack sends an empty extension last); any other L has no padding
    /// extension. NSS pads the same range (Firefox's hellos are past it now). The body is zeros. A hello without a
    /// padding extension keeps having none.
    static func repad(_ parts: inout HelloParts) {
        guard let index = parts.index(of: 21) else { return }
        parts.extensions?[index].body = []
        let unpadded = parts.encoded().count - 4
        guard unpadded > 0xFF, unpadded < 0x200 else {
            parts.extensions?.remove(at: index)
            return
        }
        let room = 0x200 - unpadded
        parts.extensions?[index].body = [UInt8](repeating: 0, count: room > 4 ? room - 4 : 1)
    }
}
