/// Where a ClientHello can hold GREASE values (RFC 8701), how to rewrite them all through one function, and how the
/// mirror draws them afresh (`redrawGREASE`): cipher suites, extension types, and the 2-byte code points of
/// supported_groups, key_share groups, supported_versions, signature_algorithms(_cert), delegated_credentials and
/// compress_certificate. GREASE extension bodies, and GREASE
/// key shares' values, are left as sent (BoringSSL sends the same bytes every time). ALPN and ALPS name lists hold
/// strings, not code points: BoringSSL does not GREASE them, and neither does this.
extension HelloParts {
    /// Replaces every GREASE value `v` with `transform(v)`, visiting them in wire order (cipher suites, then each
    /// extension's type and then its body).
    mutating func rewriteGREASE(_ transform: (UInt16) -> UInt16) throws(HelloMirrorError) {
        cipherSuites = cipherSuites.map { isGREASE($0) ? transform($0) : $0 }
        guard var extensions else { return }
        for index in extensions.indices {
            if isGREASE(extensions[index].type) { extensions[index].type = transform(extensions[index].type) }
            for offset in try Self.codePointOffsets(extensions[index]) {
                let body = extensions[index].body
                let value = UInt16(body[offset]) << 8 | UInt16(body[offset + 1])
                guard isGREASE(value) else { continue }
                let replacement = transform(value)
                extensions[index].body[offset] = UInt8(replacement >> 8)
                extensions[index].body[offset + 1] = UInt8(replacement & 0xFF)
            }
        }
        self.extensions = extensions
    }

    /// Draws every GREASE value afresh as BoringSSL draws them (`ssl_get_grease_value`: one uniform value per place
    /// from the connection's seed), from nothing of the values it replaces: the cipher suites' GREASE, the GREASE
    /// group (one draw for supported_groups and key_share, as BoringSSL writes one value in both: the n-th GREASE
    /// group of each list share a draw), the GREASE extension types (BoringSSL's second is flipped by 0x1010 when it
    /// equals its first; more than two are drawn distinct), supported_versions', and any other list's. Values within
    /// one list are drawn distinct (no stack repeats a code point in a list). Whether two places held equal values in the client's hello
    /// (a coincidence in half of BoringSSL's hellos) is not copied: a client could otherwise mark every probe made
    /// from its hello by the values it repeated, which `ClientHelloShape` does not keep.
    mutating func redrawGREASE(_ random: HelloMirrorRandom) throws(HelloMirrorError) {
        let suiteDraws = random.distinctGREASE(cipherSuites.count { isGREASE($0) })
        var next = 0
        cipherSuites = cipherSuites.map { suite in
            guard isGREASE(suite) else { return suite }
            defer { next += 1 }
            return suiteDraws[next]
        }
        guard var extensions else { return }
        let greaseTypes = extensions.count { isGREASE($0.type) }
        let typeDraws: [UInt16]
        if greaseTypes == 2 {
            // BoringSSL's two: each a uniform draw, the second flipped by 0x1010 when it equals the first (so the
            // second is its first's neighbour in 1 of 8 hellos, not 1 of 15).
            let first = HelloMirrorRandom.greaseValues[random.below(16)]
            let second = HelloMirrorRandom.greaseValues[random.below(16)]
            typeDraws = [first, second == first ? second ^ 0x1010 : second]
        } else {
            typeDraws = random.distinctGREASE(greaseTypes)
        }
        next = 0
        for index in extensions.indices where isGREASE(extensions[index].type) {
            extensions[index].type = typeDraws[next]
            next += 1
        }
        // The GREASE groups: as many draws as the longer of the two lists holds.
        func greaseCount(_ type: UInt16) throws(HelloMirrorError) -> Int {
            guard let ext = extensions.first(where: { $0.type == type }) else { return 0 }
            return try Self.codePointOffsets(ext).count { isGREASE(UInt16(ext.body[$0]) << 8 | UInt16(ext.body[$0 + 1])) }
        }
        let groupDraws = random.distinctGREASE(max(try greaseCount(TLSExtensionType.supportedGroups),
                                                   try greaseCount(TLSExtensionType.keyShare)))
        for index in extensions.indices {
            let type = extensions[index].type
            let offsets = try Self.codePointOffsets(extensions[index]).filter {
                isGREASE(UInt16(extensions[index].body[$0]) << 8 | UInt16(extensions[index].body[$0 + 1]))
            }
            guard !offsets.isEmpty else { continue }
            let draws = type == TLSExtensionType.supportedGroups || type == TLSExtensionType.keyShare
                ? groupDraws : random.distinctGREASE(offsets.count)
            for (offset, value) in zip(offsets, draws) {
                extensions[index].body[offset] = UInt8(value >> 8)
                extensions[index].body[offset + 1] = UInt8(value & 0xFF)
            }
        }
        self.extensions = extensions
    }

    /// Every GREASE value in wire order, repeats included.
    func greaseValues() throws(HelloMirrorError) -> [UInt16] {
        var copy = self
        var seen: [UInt16] = []
        try copy.rewriteGREASE { seen.append($0); return $0 }
        return seen
    }

    /// Offsets in `ext.body` of its 2-byte code points (checked to lie inside the body); none for extensions
    /// that hold no code-point list.
    static func codePointOffsets(_ ext: Extension) throws(HelloMirrorError) -> [Int] {
        let body = ext.body
        switch ext.type {
        case 10, 13, 34, 50:   // supported_groups, signature_algorithms, delegated_credentials, signature_algorithms_cert
            guard body.count >= 2, Int(body[0]) << 8 | Int(body[1]) == body.count - 2, body.count % 2 == 0 else {
                throw .malformedExtension(ext.type)
            }
            return Array(stride(from: 2, to: body.count, by: 2))
        case 27, 43:           // compress_certificate, supported_versions: a 1-byte length
            guard body.count >= 1, Int(body[0]) == body.count - 1, body.count % 2 == 1 else {
                throw .malformedExtension(ext.type)
            }
            return Array(stride(from: 1, to: body.count, by: 2))
        case TLSExtensionType.keyShare:
            var offsets: [Int] = []
            var offset = 2
            for entry in try KeyShareEntry.parse(body) {
                offsets.append(offset)
                offset += 4 + entry.value.count
            }
            return offsets
        default:
            return []
        }
    }
}

/// One KeyShareEntry of a ClientHello's key_share extension (RFC 8446 §4.2.8).
struct KeyShareEntry: Sendable, Equatable {
    var group: UInt16
    var value: [UInt8]

    /// The entries of a key_share extension body (a 2-byte list length, then the entries; nothing after).
    static func parse(_ body: [UInt8]) throws(HelloMirrorError) -> [KeyShareEntry] {
        do {
            var reader = ByteReader(body[...])
            var list = try reader.readVector(lengthBytes: 2, "key_share")
            try reader.expectEnd("key_share")
            var entries: [KeyShareEntry] = []
            while !list.isAtEnd {
                let group = try list.readUInt16("key_share.group")
                var value = try list.readVector(lengthBytes: 2, "key_share.key_exchange")
                entries.append(KeyShareEntry(group: group, value: Array(value.readRest())))
            }
            return entries
        } catch {
            throw .malformedExtension(TLSExtensionType.keyShare)
        }
    }

    /// A key_share extension body holding `entries`.
    static func encode(_ entries: [KeyShareEntry]) -> [UInt8] {
        var list: [UInt8] = []
        for entry in entries {
            list.appendUInt16(entry.group)
            list.appendUInt16(UInt16(entry.value.count))
            list += entry.value
        }
        var body: [UInt8] = []
        body.appendUInt16(UInt16(list.count))
        return body + list
    }
}
