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
