/// A hosts(5) file: `ADDRESS NAME [ALIAS...]` lines, `#` comments. Names are matched case-insensitively, with or
/// without the trailing dot of a fully qualified name, in the file as in a lookup.
public struct HostsFile: Sendable {
    /// Name (lowercased, trailing dots dropped) → addresses in file order.
    public private(set) var addresses: [String: [String]] = [:]

    /// Read as bytes, as the C library reads the file: lines end at LF or CR, `#` starts a comment, fields are
    /// separated by spaces and tabs, names match with ASCII letters case-folded. Swift's `Character`s are grapheme
    /// clusters: `U+06DD.` (a prepended mark and the dot after it) is one, so the name kept its dot, and a CRLF, a
    /// `#` or a space followed by a combining mark was no line end, comment or separator (found by fuzzing).
    public init(text: String) {
        let bytes = Array(text.utf8)
        for rawLine in bytes.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            let line = rawLine.prefix { $0 != UInt8(ascii: "#") }
            let fields = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
            guard fields.count >= 2 else { continue }
            let address = String(decoding: fields[0], as: UTF8.self)
            guard IPAddressText.parse(address) != nil else { continue }
            for name in fields.dropFirst() {
                addresses[Self.key(name), default: []].append(address)
            }
        }
    }

    /// The names the file maps (lowercased, without trailing dots).
    public var names: Set<String> { Set(addresses.keys) }

    /// The addresses for a name, empty when the file does not know it.
    public func lookup(_ name: String) -> [String] {
        addresses[Self.key(name.utf8)] ?? []
    }

    /// How a name is stored and looked up: ASCII letters lowercased, trailing dots dropped, on both sides (a file's
    /// `foo.` was stored as is and never found, since a lookup of `foo.` or `foo` asked for `foo`: FUZZING.md).
    private static func key(_ name: some Collection<UInt8>) -> String {
        var bytes = name.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
        while bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
