/// A map bounded by forgetting in two generations: entries go into the newer one; when it holds `capacity / 2`, it
/// becomes the older one and the previous older one is dropped; an entry found in the older one moves back to the
/// newer. So an entry used at least once per `capacity / 2` insertions stays, at most `capacity` are held, and each
/// operation is a hash-table probe (no ordering to keep, as an LRU list would need). Not thread-safe: hold it in a lock.
///
/// Inlinable, so a module that uses it gets code specialized to its key and value: unspecialized, every dictionary
/// operation went through the generic runtime (about a quarter of a million instructions per cold first contact).
public struct GenerationalCache<Key: Hashable, Value> {
    public let capacity: Int
    @usableFromInline var newer: [Key: Value] = [:]
    @usableFromInline var older: [Key: Value] = [:]

    /// - Parameter capacity: at most this many entries are held (at least 2).
    @inlinable public init(capacity: Int) { self.capacity = max(2, capacity) }

    @inlinable public var count: Int { newer.count + older.count }

    @inlinable public func contains(_ key: Key) -> Bool { newer[key] != nil || older[key] != nil }

    /// The value for `key`, if held (moved to the newer generation when it was in the older one).
    @inlinable public mutating func value(for key: Key) -> Value? {
        if let value = newer[key] { return value }
        guard let value = older.removeValue(forKey: key) else { return nil }
        insert(value, for: key)
        return value
    }

    /// Holds `value` for `key`, unless the newer generation already holds one.
    @inlinable public mutating func insert(_ value: Value, for key: Key) {
        guard newer[key] == nil else { return }
        newer[key] = value
        if newer.count >= capacity / 2 {
            older = newer
            newer = [:]
        }
    }
}
extension GenerationalCache: Sendable where Key: Sendable, Value: Sendable {}
