import Testing
@testable import ChainwatchCore

@Test func hostsFileLinesCommentsAndAliases() {
    let file = HostsFile(text: "# test\n127.0.0.1 genuine.test  Alias.Test # comment\n::1\tv6.test\nnot-an-ip bad.test\n\n10.0.0.1 genuine.test\n")
    #expect(file.lookup("genuine.test") == ["127.0.0.1", "10.0.0.1"])
    #expect(file.lookup("alias.test.") == ["127.0.0.1"])
    #expect(file.lookup("v6.test") == ["::1"])
    #expect(file.lookup("bad.test").isEmpty)
    #expect(file.lookup("comment").isEmpty)
}

/// FuzzHostsFile's first find (`Fixtures/fuzz/hosts-trailing-dot`): the line `::1 localhost 769.` stored `769.`,
/// which no lookup could reach (`769.` and `769` both asked for `769`).
@Test func hostsFileNameWithTrailingDotIsFound() throws {
    let file = HostsFile(text: try FuzzFixture.text("hosts-trailing-dot"))
    #expect(file.lookup("769.") == ["::1"])
    #expect(file.lookup("769") == ["::1"])
    #expect(file.lookup("localhost") == ["127.0.0.1", "::1"])
    for name in file.addresses.keys {
        #expect(file.lookup(name) == file.addresses[name])
    }
    #expect(HostsFile(text: "10.0.0.1 Fqdn.Test.\n").lookup("fqdn.test") == ["10.0.0.1"])
}

/// FuzzHostsFile's second find (`Fixtures/fuzz/hosts-prepended-mark`): `::1 ... \u{6DD}` listed the name U+06DD
/// (ARABIC END OF AYAH, a prepended concatenation mark), and `lookup("\u{6DD}.")` found nothing: the mark and the dot
/// after it are one Swift Character, so the trailing dot was never dropped. The file is now read as bytes.
@Test func hostsFileIsReadAsBytesNotGraphemes() throws {
    let file = HostsFile(text: try FuzzFixture.text("hosts-prepended-mark"))
    #expect(file.lookup("\u{6DD}") == ["::1"])
    #expect(file.lookup("\u{6DD}.") == ["::1"])
    for name in file.addresses.keys {
        #expect(file.lookup(name) == file.addresses[name] && file.lookup(name + ".") == file.addresses[name])
    }
    // The same clusters elsewhere: CRLF line ends, and a space, a tab or `#` followed by a combining mark.
    let crlf = HostsFile(text: "10.0.0.1 a.test\r\n10.0.0.2 b.test\r\n")
    #expect(crlf.lookup("a.test") == ["10.0.0.1"] && crlf.lookup("b.test") == ["10.0.0.2"])
    let marks = HostsFile(text: "10.0.0.3 c.test \u{301}d.test\t\u{301}e.test #\u{301} f.test\n")
    #expect(marks.lookup("c.test") == ["10.0.0.3"] && marks.lookup("\u{301}d.test") == ["10.0.0.3"])
    #expect(marks.lookup("\u{301}e.test") == ["10.0.0.3"] && marks.lookup("f.test").isEmpty)
    // Case folds for ASCII letters only, as the C library's strcasecmp: \u{C4} and \u{E4} are different names.
    let latin = HostsFile(text: "10.0.0.4 \u{C4}.TEST\n")
    #expect(latin.lookup("\u{C4}.test") == ["10.0.0.4"] && latin.lookup("\u{E4}.test").isEmpty)
}
