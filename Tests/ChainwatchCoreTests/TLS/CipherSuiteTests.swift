import Testing
@testable import ChainwatchCore

@Suite struct CipherSuiteTests {
    @Test func commonSuitesHaveIANANames() {
        #expect(CipherSuite(rawValue: 0x1301).name == "TLS_AES_128_GCM_SHA256")
        #expect(CipherSuite(rawValue: 0xC02F).name == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        #expect(CipherSuite(rawValue: 0xCCA9).name == "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")
        #expect(CipherSuite(rawValue: 0x009C).name == "TLS_RSA_WITH_AES_128_GCM_SHA256")
        #expect(CipherSuite(rawValue: 0x1234).name == nil)
        #expect(CipherSuite(rawValue: 0x1234).description == "0x1234")
        #expect(CipherSuite.ianaNames.count >= 40)
    }

    @Test func forwardSecrecyComesFromEphemeralKeyExchangeOrTLS13() {
        #expect(CipherSuite(rawValue: 0x1302).isForwardSecret)
        #expect(CipherSuite(rawValue: 0xC02C).isForwardSecret)
        #expect(CipherSuite(rawValue: 0x009E).isForwardSecret)
        #expect(!CipherSuite(rawValue: 0x009C).isForwardSecret)
        #expect(!CipherSuite(rawValue: 0x002F).isForwardSecret)
        #expect(!CipherSuite(rawValue: 0x00FF).isForwardSecret)
        #expect(!CipherSuite(rawValue: 0x13FF).isForwardSecret, "unknown, even in the TLS 1.3 range")
    }

    @Test func everyNamedSuiteIsClassified() {
        for (code, name) in CipherSuite.ianaNames {
            let suite = CipherSuite(rawValue: code)
            let ephemeral = name.hasPrefix("TLS_ECDHE_") || name.hasPrefix("TLS_DHE_")
            #expect(suite.isTLS13 == (code >> 8 == 0x13), "\(name)")
            #expect(suite.isForwardSecret == (ephemeral || suite.isTLS13), "\(name)")
        }
    }

    @Test func versionsHaveOpenSSLNames() {
        #expect([TLSVersion.sslv3, .tls1_0, .tls1_1, .tls1_2, .tls1_3].map(\.name) == ["SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"])
        #expect(TLSVersion(rawValue: 0x7F1C).name == "0x7F1C")
        #expect(TLSVersion.tls1_2 < .tls1_3)
    }
}
