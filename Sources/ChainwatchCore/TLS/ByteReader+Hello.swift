/// Fields that ClientHello and ServerHello share.
extension ByteReader {
    /// A legacy session ID: a 1-byte length of at most 32.
    mutating func readSessionID(_ field: String) throws(TLSParseError) -> [UInt8] {
        var id = try readVector(lengthBytes: 1, field)
        guard id.remaining <= 32 else { throw .badLength(field: field, declared: id.remaining, available: 32) }
        return Array(id.readRest())
    }

    /// An ALPN extension body (RFC 7301 3.1): a 2-byte list length, then 1-byte-length names, none empty; nothing after.
    /// GREASE names (two identical `0x?A` bytes) are left out.
    mutating func readALPN(_ field: String) throws(TLSParseError) -> [String] {
        var list = try readVector(lengthBytes: 2, field)
        try expectEnd(field)
        var names: [String] = []
        while !list.isAtEnd {
            var name = try list.readVector(lengthBytes: 1, field)
            guard name.remaining > 0 else { throw .badLength(field: field, declared: 0, available: list.remaining) }
            let bytes = name.readRest()
            if bytes.count == 2, isGREASE(UInt16(bytes[bytes.startIndex]) << 8 | UInt16(bytes[bytes.startIndex + 1])) {
                continue
            }
            names.append(String(decoding: bytes, as: UTF8.self))
        }
        return names
    }
}
