/// Builds the probe's ClientHello from the client's: the same bytes except the parts each connection of that
/// client draws afresh, so that an interceptor cannot tell the probe from the client by its hello.
///
/// Drawn afresh: the random; the legacy session id (same length); every key share (the crypto's own key, or random
/// bytes of the same length for a group it cannot perform); GREASE values (each place its own draw, by BoringSSL's
/// rules: `HelloParts.redrawGREASE`); ECH GREASE (config_id, enc, payload, and the payload's length where BoringSSL
/// draws it: `OuterECH.redrawn`); the extension order of a stack that permutes it per connection (`HelloStack`), and
/// that stack's order of trust anchor IDs (`TrustAnchorIDs`). Dropped as a fresh connection has none:
/// pre_shared_key, early_data, a session ticket (the extension stays, empty). Padding is then recomputed. Everything
/// else is kept byte for byte, and all of that is in the hello's `ClientHelloShape`: what is drawn depends on no
/// value of the client's, so the probe made from one client's hello is the probe of any client of that shape.
public enum HelloMirror {
    /// `clientHello`: the client's first ClientHello handshake message, 4-byte header included.
    public static func mirror(_ clientHello: [UInt8], crypto: any TLSCrypto) throws(HelloMirrorError) -> MirroredHello {
        let client = try HelloParts(message: clientHello)
        let stack = HelloStack(client)
        let random = HelloMirrorRandom(crypto: crypto)
        var probe = client
        probe.random = random.bytes(32)
        probe.sessionID = random.bytes(client.sessionID.count)
        try probe.redrawGREASE(random)

        var exchanges: [any TLSKeyExchange] = []
        if var extensions = probe.extensions {
            if stack.permutes {
                extensions.replaceSubrange(stack.permutable, with: random.permuted(Array(extensions[stack.permutable])))
            }
            extensions.removeAll { $0.type == TLSExtensionType.preSharedKey || $0.type == TLSExtensionType.earlyData }
            for index in extensions.indices {
                switch extensions[index].type {
                case TLSExtensionType.sessionTicket:
                    extensions[index].body = []
                case OuterECH.type:
                    if let ech = try OuterECH.parse(extensions[index].body) {
                        extensions[index].body = ech.redrawn(random, stack: stack).encoded()
                    }
                case TrustAnchorIDs.type where stack.permutes:
                    var anchors = try TrustAnchorIDs.parse(extensions[index].body)
                    anchors.ids = random.permuted(anchors.ids)
                    extensions[index].body = anchors.encoded()
                case TLSExtensionType.keyShare:
                    let (entries, made) = try freshKeyShares(KeyShareEntry.parse(extensions[index].body), random)
                    extensions[index].body = KeyShareEntry.encode(entries)
                    exchanges = made
                default:
                    break
                }
            }
            probe.extensions = extensions
        }
        stack.repad(&probe)
        return MirroredHello(parts: probe, keyExchanges: exchanges)
    }

    /// The client's key shares with fresh values, and the exchanges behind those the crypto performs, in order.
    /// GREASE shares keep their value (BoringSSL's one zero byte). A hybrid's X25519 half (X25519MLKEM768's last 32
    /// bytes, X25519Kyber768Draft00's first 32) is the probe's x25519 share exactly when the client's is the client's
    /// x25519 share (as Go sends its hybrids).
    static func freshKeyShares(_ entries: [KeyShareEntry], _ random: HelloMirrorRandom)
        throws(HelloMirrorError) -> ([KeyShareEntry], [any TLSKeyExchange]) {
        let x25519Group: UInt16 = 0x001D
        var made: [Int: any TLSKeyExchange] = [:]
        // Plain groups first, so a hybrid after its x25519 twin in the list can reuse it. A finite-field share (RFC 7919,
        // 0x0100 to 0x01FF) stays random bytes of its length: its key costs the loop milliseconds (ffdhe8192 about
        // 10 ms), a hello may carry several, and no client people use sends one; a retry that asks for the group gets a
        // real key (`HelloMirrorRetry`).
        for (index, entry) in entries.enumerated()
        where !isGREASE(entry.group) && ClientHelloShape.x25519Half(of: entry.group) == nil && !(0x0100...0x01FF).contains(entry.group) {
            made[index] = try exchange(entry.group, x25519: nil, random.crypto)
        }
        let x25519Index = entries.firstIndex { $0.group == x25519Group }
        for (index, entry) in entries.enumerated() {
            guard let half = ClientHelloShape.x25519Half(of: entry.group) else { continue }
            let clientX25519 = x25519Index.map { entries[$0].value } ?? []
            let shared = clientX25519.count == 32 && entry.value.count >= 32 && half(entry.value) == clientX25519
            made[index] = try exchange(entry.group, x25519: shared ? x25519Index.flatMap { made[$0] } : nil, random.crypto)
        }
        var fresh: [KeyShareEntry] = []
        var exchanges: [any TLSKeyExchange] = []
        for (index, entry) in entries.enumerated() {
            if isGREASE(entry.group) {
                fresh.append(entry)
            } else if let exchange = made[index] {
                guard exchange.publicShare.count == entry.value.count else {
                    throw .keyShareLengthMismatch(group: entry.group, client: entry.value.count, probe: exchange.publicShare.count)
                }
                fresh.append(KeyShareEntry(group: entry.group, value: exchange.publicShare))
                exchanges.append(exchange)
            } else {
                fresh.append(KeyShareEntry(group: entry.group, value: random.bytes(entry.value.count)))
            }
        }
        return (fresh, exchanges)
    }

    /// A key exchange for `group`, nil when the crypto does not perform it.
    static func exchange(_ group: UInt16, x25519: (any TLSKeyExchange)?, _ crypto: any TLSCrypto)
        throws(HelloMirrorError) -> (any TLSKeyExchange)? {
        do {
            return try crypto.keyExchange(group: group, x25519: x25519)
        } catch {
            if case .unsupported = error { return nil }
            throw .keyExchangeFailed(group: group, reason: error.description)
        }
    }
}
