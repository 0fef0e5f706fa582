import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

/// `SystemRoots`: the OS store read into memory once, as OpenSSL's default paths name it, and read again when it changes.
@Suite struct SystemRootsTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("chainwatch-system-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("certs"), withIntermediateDirectories: true)
    }

    func pem(_ name: String) throws -> String { try String(contentsOfFile: PKI.path(name + ".pem"), encoding: .utf8) }
    func write(_ text: String, _ relative: String) throws {
        try text.write(to: directory.appendingPathComponent(relative), atomically: true, encoding: .utf8)
    }
    var bundlePath: String { directory.appendingPathComponent("bundle.pem").path }
    var certsPath: String { directory.appendingPathComponent("certs").path }

    func hash(_ name: String) throws -> String { try #require(SystemRoots.subjectHash(try PKI.certificate(name))) }

    @Test func theBundleAndTheHashedFilesAreReadAsOpenSSLsLookupWould() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // The bundle holds two roots; the directory links one of them again under its hash (as Debian does) and adds
        // a third. Not read: a file under a name that is not its hash, one past a gap in the suffixes, one whose name
        // is not a hash at all, and one that is not a certificate.
        try write(try pem("genuine-root") + "\n" + (try pem("attacker-root")), "bundle.pem")
        try write(try pem("genuine-root"), "certs/\(try hash("genuine-root")).0")
        try write(try pem("private-ca"), "certs/\(try hash("private-ca")).0")
        try write(try pem("selfsigned"), "certs/0a1b2c3d.0")
        try write(try pem("genuine-intermediate"), "certs/\(try hash("genuine-intermediate")).1")
        try write(try pem("genuine-intermediate-b"), "certs/genuine-intermediate-b.pem")
        try write("not a certificate", "certs/01234567.0")
        let loaded = SystemRoots.load(file: bundlePath, directories: [certsPath])
        let expected = try ["genuine-root", "attacker-root", "private-ca"].map { try PKI.certificate($0).facts.sha256 }
        #expect(Set(loaded.map(\.facts.sha256)) == Set(expected))
        #expect(loaded.count == 3)
        // That `subjectHash` is the name `openssl x509 -hash` gives is shown end to end: test_anchor_kinds names the
        // file with the CLI and the proxy reads it.
    }

    @Test func readOnceWhileUnchangedAndAgainAfterAChange() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try write(try pem("genuine-root"), "bundle.pem")
        let first = SystemRoots.load(file: bundlePath, directories: [certsPath])
        let second = SystemRoots.load(file: bundlePath, directories: [certsPath])
        #expect(first.count == 1 && second.count == 1 && first[0] === second[0])   // the same decoded certificate
        let generation = SystemRoots.generation
        let added = "certs/\(try hash("private-ca")).0"
        try write(try pem("private-ca"), added)   // a root added as update-ca-certificates would
        let third = SystemRoots.load(file: bundlePath, directories: [certsPath])
        #expect(third.count == 2)
        #expect(SystemRoots.generation > generation)
        // A file overwritten in place (same inode, the directory's entries unchanged) is read again too: here with
        // another root, which replaces the one it held.
        let before = try FileManager.default.attributesOfItem(atPath: certsPath)[.modificationDate] as? Date
        try (try pem("attacker-root")).write(toFile: directory.appendingPathComponent(added).path, atomically: false,
                                            encoding: .utf8)
        #expect(try FileManager.default.attributesOfItem(atPath: certsPath)[.modificationDate] as? Date == before)
        let fourth = SystemRoots.load(file: bundlePath, directories: [certsPath])
        // Under the private CA's hash name the attacker root is not what the lookup would find: it is not read.
        #expect(fourth.map(\.facts.sha256) == [first[0].facts.sha256])   // read again: the private CA is gone
    }

    @Test func missingLocationsGiveNothing() {
        #expect(SystemRoots.load(file: "/nonexistent/bundle.pem", directories: ["/nonexistent/certs"]).isEmpty)
    }

    @Test(arguments: [("9d04f354.0", true), ("9d04f354.12", true), ("9D04F354.0", false), ("9d04f354.r0", false),
                      ("ca-certificates.crt", false), ("9d04f35.0", false), ("9d04f354.", false)])
    func hashedNamesAreTheOnesOpenSSLWouldOpen(name: String, hashed: Bool) {
        #expect(SystemRoots.isHashedName(name) == hashed)
    }

    /// The machine's own store (what `TrustStore.system()` holds): Debian's bundle is read, with its Mozilla roots.
    @Test func theDefaultLocationsAreDebians() throws {
        let locations = SystemRoots.defaultLocations
        #expect(!locations.file.isEmpty && !locations.directories.isEmpty)
        #expect(SystemRoots.load().count >= 100)
    }
}
