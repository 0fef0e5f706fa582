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
