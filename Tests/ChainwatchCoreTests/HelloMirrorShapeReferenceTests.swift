import Testing
@testable import ChainwatchCore

/// `ClientHelloShape`'s one pass against the shape as it was first written, on `HelloParts` (the mirror's reading):
/// take the hello apart, rewrite, put it together. The two must agree on every hello: the same bytes, or both refuse.
@Suite struct HelloMirrorShapeReferenceTests {
    /// The shape by `HelloParts`, as `ClientHelloShape` made it before its one pass.
    static func reference(_ clientHello: [UInt8]) throws -> [UInt8] {
        var parts = try HelloParts(message: clientHello)
        let stack = HelloStack(parts)
        parts.random = [UInt8](repeating: 0, count: parts.random.count)
        parts.sessionID = [UInt8](repeating: 0, count: parts.sessionID.count)
        if var extensions = parts.extensions {
            if stack.permutes { extensions[stack.permutable].sort { $0.type < $1.type } }
            extensions.removeAll { $0.type == TLSExtensionType.preSharedKey }
            for index in extensions.indices {
                switch extensions[index].type {
                case TLSExtensionType.sessionTicket, 21, TLSExtensionType.earlyData:   // padding, early_data: their place
                    extensions[index].body = []
                case OuterECH.type:
                    if var ech = try OuterECH.parse(extensions[index].body) {
                        ech.configID = 0
                        ech.enc = [UInt8](repeating: 0, count: ech.enc.count)
                        ech.payload = ech.drawsPayloadLength(stack) ? OuterECH.drawnPayloadMark : [UInt8](repeating: 0, count: ech.payload.count)
                        extensions[index].body = ech.encoded()
                    }
                case TrustAnchorIDs.type where stack.permutes:
                    var anchors = try TrustAnchorIDs.parse(extensions[index].body)
                    anchors.ids.sort { $0.lexicographicallyPrecedes($1) }
                    extensions[index].body = anchors.encoded()
                case TLSExtensionType.keyShare:
                    // GREASE shares as sent; X25519MLKEM768's X25519 half as ones when it is the x25519 share.
                    let sent = try KeyShareEntry.parse(extensions[index].body)
                    let x25519 = sent.first { $0.group == 0x001D }?.value
                    let hybrid = sent.first { $0.group == 0x11EC }?.value
                    let sharing = x25519?.count == 32 && (hybrid?.count ?? 0) >= 32 && hybrid.map { Array($0.suffix(32)) } == x25519
                    let kyber = sent.first { $0.group == 0x6399 }?.value   // X25519Kyber768Draft00: X25519 first
                    let kyberSharing = x25519?.count == 32 && (kyber?.count ?? 0) >= 32 && kyber.map { Array($0.prefix(32)) } == x25519
                    let entries = sent.map { entry in
                        if isGREASE(entry.group) { return entry }
                        var value = [UInt8](repeating: 0, count: entry.value.count)
                        if entry.group == 0x11EC, value.count >= 32, sharing {
                            value.replaceSubrange(value.count - 32..<value.count, with: repeatElement(1, count: 32))
                        }
                        if entry.group == 0x6399, value.count >= 32, kyberSharing {
                            value.replaceSubrange(0..<32, with: repeatElement(1, count: 32))
                        }
                        return KeyShareEntry(group: entry.group, value: value)
                    }
                    extensions[index].body = KeyShareEntry.encode(entries)
                default:
                    break
                }
            }
            parts.extensions = extensions
        }
        try parts.rewriteGREASE { _ in 0x0A0A }
        if var extensions = parts.extensions {
            var place = 0
            for index in extensions.indices where isGREASE(extensions[index].type) {
                extensions[index].type = HelloMirrorRandom.greaseValues[place % 16]
                place += 1
            }
            parts.extensions = extensions
        }
        return parts.encoded()
    }

    /// Both readings of `hello`: its shape's bytes, or nil when refused.
    static func agree(_ hello: [UInt8]) -> (fast: [UInt8]?, reference: [UInt8]?) {
        (try? ClientHelloShape(hello).bytes, try? reference(hello))
    }

    @Test(arguments: HelloFixture.all)
    func theOnePassIsTheReferenceOnEveryFixture(_ name: String) throws {
        let hello = try HelloFixture.bytes(name)
        let (fast, reference) = Self.agree(hello)
        #expect(fast != nil)
        #expect(fast == reference)
    }

    /// Every fixture with every fourth byte changed in turn (to 0x00, 0xFF, its neighbour or a GREASE byte, by turns)
    /// and prefixes of it: the two agree on every one, refusals included.
    @Test(arguments: HelloFixture.all)
    func theOnePassIsTheReferenceOnMutations(_ name: String) throws {
        let hello = try HelloFixture.bytes(name)
        var tried = 0, refused = 0, differing: [String] = []
        func check(_ mutated: [UInt8], _ what: String) {
            let (fast, reference) = Self.agree(mutated)
            tried += 1
            if fast == nil { refused += 1 }
            if fast != reference, differing.count < 5 { differing.append(what) }
        }
        for index in stride(from: name.count % 2, to: hello.count, by: 4) {
            let value: UInt8 = [0x00, 0xFF, hello[index] &+ 1, 0x2A][index / 4 % 4]
            guard value != hello[index] else { continue }
            var mutated = hello
            mutated[index] = value
            check(mutated, "byte \(index) = \(value)")
        }
        for length in stride(from: 0, to: hello.count, by: 7) { check(Array(hello.prefix(length)), "prefix \(length)") }
        #expect(differing.isEmpty, "\(name): \(differing)")
        // The mutations reach both sides of every check: some are refused, most of the byte changes are not.
        #expect(refused > 0 && refused < tried)
    }
}
