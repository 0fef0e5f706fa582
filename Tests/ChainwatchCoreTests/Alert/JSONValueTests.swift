import Foundation
import Testing
@testable import ChainwatchCore

@Suite struct JSONValueTests {
    @Test func stringsEscapeWhatJSONAndJavaScriptNeed() {
        let text = "a\"b\\c\nd\re\tf\u{0}g\u{1B}h\u{7F}i\u{2028}j\u{2029}k é 😀"
        let out = JSONValue.string(text).serialized
        #expect(out == #""a\"b\\c\nd\re\tf\u0000g\u001bh\u007fi\u2028j\u2029k é 😀""#)
        // And it reads back as the same text.
        let back = try? JSONSerialization.jsonObject(with: Data(("[" + out + "]").utf8)) as? [String]
        #expect(back == [text])
    }

    @Test func writerSkipsNilsAndObjectsLeftEmpty() {
        var w = JSONWriter()
        w.field("a", "1")
        w.object("empty") { $0.field("x", nil as String?) }
        w.object("tls") { t in
            t.object("client") { $0.field("server_name", nil as String?) }
            t.field("version", "1.3")
            t.object("server") { $0.object("hash") { $0.field("sha256", "AB") } }
        }
        w.object("last") { $0.field("n", 2) }
        #expect(w.text == #"{"a":"1","tls":{"version":"1.3","server":{"hash":{"sha256":"AB"}}},"last":{"n":2}}"#)
        var only = JSONWriter()
        only.object("empty") { $0.field("x", nil as Int?) }
        #expect(only.text == "{}")
    }
}
