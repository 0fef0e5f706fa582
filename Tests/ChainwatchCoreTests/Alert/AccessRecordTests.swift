import Foundation
import Testing
@testable import ChainwatchCore

/// The access log's line: ECS names and types outside `chainwatch.*`, the byte counts from each side's point of view.
@Suite struct AccessRecordTests {
    static func record(kind: AccessRecord.Kind = .tunnel, close: AccessRecord.CloseReason = .closed) -> AccessRecord {
        let facts = ConnectionFacts(id: 7, sourceIP: "127.0.0.1", sourcePort: 50000, connectHost: "example.com", port: 443,
                                    upstreamIP: "192.0.2.1", serverName: "example.com", protocolVersion: .tls1_3,
                                    cipher: NegotiatedCipher(CipherSuite(rawValue: 0x1301)))
        return AccessRecord(endMilliseconds: 1_795_000_000_123, durationNanoseconds: 1_500_000_000, kind: kind, connection: facts,
                            method: "CONNECT", url: kind == .http ? "http://example.com/" : nil, status: 200,
                            bytesFromClient: 517, bytesToClient: 4096, verdict: "alert", reason: "local_root", evidence: "probe",
                            closeReason: close, detail: close == .closed ? nil : "why", observer: Observer(hostname: "h"))
    }

    @Test func everyFieldOutsideChainwatchIsECS() throws {
        let reference = try ECSReference.load()
        for r in [Self.record(), Self.record(kind: .http, close: .reset), Self.record(kind: .refused, close: .refused)] {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
            #expect(reference.problems(in: object).isEmpty, "\(reference.problems(in: object))")
        }
    }

    /// The message names an IPv6 upstream bracketed (`tunnel ::1:443` read as host `::1:443`), and a refusal before
    /// any target names none.
    @Test func theMessageNamesItsUpstreamUnambiguously() throws {
        var r = Self.record()
        r.connection.connectHost = "2001:db8::1"
        #expect(r.jsonLine.contains("\"message\":\"tunnel [2001:db8::1]:443 closed\""), "\(r.jsonLine)")
        var refused = Self.record(kind: .refused, close: .refused)
        refused.connection.connectHost = ""
        refused.connection.port = 0
        #expect(refused.jsonLine.contains("\"message\":\"refused - refused: why\""), "\(refused.jsonLine)")
    }

    /// A verdict that came after the tunnel's line (issue 27): a line of its own with the same tunnel id, ECS `info`,
    /// its outcome from the verdict, a message that says what it is; the tunnel id readable as loop-number.
    @Test func aLateVerdictIsALineOfItsOwn() throws {
        var r = Self.record(kind: .verdict)
        r.connection.id = 1 << 48 | 57
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
        #expect(try ECSReference.load().problems(in: object).isEmpty)
        let event = try #require(object["event"] as? [String: Any])
        #expect(event["action"] as? String == "verdict" && event["type"] as? [String] == ["connection", "info"])
        #expect(event["outcome"] as? String == "success")
        #expect(object["message"] as? String == "verdict example.com:443 alert: local_root (the tunnel's line was written as it ended)")
        #expect((object["chainwatch"] as? [String: Any])?["tunnel_id"] as? String == "1-57")
        // Its bytes are the tunnel line's: not counted again (a SIEM summing network.bytes would count them twice).
        for field in ["source", "destination", "network"] {
            #expect((object[field] as? [String: Any])?["bytes"] == nil, "\(field).bytes")
        }
        r.verdict = "block"
        let blocked = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any])
        #expect((blocked["event"] as? [String: Any])?["type"] as? [String] == ["connection", "info", "denied"])
        #expect((blocked["event"] as? [String: Any])?["outcome"] as? String == "failure")
    }

    @Test func bytesDurationAndOutcome() throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(Self.record().jsonLine.utf8)) as? [String: Any])
        #expect((object["source"] as? [String: Any])?["bytes"] as? Int == 517)
        #expect((object["destination"] as? [String: Any])?["bytes"] as? Int == 4096)
        #expect((object["network"] as? [String: Any])?["bytes"] as? Int == 4613)
        let event = try #require(object["event"] as? [String: Any])
        #expect(event["duration"] as? Int == 1_500_000_000, "ECS: nanoseconds")
        #expect(event["outcome"] as? String == "success")
        #expect(event["type"] as? [String] == ["connection", "end"])
        #expect(object["@timestamp"] as? String == "2026-11-18T11:06:40.123Z")
        let blocked = try #require(try JSONSerialization.jsonObject(with: Data(Self.record(close: .blocked).jsonLine.utf8)) as? [String: Any])
        let blockedEvent = try #require(blocked["event"] as? [String: Any])
        #expect(blockedEvent["outcome"] as? String == "failure")
        #expect(blockedEvent["type"] as? [String] == ["connection", "end", "denied"])
        #expect(blocked["message"] as? String == "tunnel example.com:443 blocked: why")
    }
}
