import ChainwatchCore
import ChainwatchOpenSSL
import Foundation
import Testing

/// The parts of a ClientHello handshake message a test checks, read by this test's own small parser (not Core's).
struct ParsedHello {
    var suites: [UInt16] = []
    var extensions: [UInt16: [UInt8]] = [:]
    var extensionOrder: [UInt16] = []

    init(handshakeMessage m: [UInt8]) throws {
        guard m.count > 4, m[0] == 1 else { throw POSIXError(.EINVAL) }
        var i = 4 + 2 + 32
        i += 1 + Int(m[i])                                    // session id
        let suitesLength = Int(m[i]) << 8 | Int(m[i + 1]); i += 2
        for j in stride(from: i, to: i + suitesLength, by: 2) { suites.append(UInt16(m[j]) << 8 | UInt16(m[j + 1])) }
        i += suitesLength
        i += 1 + Int(m[i])                                    // compression methods
        let end = i + 2 + (Int(m[i]) << 8 | Int(m[i + 1])); i += 2
        while i + 4 <= end {
            let type = UInt16(m[i]) << 8 | UInt16(m[i + 1])
            let length = Int(m[i + 2]) << 8 | Int(m[i + 3])
            extensions[type] = Array(m[(i + 4)..<(i + 4 + length)])
            extensionOrder.append(type)
            i += 4 + length
        }
    }

    /// A list of 16-bit values behind a 16-bit length (supported_groups, signature_algorithms).
    func u16List(_ type: UInt16) -> [UInt16] {
        guard let body = extensions[type], body.count >= 2 else { return [] }
        return stride(from: 2, to: body.count - 1, by: 2).map { UInt16(body[$0]) << 8 | UInt16(body[$0 + 1]) }
    }

    var keyShareGroups: [UInt16] {
        guard let body = extensions[51], body.count >= 2 else { return [] }
        var groups: [UInt16] = []
        var i = 2
        while i + 4 <= body.count {
            groups.append(UInt16(body[i]) << 8 | UInt16(body[i + 1]))
            i += 4 + (Int(body[i + 2]) << 8 | Int(body[i + 3]))
        }
        return groups
    }

    var alpn: [String] {
        guard let body = extensions[16], body.count >= 2 else { return [] }
        var names: [String] = []
        var i = 2
        while i < body.count { let n = Int(body[i]); names.append(String(decoding: body[(i + 1)..<(i + 1 + n)], as: UTF8.self)); i += 1 + n }
        return names
    }
}

/// The ClientHello a fresh client writes first, without any server (record header stripped).
func firstClientHello(_ offer: ClientOffer) throws -> ParsedHello {
    let client = try TLSClient(offer: offer)
    #expect(try client.advance() == .needsMoreBytes)
    let record = client.takeOutgoing()
    #expect(record.first == 22)
    return try ParsedHello(handshakeMessage: Array(record.dropFirst(5)))
}

/// A browser-like offer: suites, groups and signature algorithms in an order unlike OpenSSL's own.
let mirroredOffer = ClientOffer(
    serverName: "genuine.test", alpn: ["h2", "http/1.1"], versions: [.tls1_3, .tls1_2], legacyVersion: .tls1_2,
    cipherSuites: [0x1302, 0x1301, 0x1303, 0xC02C, 0xC02B, 0x00FF, 0x9999],
    supportedGroups: [23, 29, 24, 4588], keyShareGroups: [29],
    signatureAlgorithms: [0x0804, 0x0403, 0x0401, 0x0503],
    extensionTypes: [0, 23, 65281, 10, 11, 35, 16, 5, 18, 51, 45, 43, 13, 0x7777])

@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/openssl")))
struct TLSClientTests {
    @Test func mirroredOfferRepeatsSuitesGroupsSignaturesALPNAndExtensionSet() throws {
        let hello = try firstClientHello(mirroredOffer)
        // Unknown 0x9999 is left out; OpenSSL signals secure renegotiation with the SCSV at the end, never with the
        // renegotiation_info extension (65281) in a first handshake.
        #expect(hello.suites == [0x1302, 0x1301, 0x1303, 0xC02C, 0xC02B, 0x00FF])
        // x25519 (the key-share group) first, the rest in the client's order; 4588 (ML-KEM) unknown to 3.0.
        #expect(hello.u16List(10) == [29, 23, 24])
        #expect(hello.keyShareGroups == [29])
        #expect(hello.u16List(13) == [0x0804, 0x0403, 0x0401, 0x0503])
        #expect(hello.alpn == ["h2", "http/1.1"])
        #expect(hello.u16List(43).isEmpty == false)
        let types = Set(hello.extensionOrder)
        #expect(types == [0, 23, 10, 11, 35, 16, 5, 18, 51, 45, 43, 13, 0x7777])
        #expect(hello.extensions[0x7777] == [] && hello.extensions[18] == [])   // sent empty (custom extensions)
    }

    /// curl's list on Debian 12 ends in SHA-224 and DSA schemes, which OpenSSL 3.0 names only as `SIG+HASH`: a
    /// probe that dropped them had a JA4 of its own.
    @Test func legacySignatureSchemesAreMirroredToo() throws {
        let curl: [UInt16] = [0x0403, 0x0503, 0x0603, 0x0807, 0x0808, 0x0809, 0x080A, 0x080B, 0x0804, 0x0805, 0x0806,
                              0x0401, 0x0501, 0x0601, 0x0303, 0x0301, 0x0302, 0x0402, 0x0502, 0x0602]
        let hello = try firstClientHello(ClientOffer(serverName: "genuine.test", signatureAlgorithms: curl))
        #expect(hello.u16List(13) == curl)
    }

    @Test func defaultOfferIsFullAndIPLiteralsGetNoSNI() throws {
        let named = try firstClientHello(ClientOffer(serverName: "genuine.test"))
        #expect(named.extensions[43]?.contains(0x04) == true)  // TLS 1.3 offered
        #expect(named.extensions[0] != nil)
        #expect(named.suites.contains(0x1301) && named.suites.contains(0xC02B))
        #expect(try firstClientHello(ClientOffer(serverName: "127.0.0.1")).extensions[0] == nil)
        #expect(try firstClientHello(ClientOffer(serverName: "::1")).extensions[0] == nil)
        // At most TLS 1.2: no supported_versions, no key share.
        let old = try firstClientHello(.minimal(serverName: "genuine.test", maxVersion: .tls1_2))
        #expect(old.extensions[43] == nil && old.extensions[51] == nil)
    }

    @Test func garbageFromTheServerIsATypedFailureNamingSSLConnect() throws {
        let client = try TLSClient(offer: ClientOffer(serverName: "genuine.test"))
        _ = try client.advance()
        try client.receive(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8))
        let error = #expect(throws: OpenSSLError.self) { try client.advance() }
        #expect(error?.call == "SSL_connect")
        #expect(error?.queue.isEmpty == false)
        #expect(client.hasOutgoing)   // the alert that says why
    }

    @Test func tls13HandshakeRecordsTheServerFlight() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"),
                                        "-cert_chain", PKI.path("genuine.chain.pem"), "-alpn", "h2"])
        defer { server.stop() }
        let fetched = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, offer: mirroredOffer, timeoutMilliseconds: 5_000)
        let result = fetched.handshake
        #expect(result.chainDER == (try PKI.certificates("genuine.fullchain.pem").map(\.der)))
        #expect(result.version == .tls1_3 && result.cipher == CipherSuite(rawValue: 0x1302) && result.alpn == "h2")
        #expect(!result.helloRetryRequested)
        #expect(result.serverHello.first == 2 && result.clientHello.first == 1)
        #expect(try ParsedHello(handshakeMessage: result.clientHello).u16List(10) == [29, 23, 24])
        #expect(result.serverMessages.map(\.type) == [8, 11, 15, 20])
        #expect(result.serverMessages.allSatisfy { $0.length >= 4 })
        // Each message plus its inner content type byte and the 16-byte AEAD tag, record by record.
        #expect(!result.serverRecordLengths.isEmpty)
        #expect(result.serverRecordLengths.reduce(0, +) >= result.serverMessages.map(\.length).reduce(0, +) + 17)
    }

    @Test func tls12HandshakeGetsTheChain() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"),
                                        "-cert_chain", PKI.path("genuine.chain.pem")])
        defer { server.stop() }
        let offer = ClientOffer(serverName: "genuine.test", legacyVersion: .tls1_2, cipherSuites: [0xC02B, 0xC02F],
                                supportedGroups: [29, 23], signatureAlgorithms: [0x0403], extensionTypes: [0, 10, 11, 13, 23, 65281])
        let result = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, offer: offer, timeoutMilliseconds: 5_000).handshake
        #expect(result.version == .tls1_2 && result.cipher == CipherSuite(rawValue: 0xC02B))
        #expect(result.chainDER == (try PKI.certificates("genuine.fullchain.pem").map(\.der)))
        #expect(result.serverMessages.map(\.type).prefix(3) == [11, 12, 14])
        #expect(result.serverRecordLengths.isEmpty)
    }

    @Test func helloRetryRequestIsRecordedAndTheFinalServerHelloKept() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"), "-tls1_3", "-groups", "P-256"])
        defer { server.stop() }
        let offer = ClientOffer(serverName: "genuine.test", versions: [.tls1_3], cipherSuites: [0x1301],
                                supportedGroups: [29, 23], keyShareGroups: [29])
        let result = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, offer: offer, timeoutMilliseconds: 5_000).handshake
        #expect(result.helloRetryRequested)
        #expect(result.serverHello.count > 38 && !result.serverHello[6..<38].elementsEqual(ServerHello.helloRetryRequestRandom))
        #expect(try ParsedHello(handshakeMessage: result.clientHello).keyShareGroups == [29])
        #expect(result.serverMessages.map(\.type) == [8, 11, 15, 20])
    }

    /// Safari's signature_algorithms names rsa_pss_rsae_sha384 (0x0805) twice, as curl_cffi's safari target sends it;
    /// OpenSSL refuses such a list, and every probe for such a client failed (under block, the genuine site blocked
    /// as probe_failed on every connection). Each entry is sent once, in the client's order.
    @Test func aSafariOfferWithARepeatedSchemeIsProbed() throws {
        let server = try OpenSSLServer(["-cert", PKI.path("genuine.pem"), "-key", PKI.path("genuine.key"),
                                        "-cert_chain", PKI.path("genuine.chain.pem")])
        defer { server.stop() }
        let safari: [UInt16] = [0x0403, 0x0804, 0x0401, 0x0503, 0x0203, 0x0805, 0x0805, 0x0501, 0x0806, 0x0601, 0x0201]
        let offer = ClientOffer(serverName: "genuine.test", versions: [.tls1_3, .tls1_2], cipherSuites: [0x1301, 0x1302, 0x1303, 0xC02C],
                                supportedGroups: [29, 23, 24, 25, 23], keyShareGroups: [29], signatureAlgorithms: safari)
        let result = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, offer: offer, timeoutMilliseconds: 5_000).handshake
        #expect(result.version == .tls1_3)
        let sent = try ParsedHello(handshakeMessage: result.clientHello)
        #expect(sent.u16List(13) == [0x0403, 0x0804, 0x0401, 0x0503, 0x0203, 0x0805, 0x0501, 0x0806, 0x0601, 0x0201])
        #expect(sent.u16List(10) == [29, 23, 24, 25])
    }

    @Test func signatureAlgorithmsChooseTheCertificateOfADualCertificateServer() throws {
        let directory = NSTemporaryDirectory() + "chainwatch-tlsclient-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (name, key) in [("rsa", "rsa:2048"), ("ec", "ec")] {
            var arguments = ["req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=\(name).test",
                             "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem", "-newkey", key]
            if name == "ec" { arguments += ["-pkeyopt", "ec_paramgen_curve:P-256"] }
            let process = try Process.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments: arguments)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
        let server = try OpenSSLServer(["-cert", "\(directory)/rsa.pem", "-key", "\(directory)/rsa.key",
                                        "-dcert", "\(directory)/ec.pem", "-dkey", "\(directory)/ec.key"])
        defer { server.stop() }
        let rsa = try Certificate.parsePEM(String(contentsOfFile: "\(directory)/rsa.pem", encoding: .utf8)).first?.der
        let ec = try Certificate.parsePEM(String(contentsOfFile: "\(directory)/ec.pem", encoding: .utf8)).first?.der
        func leaf(_ schemes: [UInt16], max: TLSVersion) throws -> [UInt8]? {
            let offer = ClientOffer(serverName: "dual.test", versions: [max], signatureAlgorithms: schemes)
            return try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, offer: offer, timeoutMilliseconds: 5_000).chain.first
        }
        #expect(rsa != nil && ec != nil)
        #expect(try leaf([0x0804, 0x0401], max: .tls1_3) == rsa)
        #expect(try leaf([0x0403], max: .tls1_3) == ec)
        #expect(try leaf([0x0804, 0x0401], max: .tls1_2) == rsa)
        #expect(try leaf([0x0403], max: .tls1_2) == ec)
    }

    /// A 150 KB certificate (9 000 names) is over OpenSSL's default 100 KiB limit; a genuine server with it must not
    /// fail the probe (which under a block rule blocks).
    @Test func aLongChainOverOpenSSLsDefaultLimitIsFetched() throws {
        let directory = NSTemporaryDirectory() + "chainwatch-longchain-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let names = (0..<9000).map { "DNS:h\($0).long.test" }.joined(separator: ",")
        try "[req]\ndistinguished_name = dn\n[dn]\n[v3]\nsubjectAltName=DNS:long.test,\(names)\n".write(toFile: "\(directory)/ext.cnf", atomically: true, encoding: .utf8)
        let process = try Process.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments: [
            "req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=long.test", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-keyout", "\(directory)/long.key", "-out", "\(directory)/long.pem", "-extensions", "v3", "-config", "\(directory)/ext.cnf"])
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let server = try OpenSSLServer(["-cert", "\(directory)/long.pem", "-key", "\(directory)/long.key"])
        defer { server.stop() }
        let chain = try ChainFetcher.fetch(host: "127.0.0.1", port: server.port, serverName: "long.test", timeoutMilliseconds: 5_000).chain
        #expect(chain.first?.count ?? 0 > 120_000)
    }
}
