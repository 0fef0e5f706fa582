import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

/// The committed test PKI (Fixtures/pki, made by Tests/pki/make-pki.sh) and its CLI-computed fingerprints.
enum PKI {
    static let directory: URL = {
        if let resources = Bundle.module.resourceURL {
            let candidate = resources.appendingPathComponent("Fixtures/pki")
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/pki")
    }()

    static func path(_ file: String) -> String { directory.appendingPathComponent(file).path }

    /// All certificates of `NAME.pem` (or `NAME.chain.pem`, ... when given with its suffix).
    static func certificates(_ file: String) throws -> [Certificate] {
        let name = file.hasSuffix(".pem") ? file : file + ".pem"
        return try Certificate.parsePEM(String(contentsOfFile: path(name), encoding: .utf8))
    }

    static func certificate(_ name: String) throws -> Certificate {
        let all = try certificates(name)
        #expect(all.count == 1)
        return all[0]
    }

    static func der(_ name: String) throws -> [UInt8] { try certificate(name).der }

    /// Trust store with the named CA certificates as extra anchors (no system roots).
    static func store(_ anchors: String...) throws -> TrustStore {
        try TrustStore(systemRoots: false, extraAnchors: anchors.map { try certificate($0) })
    }

    /// One row of fingerprints.tsv.
    struct Row: Sendable, CustomTestStringConvertible {
        var name, sha256, spkiSHA256, serial, subject, issuer: String
        var testDescription: String { name }
    }

    static let rows: [Row] = {
        guard let text = try? String(contentsOfFile: path("fingerprints.tsv"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").dropFirst().map { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return Row(name: f[0], sha256: f[1], spkiSHA256: f[2], serial: f[3], subject: f[4], issuer: f[5])
        }
    }()

    /// 2030-01-01T00:00:00Z: inside every certificate's validity except `expired`.
    static let now = UnixTime(seconds: 1_893_456_000)
    static let validFrom = UnixTime(seconds: 1_577_836_800)   // 2020-01-01
    static let validUntil = UnixTime(seconds: 2_208_988_800)  // 2040-01-01
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02X", $0) }.joined() }
