import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

/// OCSP responses made by the openssl CLI for the committed test PKI, read as a stapled response would be.
@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/openssl")))
struct OCSPStapleTests {
    let leaf, issuer, other: Certificate
    let store: TrustStore

    init() throws {
        leaf = try PKI.certificate("genuine")
        issuer = try PKI.certificate("genuine-intermediate")
        other = try PKI.certificate("otherhost")
        store = try PKI.store("genuine-root")
    }

    /// `openssl ocsp` as the responder `signer` (a CA of the test PKI) about `subject`, with the index saying `status`.
    func response(about subject: String = "genuine", status: String, signer: String = "genuine-intermediate") throws -> [UInt8] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ocsp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let serial = subject == "genuine" ? "2000" : try serialHex(of: subject)
        let entry = status == "revoked" ? "R\t400101000000Z\t241101000000Z,keyCompromise\t\(serial)\tunknown\t/CN=x\n"
                                        : "V\t400101000000Z\t\t\(serial)\tunknown\t/CN=x\n"
        try entry.write(to: dir.appendingPathComponent("index.txt"), atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("response.der")
        try run(["ocsp", "-index", dir.appendingPathComponent("index.txt").path, "-rsigner", PKI.path("\(signer).pem"),
                 "-rkey", PKI.path("\(signer).key"), "-CA", PKI.path("genuine-intermediate.pem"),
                 "-issuer", PKI.path("genuine-intermediate.pem"), "-cert", PKI.path("\(subject).pem"),
                 "-respout", out.path, "-ndays", "7"])
        return Array(try Data(contentsOf: out))
    }

    func serialHex(of name: String) throws -> String {
        let text = try run(["x509", "-in", PKI.path("\(name).pem"), "-noout", "-serial"])
        return String(text.split(separator: "=").last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " "))")
        return String(decoding: data, as: UTF8.self)
    }

    @Test func goodAndRevokedFromTheIssuer() throws {
        #expect(OCSPStaple.status(of: try response(status: "good"), leaf: leaf, issuer: issuer, untrusted: [leaf, issuer],
                                  store: store) == .good)
        guard case .revoked(let detail) = OCSPStaple.status(of: try response(status: "revoked"), leaf: leaf, issuer: issuer,
                                                              untrusted: [leaf, issuer], store: store) else {
            Issue.record("a revoked response was not read as revoked"); return
        }
        #expect(detail.contains("keyCompromise") && detail.contains("2000"))
    }

    /// What an interceptor could staple: a "revoked" signed by a key that is not the issuer's is not believed.
    @Test func aResponseSignedByAnotherCAIsInvalid() throws {
        let forged = try response(status: "revoked", signer: "attacker-intermediate")
        guard case .invalid(let why) = OCSPStaple.status(of: forged, leaf: leaf, issuer: issuer, untrusted: [leaf, issuer],
                                                         store: store) else {
            Issue.record("a response from another signer was believed"); return
        }
        #expect(why.hasPrefix("not signed by the leaf's issuer"))
    }

    @Test func aResponseAboutAnotherCertificateOrGarbageIsInvalid() throws {
        let aboutOther = try response(about: "otherhost", status: "revoked")
        #expect(OCSPStaple.status(of: aboutOther, leaf: leaf, issuer: issuer, untrusted: [leaf, issuer], store: store)
                == .invalid("the response is not about the leaf"))
        #expect(OCSPStaple.status(of: [0x30, 0x03, 0x02, 0x01, 0x00], leaf: leaf, issuer: issuer, untrusted: [], store: store)
                == .invalid("the stapled response does not decode"))
    }
}
