import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

@Suite struct CertificateTests {
    @Test func fingerprintsTableIsPresent() {
        #expect(PKI.rows.count == 15)
    }

    @Test(arguments: PKI.rows)
    func factsMatchTheOpenSSLCommandLine(_ row: PKI.Row) throws {
        let facts = try PKI.certificate(row.name).facts
        #expect(hex(facts.sha256) == row.sha256)
        #expect(hex(facts.spkiSHA256) == row.spkiSHA256)
        #expect(facts.serialHex == row.serial)
        #expect(facts.subject == row.subject)
        #expect(facts.issuer == row.issuer)
    }

    @Test func genuineLeafFacts() throws {
        let facts = try PKI.certificate("genuine").facts
        #expect(facts.subject == "CN=genuine.test,O=Chainwatch Test")
        #expect(facts.issuer == "CN=Chainwatch Test Intermediate,O=Chainwatch Test")
        #expect(facts.dnsNames == ["genuine.test"])
        #expect(facts.ipAddresses == ["127.0.0.1"])
        #expect(facts.notBefore == PKI.validFrom)
        #expect(facts.notAfter == PKI.validUntil)
        #expect(facts.keyType == .ec)
        #expect(facts.keyBits == 256)
        #expect(facts.signatureAlgorithm == "ecdsa-with-SHA256")
        #expect(facts.signatureDigest == "SHA256")
        #expect(!facts.isCA)
        #expect(!facts.isSelfSigned)
    }

    @Test func rootAndIntermediateFacts() throws {
        let root = try PKI.certificate("genuine-root").facts
        #expect(root.isCA && root.isSelfSigned)
        #expect(root.dnsNames.isEmpty && root.ipAddresses.isEmpty)
        let intermediate = try PKI.certificate("genuine-intermediate").facts
        #expect(intermediate.isCA && !intermediate.isSelfSigned)
    }

    @Test func attackerCopiesSubjectsButNotKeys() throws {
        for (genuine, attacker) in [("genuine-root", "attacker-root"), ("genuine-intermediate", "attacker-intermediate"), ("genuine", "attacker")] {
            let g = try PKI.certificate(genuine).facts, a = try PKI.certificate(attacker).facts
            #expect(g.subject == a.subject && g.issuer == a.issuer && g.serialHex == a.serialHex)
            #expect(g.spkiSHA256 != a.spkiSHA256 && g.sha256 != a.sha256)
        }
    }

    @Test func rekeyedLeafKeepsSubjectWithNewKey() throws {
        let genuine = try PKI.certificate("genuine").facts, rekeyed = try PKI.certificate("rekeyed").facts
        #expect(genuine.subject == rekeyed.subject && genuine.dnsNames == rekeyed.dnsNames)
        #expect(genuine.spkiSHA256 != rekeyed.spkiSHA256)
    }

    @Test func weakCertificatesShowTheirWeakness() throws {
        let rsa = try PKI.certificate("weak-rsa1024").facts
        #expect(rsa.keyType == .rsa && rsa.keyBits == 1024)
        let sha1 = try PKI.certificate("weak-sha1").facts
        #expect(sha1.signatureAlgorithm == "ecdsa-with-SHA1")
        #expect(sha1.signatureDigest == "SHA1")
    }

    @Test func expiredLeafDates() throws {
        let facts = try PKI.certificate("expired").facts
        #expect(facts.notBefore == PKI.validFrom)
        #expect(facts.notAfter == UnixTime(seconds: 1_609_459_200))  // 2021-01-01
    }

    @Test func derRoundTripGivesSameFacts() throws {
        let original = try PKI.certificate("genuine")
        let decoded = try Certificate(der: original.der)
        #expect(decoded.facts == original.facts)
        #expect(decoded == original)
    }

    @Test func fullChainParsesLeafFirst() throws {
        let chain = try PKI.certificates("genuine.fullchain.pem")
        #expect(chain.map(\.facts.subject) == ["CN=genuine.test,O=Chainwatch Test",
                                               "CN=Chainwatch Test Intermediate,O=Chainwatch Test"])
    }

    @Test func pemParserSkipsKeysAndRejectsTextWithoutCertificates() throws {
        let key = try String(contentsOfFile: PKI.path("genuine.key"), encoding: .utf8)
        let cert = try String(contentsOfFile: PKI.path("genuine.pem"), encoding: .utf8)
        #expect(try Certificate.parsePEM(key + cert).count == 1)
        #expect(throws: OpenSSLError.self) { try Certificate.parsePEM(key) }
        #expect(throws: OpenSSLError.self) { try Certificate.parsePEM("") }
    }

    @Test func corruptPEMBlockThrows() throws {
        let cert = try String(contentsOfFile: PKI.path("genuine.pem"), encoding: .utf8)
        var lines = cert.split(separator: "\n").map(String.init)
        lines[3] = String(repeating: "!", count: lines[3].count)
        let error = #expect(throws: OpenSSLError.self) { try Certificate.parsePEM(lines.joined(separator: "\n")) }
        #expect(error?.call == "PEM_read_bio_X509")
    }

    @Test func undecodableDERThrowsNamingTheCall() throws {
        let error = #expect(throws: OpenSSLError.self) { try Certificate(der: [0x30, 0x03, 0x02, 0x01, 0x01]) }
        #expect(error?.call == "d2i_X509")
        #expect(throws: OpenSSLError.self) { try Certificate(der: []) }
        let trailing = try PKI.der("genuine") + [0]
        #expect(throws: OpenSSLError.self) { try Certificate(der: trailing) }
    }

    @Test func referenceHostnameMatch() throws {
        let leaf = try PKI.certificate("genuine")
        #expect(leaf.matchesHostname("genuine.test"))
        #expect(leaf.matchesHostname("GENUINE.test."))
        #expect(leaf.matchesHostname("127.0.0.1"))
        #expect(!leaf.matchesHostname("www.genuine.test"))
        #expect(!leaf.matchesHostname("other.test"))
        #expect(!leaf.matchesHostname("127.0.0.2"))
        #expect(!leaf.matchesHostname("::1"))
        #expect(!leaf.matchesHostname(""))
        #expect(try PKI.certificate("otherhost").matchesHostname("other.test"))
    }
}
