/// Bytes as a hash-table key, hashed in one call over the buffer. `[UInt8]` as a key hashes through `Hasher.combine`
/// once per byte: for a certificate's DER, a kilobyte, that was most of a cache lookup's cost.
public struct ByteKey: Hashable, Sendable {
    public let bytes: [UInt8]

    @inlinable public init(_ bytes: [UInt8]) { self.bytes = bytes }

    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        unsafe bytes.withUnsafeBytes { unsafe hasher.combine(bytes: $0) }
    }

    @inlinable public static func == (a: ByteKey, b: ByteKey) -> Bool { a.bytes == b.bytes }
}
