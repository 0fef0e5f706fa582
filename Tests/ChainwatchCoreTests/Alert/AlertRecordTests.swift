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

    func record(subject: String, names: Int = 1) -> AlertRecord {
        var leaf = facts(subject: subject)
        if names > 1 { leaf.dnsNames = (0..<names).map { "host\($0).many-names.test" } }
        let evidence = Evidence(connectHost: "a.test", serverName: "a.test", port: 443, protocolVersion: .tls1_2,
                                cipher: NegotiatedCipher(name: "TLS_AES_128_GCM_SHA256", forwardSecret: true),
                                validation: PathValidation(presented: [leaf], path: [leaf], error: nil, anchorKind: .operatorAnchor),
                                source: .passive)
        let finding = Finding(reason: .rootMismatch, level: .root, detail: "anchor \"x\" not pinned\nsecond line", check: "pins", action: .block)
        let connection = ConnectionFacts(id: 7, sourceIP: "127.0.0.1", sourcePort: 5000, connectHost: "a.test", port: 443,
                                         upstreamIP: "127.0.0.1", serverName: "a.test", protocolVersion: .tls1_2,
                                         cipher: NegotiatedCipher(name: "TLS_AES_128_GCM_SHA256", forwardSecret: true))
        return AlertRecord(timeMilliseconds: 1_795_323_599_007, connection: connection, finding: finding, rule: Rule(name: "r"),
                           evidence: evidence, action: .block, allFindings: [finding, finding],
                           observer: Observer(hostname: "cw-1.example"))
    }

    /// A leaf of 7 000 names wrote about 420 KiB per line (cached verdict or not), and its known-bad mark weighed as
    /// much. A line lists the first 100 and says how many it left out; the mark keeps as many.
    @Test func aLeafOfThousandsOfNamesWritesABoundedLine() throws {
        let line = record(subject: "CN=many", names: 7_000).jsonLine
        #expect(line.utf8.count < 12_000, "\(line.utf8.count) bytes")
        let json = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
        let x509 = ((json["tls"] as! [String: Any])["server"] as! [String: Any])["x509"] as! [String: Any]
        #expect((x509["alternative_names"] as! [String]).count == 100)
        let chain = (json["chainwatch"] as! [String: Any])["chain"] as! [String: Any]
        #expect(chain["leaf_names_omitted"] as? Int == 6_900)
        // A mark's copy keeps 100 names and the count; its line says the same.
        let evidence = try #require(record(subject: "CN=many", names: 7_000).evidence)
        let marked = evidence.withNames()
        #expect(marked.leaf?.dnsNames.count == 100 && marked.leaf?.namesOmitted == 6_900)
        #expect(AlertRecord.render(marked).chain == AlertRecord.render(evidence).chain)
        #expect(record(subject: "CN=few").evidence.map { $0.withNames() == $0 } == true)
        #expect(!record(subject: "CN=few").jsonLine.contains("leaf_names_omitted"))
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
        #expect(event["type"] as? [String] == ["connection", "denied"])
        #expect(event["outcome"] as? String == "failure")
        #expect((object["ecs"] as? [String: Any])?["version"] as? String == Observer.ecsVersion)
        let observer = try #require(object["observer"] as? [String: Any])
        #expect(observer["hostname"] as? String == "cw-1.example" && observer["product"] as? String == "chainwatch")
        #expect(observer["version"] as? String == Observer.version)
        let chainwatch = try #require(object["chainwatch"] as? [String: Any])
        #expect(chainwatch["evidence"] as? String == "passive")
        #expect((chainwatch["chain"] as? [String: Any])?["anchor_kind"] as? String == "operator")
        #expect((chainwatch["chain"] as? [String: Any])?["ocsp"] as? String == "absent")   // nothing stapled
        #expect((chainwatch["findings"] as? [Any])?.count == 2)
        #expect(object["injected"] == nil)
    }

    /// A cached verdict's line places the chain facts rendered when it was judged: byte for byte the line that
    /// renders them afresh, with a staple, with no leaf, and with no evidence.
    @Test func renderedEvidenceGivesTheSameLine() throws {
        var r = record(subject: "CN=evil\n\"},{\"injected\":1")
        r.evidence?.stapled = .revoked(detail: "revoked at 2026-01-01T00:00:00Z")
        var variants = [r]
        var noLeaf = r
        noLeaf.evidence?.validation = PathValidation(presented: [], path: [], error: nil, anchorKind: nil)
        variants.append(noLeaf)
        for plain in variants {
            var cached = plain
            cached.evidence?.rendered = AlertRecord.render(try #require(plain.evidence))
            #expect(cached.jsonLine == plain.jsonLine)
            #expect(cached.evidence == plain.evidence)
        }
        var none = r
        none.evidence = nil
        #expect(try JSONSerialization.jsonObject(with: Data(none.jsonLine.utf8)) is [String: Any])
    }

    @Test func stapledStatusIsRecorded() throws {
        var r = record(subject: "CN=a")
        r.evidence?.stapled = .invalid("not signed by the leaf's issuer")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
        let chain = try #require((object["chainwatch"] as? [String: Any])?["chain"] as? [String: Any])
        #expect(chain["ocsp"] as? String == "invalid" && chain["ocsp_detail"] as? String == "not signed by the leaf's issuer")
    }

    /// An alert (traffic passed) is a failed check all the same: ECS's outcome is about what the line reports.
    @Test func alertIsAllowedAndStillAFailure() throws {
        var r = record(subject: "CN=a")
        r.action = .alert
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
        let event = try #require(object["event"] as? [String: Any])
        #expect(event["type"] as? [String] == ["connection", "allowed"])
        #expect(event["outcome"] as? String == "failure")
    }

    /// Every field outside `chainwatch.*` is an ECS field of the release named in `ecs.version`, with its type; the
    /// record is filled as far as it goes (pins, a validation error, both JA4s, every certificate field).
    @Test func everyFieldOutsideChainwatchIsECS() throws {
        let reference = try ECSReference.load()
        var r = record(subject: "CN=a")
        r.connection.clientJA4 = "t13d1516h2_8daaf6152771_02713d6af862"
        r.connection.probeJA4 = r.connection.clientJA4
        r.evidence?.validation.error = ValidationError(reason: .expired, opensslCode: 10, message: "certificate has expired", depth: 0)
        r.rule = Rule(name: "pinned", pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)]), leafSubjects: [.distinguishedName("CN=a")],
                                                   expires: UnixTime(seconds: 1_900_000_000)))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
        let problems = reference.problems(in: object)
        #expect(problems.isEmpty, "\(problems)")
        #expect(reference.fields.count > 1000)
        // The checker itself: a made-up field and a wrong type are caught.
        #expect(reference.problems(in: ["tls": ["client": ["ja4": "x"]]]) == ["tls.client.ja4: not an ECS field"])
        #expect(reference.problems(in: ["destination": ["port": "443"]]) == ["destination.port: \"443\" is not ECS type long"])
    }

    /// Issue 27: expected pins and the chain seen in one encoding, level by level; the known-bad mark's end and how to
    /// clear it; the next step for the reason.
    @Test func saysWhatWasExpectedAndSeenAndWhatToDoNext() throws {
        var r = record(subject: "CN=a")
        let root = facts(subject: "CN=Root")
        r.evidence?.validation.path = [facts(subject: "CN=a"), facts(subject: "CN=Mid"), root]
        r.rule = Rule(name: "pinned", pins: PinSet(root: LevelPins(spki: [Synthetic.pin(0x11)])))
        r.knownBadUntilMilliseconds = r.timeMilliseconds + 300_000
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
        let chainwatch = try #require(object["chainwatch"] as? [String: Any])
        let expected = try #require((chainwatch["expected"] as? [String: Any])?["root"] as? [String])
        let seen = try #require(chainwatch["seen"] as? [String: Any])
        #expect(expected == ["spki sha256/" + HashText.base64(Synthetic.pin(0x11).bytes)])
        let spki = "spki sha256/" + HashText.base64(root.spkiSHA256)
        #expect(seen["root"] as? [String] == ["cert sha256/" + HashText.base64(root.sha256), spki])
        #expect(seen["root_subject"] as? String == "CN=Root" && (seen["intermediate"] as? [String])?.count == 2)
        #expect(seen["leaf_subject"] as? [String] == ["CN=a"])
        let mark = try #require(chainwatch["known_bad"] as? [String: Any])
        #expect(mark["until"] as? String == "2026-11-22T05:04:59.007Z" && mark["seconds"] as? Int == 300)
        #expect(mark["clear"] as? String == "chainwatch ctl clear-known-bad a.test:443")
        #expect((object["message"] as? String)?.hasSuffix("(chainwatch ctl clear-known-bad a.test:443 ends it sooner)") == true)
        #expect(chainwatch["next"] as? String == Reason.rootMismatch.nextStep)
        // A chain that built no path is listed as presented: its last certificate (an intermediate, the root left
        // out) is not shown as the root beside the expected one.
        var unvalidated = r
        unvalidated.evidence?.validation.path = []
        unvalidated.evidence?.validation.presented = [facts(subject: "CN=a"), facts(subject: "CN=Mid")]
        let line = try #require(try JSONSerialization.jsonObject(with: Data(unvalidated.jsonLine.utf8)) as? [String: Any])
        let presented = try #require((line["chainwatch"] as? [String: Any])?["seen"] as? [String: Any])
        #expect(presented["root"] == nil && presented["intermediate"] == nil && presented["validated"] as? Bool == false)
        #expect((presented["presented"] as? [String])?.count == 4 && presented["presented_subjects"] as? [String] == ["CN=a", "CN=Mid"])
        r.knownBadUntilMilliseconds = nil
        #expect(!r.jsonLine.contains("known_bad"))
        #expect(AlertRecord.clearCommand(host: "2001:db8::1", port: 443) == "chainwatch ctl clear-known-bad [2001:db8::1]:443")
        // A proxy whose admin listener is not where ctl looks by default: the command names it.
        #expect(AlertRecord.clearCommand(host: "a.test", port: 443, admin: "127.0.0.1:9300")
                == "chainwatch ctl --admin 127.0.0.1:9300 clear-known-bad a.test:443")
    }

    @Test func hashTextEncodings() {
        #expect(HashText.hex([0x00, 0xFF, 0x1A]) == "00FF1A")
        #expect(HashText.base64(Array("Man".utf8)) == "TWFu")
        #expect(HashText.base64(Array("Ma".utf8)) == "TWE=")
        #expect(HashText.base64(Array("M".utf8)) == "TQ==")
        #expect(HashText.base64([]) == "")
    }
}

/// The ECS field list kept in the repository (Tests/ecs/fields.csv, see its README).
struct ECSReference {
    var fields: [String: (type: String, normalization: String)]

    static func load() throws -> ECSReference {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("ecs/fields.csv")
        let text = try String(contentsOf: url, encoding: .utf8)
        var fields: [String: (String, String)] = [:]
        for line in text.split(separator: "\n").dropFirst() {
            let columns = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard columns.count == 3 else { continue }   // no ECS field name or type holds a comma
            fields[columns[0]] = (columns[1], columns[2])
        }
        return ECSReference(fields: fields)
    }

    func problems(in object: [String: Any], prefix: String = "") -> [String] {
        var problems: [String] = []
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            let name = prefix.isEmpty ? key : prefix + "." + key
            if name.hasPrefix("chainwatch.") { continue }
            if let inner = value as? [String: Any] {
                problems += self.problems(in: inner, prefix: name)
                continue
            }
            guard let (type, normalization) = fields[name] else {
                problems.append("\(name): not an ECS field")
                continue
            }
            let values: [Any]
            if let array = value as? [Any] {
                if !normalization.contains("array") { problems.append("\(name): an array, ECS has one value") }
                values = array
            } else {
                values = [value]
            }
            for v in values where !Self.conforms(v, to: type) {
                problems.append("\(name): \(v is String ? "\"\(v)\"" : "\(v)") is not ECS type \(type)")
            }
        }
        return problems
    }

    static func conforms(_ value: Any, to type: String) -> Bool {
        switch type {
        case "keyword", "constant_keyword", "wildcard", "match_only_text", "text", "ip": return value is String
        case "date": return (value as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/) != nil
        case "long": return value is Int && !(value is Bool)
        case "boolean": return value is Bool
        default: return false
        }
    }
}
