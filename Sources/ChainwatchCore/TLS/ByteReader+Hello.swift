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
        try readALPNNames(field).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `readALPN`'s names as the bytes sent.
    mutating func readALPNNames(_ field: String) throws(TLSParseError) -> [ArraySlice<UInt8>] {
        var list = try readVector(lengthBytes: 2, field)
        try expectEnd(field)
        var names: [ArraySlice<UInt8>] = []
        while !list.isAtEnd {
            var name = try list.readVector(lengthBytes: 1, field)
            guard name.remaining > 0 else { throw .badLength(field: field, declared: 0, available: list.remaining) }
            let bytes = name.readRest()
            if bytes.count == 2, isGREASE(UInt16(bytes[bytes.startIndex]) << 8 | UInt16(bytes[bytes.startIndex + 1])) {
                continue
            }
            names.append(bytes)
        }
        return names
    }

    /// A list of 2-byte code points with a `lengthBytes`-byte length prefix (supported_groups, signature_algorithms),
    /// GREASE left out; nothing may follow it in its container. An odd length ends in half a value: `truncatedField`.
    mutating func readUInt16List(lengthBytes: Int, _ field: String) throws(TLSParseError) -> [UInt16] {
        var list = try readVector(lengthBytes: lengthBytes, field)
        try expectEnd(field)
        var values: [UInt16] = []
        values.reserveCapacity(list.remaining / 2)
        while !list.isAtEnd {
            let value = try list.readUInt16(field)
            if !isGREASE(value) { values.append(value) }
        }
        return values
    }
}
