/// What the mirror reads about the client's TLS stack from its hello alone: whether it is BoringSSL-shaped, which
/// extensions it permutes per connection, where it puts a HelloRetryRequest's cookie, and its padding rule.
///
/// BoringSSL (Chrome, Edge, Safari's stack, curl_cffi) writes a GREASE extension first and another GREASE extension
/// last (then padding and pre_shared_key), and in between its other extensions in the order of its `kExtensions`
/// table (`fixedOrder`), or, with `SSL_set_permute_extensions` (Chrome and Edge since 110), in one fresh random order
/// per connection. So a hello is from a permuting stack when it is BoringSSL-shaped and the extensions in between
/// are not in table order. A permuting hello falls in table order by chance with probability 1/n! (n about 16 for
/// Chrome 152); extensions the table does not hold are left out of the comparison. Chrome 101 (`edge.bin`) and
/// Safari 27 are BoringSSL-shaped and keep table order; Firefox, curl, OpenSSL, Python and GnuTLS send no GREASE
/// extension.
struct HelloStack: Sendable, Equatable {
    /// BoringSSL's `kExtensions` order (ssl/extensions.cc, 2025): server_name, ECH, extended_master_secret,
    /// renegotiation_info, supported_groups, ec_point_formats, session_ticket, ALPN, status_request,
    /// signature_algorithms, NPN, SCT, channel_id, use_srtp, key_share, psk_key_exchange_modes, early_data,
    /// supported_versions, cookie, QUIC transport parameters (new, old), compress_certificate, delegated_credentials,
    /// ALPS (new, old), certificate_authorities, trust_anchors. Chrome 101 and Safari 27 send theirs in this order.
    static let fixedOrder: [UInt16] = [0x0000, 0xFE0D, 0x0017, 0xFF01, 0x000A, 0x000B, 0x0023, 0x0010, 0x0005,
                                       0x000D, 0x3374, 0x0012, 0x7550, 0x000E, 0x0033, 0x002D, 0x002A, 0x002B,
                                       0x002C, 0x0039, 0xFFA5, 0x001B, 0x0022, 0x44CD, 0x4469, 0x002F, 0xCA34]

    /// Between the first and the last GREASE extension, for a BoringSSL-shaped hello; nil for any other.
    let boringSSLMiddle: Range<Int>?
    /// Whether the stack draws its extension order per connection.
    let permutes: Bool

    init(_ parts: HelloParts) { self.init(types: parts.types) }

    /// `types`: the hello's extension types, in order.
    init(types: [UInt16]) {
        var last = types.count - 1
        while last > 0, types[last] == 21 || types[last] == TLSExtensionType.preSharedKey { last -= 1 }
        guard last > 1, let first = types.first, isGREASE(first), isGREASE(types[last]) else {
            boringSSLMiddle = nil
            permutes = false
            return
        }
        boringSSLMiddle = 1..<last
        let ranks = types[1..<last].compactMap { Self.fixedOrder.firstIndex(of: $0) }
        permutes = !zip(ranks, ranks.dropFirst()).allSatisfy { $0 < $1 }
    }

    /// Indices of the extensions the stack permutes per connection; empty for a stack that keeps its order.
    var permutable: Range<Int> { permutes ? boringSSLMiddle ?? 0..<0 : 0..<0 }

    /// Where the stack puts the cookie extension (44) of its second ClientHello, as an index into `parts` (a hello
    /// without one): BoringSSL permuting, a random place among the permuted ones (the cookie's place in the
    /// connection's permutation, which the first hello did not show, is uniform among them); BoringSSL in table
    /// order, its table place (after supported_versions); other stacks, where their extension tables put it:
    /// OpenSSL right after key_share (its key_share follows psk_key_exchange_modes), NSS and GnuTLS right before
    /// psk_key_exchange_modes (which follows their key_share).
    func cookieIndex(in parts: HelloParts, random: HelloMirrorRandom) -> Int {
        let types = parts.types
        if let middle = boringSSLMiddle {
            if permutes { return middle.lowerBound + random.below(middle.count + 1) }
            let cookieRank = Self.fixedOrder.firstIndex(of: 0x002C) ?? Self.fixedOrder.count
            return middle.first { (Self.fixedOrder.firstIndex(of: types[$0]) ?? -1) > cookieRank } ?? middle.upperBound
        }
        let keyShare = types.firstIndex(of: TLSExtensionType.keyShare)
        let modes = types.firstIndex(of: 0x002D)
        if let keyShare, let modes, keyShare < modes { return modes }
        if let keyShare { return keyShare + 1 }
        return types.firstIndex { $0 == 21 || $0 == TLSExtensionType.preSharedKey } ?? types.count
    }

    /// Recomputes the padding extension (type 21) of `parts`, if it has one, by the rule BoringSSL and OpenSSL 3
    /// share (F5 workaround, RFC 7685): with L the handshake message's length (4-byte header included) without the
    /// padding extension, a hello with 0xFF < L < 0x200 is padded to 0x200 bytes: a body of 0x200 - L - 4 bytes, or
    /// 1 byte when that is 1 or less (neither stack sends an empty extension last); any other L has no padding
    /// extension. NSS pads the same range (Firefox's hellos are past it now). The body is zeros. A hello without a
    /// padding extension keeps having none. BoringSSL does not pad a second ClientHello (`afterRetry`); OpenSSL does.
    func repad(_ parts: inout HelloParts, afterRetry: Bool = false) {
        guard let index = parts.index(of: 21) else { return }
        guard !(afterRetry && boringSSLMiddle != nil) else {
            parts.extensions?.remove(at: index)
            return
        }
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

extension HelloParts {
    /// The extension types in order.
    var types: [UInt16] { (extensions ?? []).map(\.type) }
}
