import Testing
@testable import ChainwatchCore

/// Stream offsets (`consumedByteCount`) and the encrypted record walk (`tracksEncryptedRecords`) on the captured
/// handshakes.
@Suite struct TLSObserverRecordTests {
    /// Everything a tracking observer reported: each fact with the offset read right after it, and the walk.
    struct TrackedObservation: Equatable {
        var facts: [HandshakeFact] = []
        var offsets: [Int] = []
        var error: TLSParseError?
        var records: [EncryptedRecord] = []
        var tracking = EncryptedRecordTracking.off
        var consumed = 0
    }

    static func track(_ bytes: some Collection<UInt8>, chunkSize: Int = .max, tracks: Bool = true) -> TrackedObservation {
        var observer = TLSObserver(tracksEncryptedRecords: tracks)
        var result = TrackedObservation()
        var rest = bytes[...]
        repeat {
            let chunk = rest.prefix(chunkSize)
            rest = rest.dropFirst(chunk.count)
            observer.append(chunk)
            do {
                while let fact = try observer.next() {
                    result.facts.append(fact)
                    result.offsets.append(observer.consumedByteCount)
                }
            } catch {
                result.error = error
                break
            }
        } while !rest.isEmpty
        result.records = observer.encryptedRecords
        result.tracking = observer.encryptedRecordTracking
        result.consumed = observer.consumedByteCount
        return result
    }

    /// The (type, payload length) of every record of a stream, from its headers.
    static func recordHeaders(_ stream: [UInt8]) -> [EncryptedRecord] {
        var records: [EncryptedRecord] = []
        var index = 0
        while index + 5 <= stream.count {
            let length = Int(stream[index + 3]) << 8 | Int(stream[index + 4])
            records.append(EncryptedRecord(contentType: stream[index], length: length))
            index += 5 + length
        }
        return records
    }

    @Test(arguments: TLSFixture.streams)
    func dripFedStreamGivesSameOffsetsAndRecords(_ file: String) throws {
        let stream = try TLSFixture.bytes(file)
        let whole = Self.track(stream)
        #expect(whole.error == nil)
        #expect(whole.tracking == .tracking)
        #expect(whole.consumed == whole.offsets.last)  // the walk does not move it
        #expect(whole.records.reduce(0) { $0 + 5 + $1.length } <= stream.count - whole.consumed)
        #expect(Self.track(stream, chunkSize: 1) == whole)
        #expect(Self.track(stream, chunkSize: 5) == whole)
        #expect(Self.track(stream, chunkSize: 7) == whole)
        // Tracking changes no fact.
        #expect(whole.facts == observe(stream).facts)
    }

    @Test func tls13ServerFlightIsListedWithoutTheChangeCipherSpec() throws {
        let stream = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        let headers = Self.recordHeaders(stream)
        #expect(headers.prefix(2).map(\.contentType) == [22, 20])  // ServerHello, compatibility ChangeCipherSpec
        let tracked = Self.track(stream)
        #expect(tracked.records == Array(headers.dropFirst(2)))
        #expect(tracked.records.map(\.length) == [32, 1904, 281, 69, 250, 250, 44])
        #expect(tracked.records.allSatisfy { $0.contentType == 23 })
        var observer = TLSObserver(tracksEncryptedRecords: true)
        observer.append(stream)
        while try observer.next() != nil {}
        #expect(observer.encryptedRecordBytes == 32 + 1904 + 281 + 69 + 250 + 250 + 44)
    }

    @Test func offsetAfterEachFactIsTheEndOfItsRecord() throws {
        let stream = try TLSFixture.bytes("tls13-hrr.s2c.bin")
        let headers = Self.recordHeaders(stream)
        let ends = headers.reduce(into: [Int]()) { $0.append(($0.last ?? 0) + 5 + $1.length) }
        let tracked = Self.track(stream, tracks: false)
        let hellos = serverHellos(tracked.facts)
        #expect(hellos.map(\.isHelloRetryRequest) == [true, false])
        // HelloRetryRequest, then (after the compatibility ChangeCipherSpec) the ServerHello, then .encrypted.
        #expect(tracked.offsets == [ends[0], ends[2], ends[2]])
        #expect(ends[0] == 93 && stream[93] == 20)
        #expect(tracked.consumed == ends[2])
        #expect(tracked.records.isEmpty && tracked.tracking == .off)
    }

    @Test func tls12RecordsAfterTheChangeCipherSpecAreListed() throws {
        let tracked = Self.track(try TLSFixture.bytes("tls12-rsa.s2c.bin"))
        // The encrypted Finished (a handshake record) and the response.
        #expect(tracked.records == [EncryptedRecord(contentType: 22, length: 40), EncryptedRecord(contentType: 23, length: 51)])
    }

    /// The TLS 1.3 ServerHello and ChangeCipherSpec of `tls13-rsa.s2c.bin`.
    static func tls13Prefix() throws -> [UInt8] {
        let stream = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        return Array(stream[..<(127 + 6)])
    }

    @Test func walkHoldsNoBytesAndStopsAtTheCap() throws {
        var observer = TLSObserver(tracksEncryptedRecords: true)
        observer.append(try Self.tls13Prefix())
        while try observer.next() != nil {}
        let flood = (0..<(TLSObserver.maxTrackedEncryptedRecords + 50)).flatMap { _ in record(23, [UInt8](repeating: 0xEE, count: 16_401)) }
        var index = 0
        var chunk = 1
        while index < flood.count {
            let end = min(index + chunk, flood.count)
            observer.append(flood[index..<end])
            #expect(observer.bufferedByteCount == 0)
            index = end
            chunk = chunk * 3 % 40_000 + 1
        }
        #expect(observer.encryptedRecords.count == TLSObserver.maxTrackedEncryptedRecords)
        #expect(observer.encryptedRecordTracking == .full)
        #expect(observer.encryptedRecordBytes == TLSObserver.maxTrackedEncryptedRecords * 16_401)
        #expect(observer.consumedByteCount == 127)  // the ServerHello record
        #expect(try observer.next() == nil)
    }

    @Test func invalidHeaderStopsTheWalk() throws {
        let cases: [(String, [UInt8])] = [
            ("content type 24", [24, 3, 3, 0, 1]),
            ("version 2.0", [23, 2, 0, 0, 1]),
            ("longer than ciphertext allows", [23, 3, 3] + uint16(TLSObserver.maxCiphertextRecordLength + 1)),
            ("ChangeCipherSpec of two bytes", [20, 3, 3, 0, 2]),
        ]
        for (name, header) in cases {
            let stream = try Self.tls13Prefix() + record(23, [1, 2, 3]) + header + [UInt8](repeating: 0, count: 40)
                + record(23, [4])
            let tracked = Self.track(stream)
            #expect(tracked.tracking == .invalidHeader, "\(name)")
            #expect(tracked.records == [EncryptedRecord(contentType: 23, length: 3)], "\(name)")
            #expect(Self.track(stream, chunkSize: 1) == tracked, "\(name)")
        }
    }

    @Test func emptyRecordIsListed() throws {
        let stream = try Self.tls13Prefix() + record(23, []) + record(23, [9])
        let tracked = Self.track(stream)
        #expect(tracked.records.map(\.length) == [0, 1])
        #expect(Self.track(stream, chunkSize: 1) == tracked)
    }

    @Test func applicationDataThatEndsPlaintextIsTheFirstListedRecord() throws {
        // A TLS 1.2 client direction: its Finished is encrypted, so the observer sees application data first here.
        let hello = try MalformedTLSTests.realClientHello()
        let stream = hello + record(23, [1, 2, 3, 4]) + record(23, [5])
        let tracked = Self.track(stream)
        #expect(tracked.facts.last == .encrypted)
        #expect(tracked.offsets.last == hello.count + 9 && tracked.consumed == hello.count + 9)
        #expect(tracked.records.map(\.length) == [4, 1])
        #expect(Self.track(stream, chunkSize: 1) == tracked)
    }

    @Test func notTrackingKeepsTheFinishedObserverFree() throws {
        let stream = try TLSFixture.bytes("tls13-rsa.s2c.bin")
        let tracked = Self.track(stream, tracks: false)
        #expect(tracked.records.isEmpty && tracked.tracking == .off)
        #expect(tracked.consumed == 127)  // the ServerHello record
    }
}
