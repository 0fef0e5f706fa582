/// A hosts(5) file: `ADDRESS NAME [ALIAS...]` lines, `#` comments. Names are matched case-insensitively.
public struct HostsFile: Sendable {
    /// Lowercased name → addresses in file order.
    public private(set) var addresses: [String: [String]] = [:]

    public init(text: String) {
        for rawLine in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, IPAddressText.parse(String(fields[0])) != nil else { continue }
            for name in fields.dropFirst() {
                addresses[name.lowercased(), default: []].append(String(fields[0]))
            }
        }
    }

    /// The addresses for a name, empty when the file does not know it.
    public func lookup(_ name: String) -> [String] {
        var key = name.lowercased()
        if key.hasSuffix(".") { key.removeLast() }
        return addresses[key] ?? []
    }
}
