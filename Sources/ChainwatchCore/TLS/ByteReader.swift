/// Reads big-endian TLS fields from a slice, checking every length against what remains.
/// Errors name the field, so a malformed hello says which length lied.
struct ByteReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// Bytes not read yet.
    var remaining: Int { bytes.count }
    var isAtEnd: Bool { bytes.isEmpty }

    mutating func readUInt8(_ field: String) throws(TLSParseError) -> UInt8 {
        guard let byte = bytes.first else { throw .truncatedField(field) }
        bytes = bytes.dropFirst()
        return byte
    }

    mutating func readUInt16(_ field: String) throws(TLSParseError) -> UInt16 {
        let raw = try readBytes(2, field)
        return UInt16(raw[raw.startIndex]) << 8 | UInt16(raw[raw.startIndex + 1])
    }

    mutating func readUInt24(_ field: String) throws(TLSParseError) -> Int {
        let raw = try readBytes(3, field)
        return Int(raw[raw.startIndex]) << 16 | Int(raw[raw.startIndex + 1]) << 8 | Int(raw[raw.startIndex + 2])
    }

    /// Exactly `count` bytes.
    mutating func readBytes(_ count: Int, _ field: String) throws(TLSParseError) -> ArraySlice<UInt8> {
        guard count <= bytes.count else { throw .truncatedField(field) }
        let value = bytes.prefix(count)
        bytes = bytes.dropFirst(count)
        return value
    }

    /// A vector with a `lengthBytes`-byte length prefix (1, 2 or 3), as a reader of its own.
    mutating func readVector(lengthBytes: Int, _ field: String) throws(TLSParseError) -> ByteReader {
        let length = switch lengthBytes {
        case 1: Int(try readUInt8(field))
        case 2: Int(try readUInt16(field))
        default: try readUInt24(field)
        }
        guard length <= bytes.count else { throw .badLength(field: field, declared: length, available: bytes.count) }
        return ByteReader(try readBytes(length, field))
    }

    /// The bytes not read yet, as a copy (the reader stays as it is).
    var unread: [UInt8] { Array(bytes) }

    /// All bytes left.
    mutating func readRest() -> ArraySlice<UInt8> {
        defer { bytes = bytes.suffix(0) }
        return bytes
    }

    /// Throws unless every byte was read.
    func expectEnd(_ container: String) throws(TLSParseError) {
        guard bytes.isEmpty else { throw .trailingBytes(container) }
    }
}
