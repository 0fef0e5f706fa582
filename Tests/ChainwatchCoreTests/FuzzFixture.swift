import Foundation
import Testing

/// Inputs the fuzzers (Tests/Fuzz) found, kept as they were found (`Fixtures/fuzz/PROVENANCE.md`).
enum FuzzFixture {
    static func bytes(_ name: String) throws -> [UInt8] {
        let url = try #require(Bundle.module.resourceURL).appendingPathComponent("Fixtures/fuzz/\(name)")
        return Array(try Data(contentsOf: url))
    }

    /// The fixture as the proxy reads a text file: bytes that are not UTF-8 become U+FFFD.
    static func text(_ name: String) throws -> String {
        String(decoding: try bytes(name), as: UTF8.self)
    }
}
