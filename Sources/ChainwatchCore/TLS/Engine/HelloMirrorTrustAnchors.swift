/// The trust_anchors extension (0xCA34, 51764; draft-ietf-tls-trust-anchor-ids): a 2-byte list length, then
/// trust anchor IDs, each with a 1-byte length. Chrome 152 (curl_cffi) sends the same 28 IDs in a fresh order on
/// every connection (the four Chrome fixtures: four orders of one set), so for a permuting stack the mirror
/// shuffles them afresh and the shape sorts them.
struct TrustAnchorIDs: Sendable, Equatable {
    /// The extension type.
    static let type: UInt16 = 0xCA34

    var ids: [[UInt8]]

    static func parse(_ body: [UInt8]) throws(HelloMirrorError) -> TrustAnchorIDs {
        do {
            var reader = ByteReader(body[...])
            var list = try reader.readVector(lengthBytes: 2, "trust_anchors")
            try reader.expectEnd("trust_anchors")
            var ids: [[UInt8]] = []
            while !list.isAtEnd {
                var id = try list.readVector(lengthBytes: 1, "trust_anchors.id")
                ids.append(Array(id.readRest()))
            }
            return TrustAnchorIDs(ids: ids)
        } catch {
            throw .malformedExtension(type)
        }
    }

    /// The extension body.
    func encoded() -> [UInt8] {
        let list = ids.flatMap { [UInt8($0.count)] + $0 }
        var body: [UInt8] = []
        body.appendUInt16(UInt16(list.count))
        return body + list
    }
}
