/// A dictionary that keeps the sum of its entries' weights, and is bounded by their count and that sum.
struct WeighedTable<Key: Hashable, Value> {
    private var entries: [Key: (value: Value, weight: Int)] = [:]
    /// The sum of the entries' weights.
    private(set) var bytes = 0

    var count: Int { entries.count }
    subscript(key: Key) -> Value? { entries[key]?.value }
    var all: [(key: Key, value: Value)] { entries.map { ($0.key, $0.value.value) } }

    mutating func remove(_ key: Key) {
        if let old = entries.removeValue(forKey: key) { bytes -= old.weight }
    }

    /// Changes `key`'s value in place (its weight stays); nothing when it has none.
    mutating func update(_ key: Key, _ change: (inout Value) -> Void) {
        guard var entry = entries[key] else { return }
        change(&entry.value)
        entries[key] = entry
    }

    /// Keeps the entries `keep` says yes to.
    mutating func keep(_ keep: (Key, Value) -> Bool) {
        entries = entries.filter { keep($0.key, $0.value.value) }
        bytes = entries.values.reduce(0) { $0 + $1.weight }
    }

    /// Sets `value` for `key`. When it would not fit within `maxEntries` and `maxBytes`, the entries that are not
    /// `live` go, and then entries in `order` (the first first; any order when nil) until the rest fills at most 90 %
    /// of both bounds: so the pass over the whole table is not paid again at the next insert (also when the dead
    /// alone made room: a table at its bound where entries keep expiring would otherwise pay it at every insert). A
    /// value weighed over `maxBytes` is not kept (nor what `key` held before).
    mutating func insert(_ value: Value, for key: Key, weight: Int, maxEntries: Int, maxBytes: Int, live: (Value) -> Bool,
                         order: ((Value, Value) -> Bool)? = nil) {
        remove(key)
        guard weight <= maxBytes else { return }
        if entries.count + 1 > maxEntries || bytes + weight > maxBytes {
            keep { _, value in live(value) }
            let entryTarget = max(0, maxEntries - max(1, maxEntries / 10) - 1)
            let byteTarget = max(0, maxBytes - maxBytes / 10 - weight)
            if entries.count > entryTarget || bytes > byteTarget {
                let victims = order.map { order in entries.sorted { order($0.value.value, $1.value.value) }.map(\.key) }
                    ?? Array(entries.keys)
                for victim in victims {
                    guard entries.count > entryTarget || bytes > byteTarget else { break }
                    remove(victim)
                }
            }
        }
        entries[key] = (value, weight)
        bytes += weight
    }
}
