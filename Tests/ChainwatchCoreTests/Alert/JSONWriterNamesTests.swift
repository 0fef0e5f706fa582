import Foundation
import Testing

/// `JSONWriter` copies member names as they are, with no escaping pass, so every name must be printable ASCII without
/// a quote or a backslash. Its `assert` is compiled out of the release build the unit tests run against (and of the
/// binary that ships), so this test checks every name the sources pass it: they are all string literals
/// (`StaticString`) at `field("…"` and `object("…"` calls, with a dot or inside an extension of `JSONWriter`.
@Suite struct JSONWriterNamesTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")

    /// The literal in each `field("NAME"` or `object("NAME"` call of the sources, with its file; the literal as
    /// written, escapes included (`\"`, `\\`, `\u{…}`), since an escape in a name is what the writer cannot carry.
    static func names() throws -> [(file: String, name: String)] {
        var found: [(String, String)] = []
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            found += try names(in: String(contentsOf: url, encoding: .utf8)).map { (url.lastPathComponent, $0) }
        }
        return found
    }

    static func names(in text: String) throws -> [String] {
        // After a dot, or bare inside a JSONWriter extension (`object("ecs") { … }` in Observer.swift).
        let pattern = try NSRegularExpression(pattern: #"(?<![A-Za-z0-9_])(?:field|object)\(\s*"((?:[^"\\\n]|\\.)*)""#)
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    static func carriesAsIs(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }
    }

    @Test func everyNameTheSourcesPassIsCopiedAsItIs() throws {
        let names = try Self.names()
        // The alert, access and admin records pass about 160 names; far fewer means the scan found the wrong files.
        #expect(names.count > 100, "found \(names.count) names under \(Self.sources.path)")
        #expect(names.contains { $0.name == "observer" }, "the bare calls inside JSONWriter's extensions are read too")
        let bad = names.filter { !Self.carriesAsIs($0.name) }
        #expect(bad.isEmpty, "names JSONWriter would write unescaped: \(bad)")
    }

    @Test func theScanReadsNamesAsWrittenEscapesIncluded() throws {
        let text = #"w.field("host", h); w.object( "tls") { _ in }; w.field("a\"b", x); JSONValue.object([("x", .null)]); "#
            + #"object("ecs") { _ in }; subfield("no", y)"#
        let names = try Self.names(in: text)
        #expect(names == ["host", "tls", #"a\"b"#, "ecs"])
        #expect(names.map(Self.carriesAsIs) == [true, true, false, true])
    }

    @Test func theCheckRefusesWhatWouldNeedEscaping() {
        for name in ["host", "tls.server.x509.subject.distinguished_name", "chainwatch.probe"] {
            #expect(Self.carriesAsIs(name), "\(name)")
        }
        for name in ["", "a\"b", #"a\\b"#, #"a\"b"#, "tab\there", "caf\u{E9}"] {
            #expect(!Self.carriesAsIs(name), "\(name)")
        }
    }
}
