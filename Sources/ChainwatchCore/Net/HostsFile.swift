/// A hosts(5) file: `ADDRESS NAME [ALIAS...]` lines, `#` comments. Names are matched case-insensitively, with or
/// without the trailing dot of a fully qualified name, in the file as in a lookup.
public struct HostsFile: Sendable {
    /// Name (lowercased, trailing dots dropped) → addresses in file order.
    public private(set) var addresses: [String: [String]] = [:]

    public init(text: String) {
        for rawLine in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, IPAddressText.parse(String(fields[0])) != nil else { continue }
            for name in fields.dropFirst() {
                addresses[Self.key(name), default: []].append(String(fields[0]))
            }
        }
    }

    /// The addresses for a name, empty when the file does not know it.
    public func lookup(_ name: String) -> [String] {
        addresses[Self.key(name)] ?? []
    }

    /// How a name is stored and looked up. Both sides drop the trailing dot: a file's `foo.` was stored as is and
    /// never found, since a lookup of `foo.` or `foo` asked for `foo` (found by fuzzing, FUZZING.md).
    private static func key(_ name: some StringProtocol) -> String {
        var key = name.lowercased()
        while key.hasSuffix(".") { key.removeLast() }
        return key
    }
}
