import Testing
@testable import ChainwatchCore

@Suite struct LogTextTests {
    @Test func plainTextIsUnchanged() {
        #expect(LogText.escaped("leaf names [genuine.test, 127.0.0.1], not evil.test") == "leaf names [genuine.test, 127.0.0.1], not evil.test")
        #expect(LogText.escaped("CN=Zürich Root,O=Ünïcode") == "CN=Zürich Root,O=Ünïcode")
    }

    @Test func aNewlineCannotStartAForgedRecord() {
        let forged = "a.test\n2026-11-23T05:00:00+0000 notice chainwatch: all clear"
        let line = LogText.escaped(forged)
        #expect(!line.contains("\n"))
        #expect(line == "a.test\\n2026-11-23T05:00:00+0000 notice chainwatch: all clear")
    }

    @Test func terminalControlsAndSeparatorsAreVisible() {
        #expect(LogText.escaped("\u{1B}[2J\u{1B}]0;pwned\u{07}") == "\\u{1B}[2J\\u{1B}]0;pwned\\u{7}")
        #expect(LogText.escaped("a\rb\tc\u{0}d\u{7F}e\u{85}f\u{2028}g") == "a\\rb\\tc\\u{0}d\\u{7F}e\\u{85}f\\u{2028}g")
    }

    @Test func aBackslashIsDoubledOnlyWhenSomethingIsEscaped() {
        #expect(LogText.escaped("C:\\path") == "C:\\path")
        // Once escaping, a literal backslash-n in the text cannot pass for an escaped newline.
        #expect(LogText.escaped("x\\n\ny") == "x\\\\n\\ny")
    }
}
