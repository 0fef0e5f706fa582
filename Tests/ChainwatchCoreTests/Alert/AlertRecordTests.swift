import Foundation
import Testing
@testable import ChainwatchCore

@Suite struct AlertRecordTests {
    func facts(subject: String) -> CertificateFacts {
        CertificateFacts(sha256: Array(repeating: 0xAB, count: 32), spkiSHA256: Array(repeating: 0x01, count: 32), subject: subject,
                         issuer: "CN=Issuer", serialHex: "10", notBefore: UnixTime(seconds: 0), notAfter: UnixTime(seconds: 2_000_000_000),
                         dnsNames: ["a.test"], ipAddresses: [], keyType: .ec, keyBits: 256, signatureAlgorithm: "ecdsa-with-SHA256",
                         signatureDigest: "SHA256", isCA: false, isSelfSigned: false)
    }

    func record(subject: String) -> AlertRecord {
        let leaf = facts(subject: subject)
        let evidence = Evidence(connectHost: "a.test", serverName: "a.test", port: 443, protocolVersion: .tls1_2,
                                cipher: NegotiatedCipher(name: "TLS_AES_128_GCM_SHA256", forwardSecret: true),
                                validation: PathValidation(presented: [leaf], path: [leaf], error: nil, anchorIsSystemRoot: false),
                                source: .passive)
        let finding = Finding(reason: .rootMismatch, level: .root, detail: "anchor \"x\" not pinned\nsecond line", check: "pins", action: .block)
        let connection = ConnectionFacts(id: 7, sourceIP: "127.0.0.1", sourcePort: 5000, connectHost: "a.test", port: 443,
                                         upstreamIP: "127.0.0.1", serverName: "a.test", protocolVersion: .tls1_2,
                                         cipher: NegotiatedCipher(name: "TLS_AES_128_GCM_SHA256", forwardSecret: true))
        return AlertRecord(timeMilliseconds: 1_795_323_599_007, connection: connection, finding: finding, rule: Rule(name: "r"),
                           evidence: evidence, action: .block, allFindings: [finding, finding])
    }

    @Test func isOneLineOfValidJSONWithECSNames() throws {
        let line = record(subject: "CN=evil\n\"},{\"injected\":1,O=\u{2028}x").jsonLine
        #expect(!line.contains("\n") && !line.contains("\u{2028}"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["@timestamp"] as? String == "2026-11-22T04:59:59.007Z")
        let event = try #require(object["event"] as? [String: Any])
        #expect(event["action"] as? String == "block")
        #expect(event["reason"] as? String == "root_mismatch")
        let tls = try #require(object["tls"] as? [String: Any])
        let server = try #require(tls["server"] as? [String: Any])
        #expect((server["hash"] as? [String: Any])?["sha256"] as? String == String(repeating: "AB", count: 32))
        let x509 = try #require(server["x509"] as? [String: Any])
        #expect((x509["subject"] as? [String: Any])?["distinguished_name"] as? String == "CN=evil\n\"},{\"injected\":1,O=\u{2028}x")
        let chainwatch = try #require(object["chainwatch"] as? [String: Any])
        #expect(chainwatch["evidence"] as? String == "passive")
        #expect((chainwatch["findings"] as? [Any])?.count == 2)
        #expect(object["injected"] == nil)
    }

    @Test func hashTextEncodings() {
        #expect(HashText.hex([0x00, 0xFF, 0x1A]) == "00FF1A")
        #expect(HashText.base64(Array("Man".utf8)) == "TWFu")
        #expect(HashText.base64(Array("Ma".utf8)) == "TWE=")
        #expect(HashText.base64(Array("M".utf8)) == "TQ==")
        #expect(HashText.base64([]) == "")
    }
}
