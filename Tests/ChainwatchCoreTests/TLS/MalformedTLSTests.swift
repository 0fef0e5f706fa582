import Testing
@testable import ChainwatchCore

/// Broken and unusual inputs, each built from a real fixture or from parts by a named construction,
/// each with its expected outcome: needs more bytes, a typed error, or the same facts as the original.
@Suite struct MalformedTLSTests {
    /// The first record of `tls12-rsa.c2s.bin`: exactly one ClientHello.
    static func realClientHello() throws -> [UInt8] {
        let stream = try TLSFixture.bytes("tls12-rsa.c2s.bin")
        return Array(stream[..<(5 + (Int(stream[3]) << 8 | Int(stream[4])))])
    }

    /// Offsets of the length fields of `realClientHello()` that the constructions below lie in.
    struct Layout {
        var extensionsLength: Int
        var firstExtensionLength: Int
        var serverNameListLength: Int
        var hostNameLength: Int
        var hostName: String

        init(_ hello: [UInt8], hostName: String) throws {
            let sessionIDLength = 5 + 4 + 2 + 32
            let suitesLength = sessionIDLength + 1 + Int(hello[sessionIDLength])
            let compressionLength = suitesLength + 2 + (Int(hello[suitesLength]) << 8 | Int(hello[suitesLength + 1]))
            extensionsLength = compressionLength + 1 + Int(hello[compressionLength])
            firstExtensionLength = extensionsLength + 4
            let name = Array(hostName.utf8)
            let nameStart = try #require((0...(hello.count - name.count)).first { hello[$0..<($0 + name.count)].elementsEqual(name) })
            hostNameLength = nameStart - 2
            serverNameListLength = nameStart - 5
            self.hostName = hostName
        }
    }

    static func readUInt16(at offset: Int, in bytes: [UInt8]) -> Int { Int(bytes[offset]) << 8 | Int(bytes[offset + 1]) }

    /// `bytes` with the 2-byte length at `offset` replaced by `value`.
    static func setting(_ bytes: [UInt8], uint16At offset: Int, to value: Int) -> [UInt8] {
        var copy = bytes
        copy[offset] = UInt8(value >> 8 & 0xFF)
        copy[offset + 1] = UInt8(value & 0xFF)
        return copy
    }

    // MARK: Truncation

    @Test func truncatedClientHelloNeedsMoreBytesAtEveryOffset() throws {
        for file in ["tls12-rsa.c2s.bin", "tls13-rsa.c2s.bin", "tls13-hrr.c2s.bin"] {
            let stream = try TLSFixture.bytes(file)
            let recordLength = 5 + (Int(stream[3]) << 8 | Int(stream[4]))
            for cut in 0..<recordLength {
                #expect(observe(stream[..<cut]) == Observation(), "\(file) cut at \(cut)")
            }
            #expect(observe(stream[..<recordLength]).facts.count == 1)
        }
    }

    @Test(arguments: TLSFixture.streams)
    func truncatedStreamNeverGivesWrongFact(_ file: String) throws {
        let stream = try TLSFixture.bytes(file)
        let full = try observedFacts(stream)
        for cut in 0..<stream.count {
            let partial = observe(stream[..<cut])
            #expect(partial.error == nil)
            #expect(full.starts(with: partial.facts), "\(file) cut at \(cut)")
        }
    }

    // MARK: Lengths that lie

    @Test func recordLengthBeyondCapFailsBeforeThePayload() throws {
        let header = Self.setting(Array(try Self.realClientHello()[..<5]), uint16At: 3, to: 0xFFFF)
        #expect(observe(header).error == .recordTooLong(length: 0xFFFF, limit: TLSObserver.maxPlaintextRecordLength))
    }

    @Test func applicationDataRecordMayExceedPlaintextCapButNotCiphertextCap() throws {
        let hello = try Self.realClientHello()
        let longest = hello + [23, 3, 3] + uint16(TLSObserver.maxCiphertextRecordLength)
        #expect(observe(longest + [UInt8](repeating: 0, count: TLSObserver.maxCiphertextRecordLength)).facts.last == .encrypted)
        let tooLong = hello + [23, 3, 3] + uint16(TLSObserver.maxCiphertextRecordLength + 1)
        #expect(observe(tooLong).error == .recordTooLong(length: TLSObserver.maxCiphertextRecordLength + 1,
                                                         limit: TLSObserver.maxCiphertextRecordLength))
    }

    @Test func handshakeLengthAboveCapFailsBeforeTheBody() {
        let tooLong = TLSObserver.maxHandshakeMessageLength + 1
        #expect(observe(record(22, [1] + uint24(tooLong))).error == .messageTooLong(type: 1, length: tooLong, limit: TLSObserver.maxHandshakeMessageLength))
        #expect(observe(record(22, [11] + uint24(0xFFFFFF))).error == .messageTooLong(type: 11, length: 0xFFFFFF, limit: TLSObserver.maxHandshakeMessageLength))
        #expect(observe(record(22, [1] + uint24(TLSObserver.maxHandshakeMessageLength))) == Observation())
    }

    @Test(arguments: [TLSObserver.maxHandshakeMessageLength, TLSObserver.maxServerHandshakeMessageLength])
    func largestCertificateMessageIsReassembledWithinTheBound(limit: Int) {
        let der = (0..<(limit - 6)).map { UInt8(truncatingIfNeeded: $0) }
        let message = handshakeMessage(11, vector(3, vector(3, der)))
        let stream = stride(from: 0, to: message.count, by: TLSObserver.maxPlaintextRecordLength).flatMap {
            record(22, Array(message[$0..<min($0 + TLSObserver.maxPlaintextRecordLength, message.count)]))
        }
        var observer = TLSObserver(messageLimit: limit)
        var facts: [HandshakeFact] = []
        for start in stride(from: 0, to: stream.count, by: 1000) {
            observer.append(stream[start..<min(start + 1000, stream.count)])
            while let fact = try? observer.next() { facts.append(fact) }
            #expect(observer.reassemblyByteCount <= observer.maxReassemblyByteCount)
        }
        #expect(facts == [.certificate([der])])
        // One byte more than the limit fails at the header, before any of the body is buffered.
        var over = TLSObserver(messageLimit: limit)
        over.append(record(22, [11] + uint24(limit + 1)))
        #expect(throws: TLSParseError.messageTooLong(type: 11, length: limit + 1, limit: limit)) { try over.next() }
    }

    @Test func extensionLengthPastTheEnd() throws {
        let hello = try Self.realClientHello()
        let layout = try Layout(hello, hostName: "rsa.chainwatch.test")
        let lying = Self.setting(hello, uint16At: layout.firstExtensionLength, to: 0xFFFF)
        let available = Self.readUInt16(at: layout.extensionsLength, in: hello) - 4
        #expect(observe(lying).error == .badLength(field: "ClientHello.extension_data", declared: 0xFFFF, available: available))
    }

    @Test func extensionsBlockLengthPastTheEnd() throws {
        let hello = try Self.realClientHello()
        let layout = try Layout(hello, hostName: "rsa.chainwatch.test")
        let real = Self.readUInt16(at: layout.extensionsLength, in: hello)
        let lying = Self.setting(hello, uint16At: layout.extensionsLength, to: real + 1)
        #expect(observe(lying).error == .badLength(field: "ClientHello.extensions", declared: real + 1, available: real))
    }

    @Test func serverNameListLongerThanItsExtension() throws {
        let hello = try Self.realClientHello()
        let layout = try Layout(hello, hostName: "rsa.chainwatch.test")
        let real = Self.readUInt16(at: layout.serverNameListLength, in: hello)
        let lying = Self.setting(hello, uint16At: layout.serverNameListLength, to: real + 1)
        #expect(observe(lying).error == .badLength(field: "ClientHello.server_name_list", declared: real + 1, available: real))
    }

    @Test func serverNameListShorterThanItsExtension() throws {
        let hello = try Self.realClientHello()
        let layout = try Layout(hello, hostName: "rsa.chainwatch.test")
        let real = Self.readUInt16(at: layout.serverNameListLength, in: hello)
        let lying = Self.setting(hello, uint16At: layout.serverNameListLength, to: real - 1)
        #expect(observe(lying).error == .trailingBytes("ClientHello.server_name"))
    }

    @Test func hostNameLongerThanItsList() throws {
        let hello = try Self.realClientHello()
        let layout = try Layout(hello, hostName: "rsa.chainwatch.test")
        let nameLength = layout.hostName.utf8.count
        let lying = Self.setting(hello, uint16At: layout.hostNameLength, to: nameLength + 1)
        #expect(observe(lying).error == .badLength(field: "ClientHello.server_name.name", declared: nameLength + 1, available: nameLength))
    }

    @Test func oddLengthListsEndInATruncatedValue() {
        let halfSuite: [UInt8] = [3, 3] + [UInt8](repeating: 1, count: 32) + [0] + vector(2, [0x13, 0x01, 0xC0]) + [1, 0]
        #expect(observe(record(22, handshakeMessage(1, halfSuite))).error == .truncatedField("ClientHello.cipher_suites"))
        #expect(observe(clientHelloRecord(extensions: [(43, vector(1, [0x03, 0x04, 0x03]))])).error
            == .truncatedField("ClientHello.supported_versions"))
    }

    @Test func handshakeLengthShorterThanTheHello() throws {
        var hello = try Self.realClientHello()
        let real = Int(hello[6]) << 16 | Int(hello[7]) << 8 | Int(hello[8])
        hello[7...8] = uint16(real - 1)[...]
        let error = try #require(observe(hello).error)
        guard case .badLength(field: "ClientHello.extensions", _, _) = error else {
            Issue.record("unexpected \(error)")
            return
        }
    }

    // MARK: Framing

    @Test(arguments: TLSFixture.streams)
    func severalMessagesInOneRecordGiveSameFacts(_ file: String) throws {
        let stream = try TLSFixture.bytes(file)
        #expect(try observedFacts(reframed(stream, recordSize: TLSObserver.maxPlaintextRecordLength)) == observedFacts(stream))
    }

    @Test func emptyHandshakeRecordsAreSkipped() throws {
        let hello = try Self.realClientHello()
        let facts = try observedFacts(record(22, []) + hello + record(22, []))
        #expect(facts == (try observedFacts(hello)))
    }

    @Test func plainHTTPIsNotTLSFromTheFirstByte() {
        #expect(observe(Array("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8)).error == .notTLS)
        #expect(observe(Array("G".utf8)).error == .notTLS)
        #expect(observe(Array("CONNECT example.com:443 HTTP/1.1\r\n".utf8)).error == .notTLS)
        #expect(observe([0x80, 0x2E, 0x01, 0x00, 0x02]).error == .notTLS, "SSLv2-framed hello")
        #expect(observe([0x16, 0x04]).error == .notTLS, "protocol major version 4")
        #expect(observe([0x17, 0x03, 0x03, 0x00, 0x01, 0x00]).error == .notTLS, "application data first")
        #expect(observe([UInt8]()) == Observation())
        #expect(observe([0x16]) == Observation())
    }

    @Test func unknownContentTypeAfterTheFirstRecord() throws {
        let hello = try Self.realClientHello()
        let observation = observe(hello + record(24, [1, 0, 0]))
        #expect(observation.facts.count == 1)
        #expect(observation.error == .unexpectedContentType(24))
        #expect(observe(hello + record(22, version: 0x0203, [])).error == .badRecordVersion(0x0203))
    }

    @Test func changeCipherSpecMustBeOneByteBetweenMessages() throws {
        let hello = try Self.realClientHello()
        #expect(observe(hello + record(20, [2])).error == .badChangeCipherSpec)
        #expect(observe(hello + record(20, [1, 1])).error == .badChangeCipherSpec)
        let split = reframed(hello, recordSize: 100)
        let firstRecord = Array(split[..<105])
        #expect(observe(firstRecord + record(20, [1])).error == .changeCipherSpecInsideMessage)
    }

    @Test func errorIsStickyAndLaterBytesAreDropped() throws {
        var observer = TLSObserver()
        observer.append(Array("GET ".utf8))
        #expect(throws: TLSParseError.notTLS) { try observer.next() }
        observer.append(try Self.realClientHello())
        #expect(throws: TLSParseError.notTLS) { try observer.next() }
        #expect(observer.reassemblyByteCount == 0)
    }

    // MARK: Content

    @Test func plaintextAlertsAreReported() {
        #expect(observe(record(21, [2, 40])).facts == [.alert(level: 2, description: 40)])
        #expect(observe(record(21, [2]) + record(21, [70])).facts == [.alert(level: 2, description: 70)])
        #expect(observe(record(21, [1, 0, 2, 40])).facts == [.alert(level: 1, description: 0), .alert(level: 2, description: 40)])
    }

    @Test func greaseValuesAreIgnored() throws {
        let hello = clientHelloRecord(
            suites: [0x0A0A, 0x1301, 0xFAFA, 0xC02F],
            extensions: [
                (0x1A1A, []),
                (0, vector(2, [0] + vector(2, Array("example.com".utf8)))),
                (43, vector(1, [0x3A, 0x3A, 0x03, 0x04, 0x03, 0x03])),
                (16, vector(2, vector(1, [0x4A, 0x4A]) + vector(1, Array("h2".utf8)))),
                (0x2A2A, [0]),
            ])
        let parsed = try clientHello(observedFacts(hello))
        #expect(parsed.cipherSuites.map(\.rawValue) == [0x1301, 0xC02F])
        #expect(parsed.supportedVersions == [.tls1_3, .tls1_2])
        #expect(parsed.alpnProtocols == ["h2"])
        #expect(parsed.serverName == "example.com")
    }

    @Test func greaseIsExactlyTheSixteenReservedValues() {
        let grease = (0...UInt16.max).filter(isGREASE)
        let reserved: [UInt16] = (0..<16).map { (nibble: UInt16) -> UInt16 in nibble << 12 | nibble << 4 | 0x0A0A }
        #expect(grease == reserved)
    }

    @Test func duplicateServerNameExtensionIsRejected() {
        let sni = vector(2, [0] + vector(2, Array("example.com".utf8)))
        let other = vector(2, [0] + vector(2, Array("evil.example".utf8)))
        #expect(observe(clientHelloRecord(extensions: [(0, sni), (0, other)])).error == .duplicateExtension(0))
    }

    /// Types below 64 and above are tracked apart (a bit each, a list): a repeat is caught on both sides of the line,
    /// and distinct types on either side are not mistaken for repeats.
    @Test(arguments: [(UInt16(63), UInt16(63), true), (0xFF01, 0xFF01, true), (0x0A0A, 0x0A0A, true),
                      (63, 0xFF01, false), (1, 65, false), (0xFF01, 0x0A0A, false)])
    func repeatedExtensionTypeIsRejected(_ first: UInt16, _ second: UInt16, _ duplicate: Bool) {
        let result = observe(clientHelloRecord(extensions: [(first, []), (second, [])]))
        if duplicate {
            #expect(result.error == .duplicateExtension(second))
        } else {
            #expect(result.error == nil)
        }
    }

    @Test(arguments: [
        [0] + vector(2, Array("a.example".utf8)) + [0] + vector(2, Array("b.example".utf8)),
        [0] + vector(2, Array("a.exa\u{0}mple".utf8)),
        [0] + vector(2, Array("a.exämple".utf8)),
        [0] + vector(2, []),
        [0] + vector(2, Array((String(repeating: "a.", count: 127) + "ab").utf8)),   // 256 octets: longer than any DNS name
    ])
    func invalidHostNameIsRejected(_ list: [UInt8]) {
        #expect(observe(clientHelloRecord(extensions: [(0, vector(2, list))])).error == .invalidServerName)
    }

    @Test func aServerNameOfTheLongestDNSLengthIsAccepted() throws {
        let name = String(repeating: "a.", count: 127) + "a"   // 255 octets
        let list = [0] + vector(2, Array(name.utf8))
        #expect(try clientHello(observedFacts(clientHelloRecord(extensions: [(0, vector(2, list))]))).serverName == name)
    }

    @Test func serverNameOfAnotherTypeIsSkipped() throws {
        let list = [7] + vector(2, [1, 2, 3]) + [0] + vector(2, Array("example.com".utf8))
        #expect(try clientHello(observedFacts(clientHelloRecord(extensions: [(0, vector(2, list))]))).serverName == "example.com")
    }

    @Test func helloWithoutExtensionsHasNoSNI() throws {
        let body: [UInt8] = [3, 1] + [UInt8](repeating: 1, count: 32) + [0] + vector(2, [0x00, 0x2F]) + [1, 0]
        let hello = try clientHello(observedFacts(record(22, version: 0x0301, handshakeMessage(1, body))))
        #expect(hello.serverName == nil)
        #expect(hello.maximumVersion == .tls1_0)
        #expect(hello.cipherSuites == [CipherSuite(rawValue: 0x002F)])
    }

    @Test func helloRetryRandomInATLS12HelloDoesNotKeepParsingAfterChangeCipherSpec() throws {
        var stream = try TLSFixture.bytes("tls12-rsa.s2c.bin")
        stream.replaceSubrange(11..<43, with: ServerHello.helloRetryRequestRandom)
        let facts = try observedFacts(stream)
        #expect(serverHellos(facts).map(\.isHelloRetryRequest) == [true])
        #expect(facts.count == 4 && facts.last == .encrypted)
    }

    @Test func tls13FormatCertificateInPlaintextFailsCleanly() {
        let entry = vector(3, [UInt8](repeating: 0x30, count: 100)) + uint16(0)
        let message = handshakeMessage(11, [0] + vector(3, entry))
        #expect(observe(record(22, message)).error == .trailingBytes("Certificate"))
    }
}
