import Foundation
import Testing
@testable import ChainwatchCore

/// The captured streams and certificates of `Fixtures/tls` (see its PROVENANCE.md).
enum TLSFixture {
    /// Every captured handshake; each has a `.c2s.bin` and a `.s2c.bin`.
    static let handshakes = ["tls12-rsa", "tls12-rsa-resumed", "tls12-ecdsa", "tls13-rsa", "tls13-hrr"]
    /// Every captured stream file name.
    static let streams = handshakes.flatMap { ["\($0).c2s.bin", "\($0).s2c.bin"] }

    static func bytes(_ file: String) throws -> [UInt8] {
        Array(try Data(contentsOf: url(file)))
    }

    /// The DER of the single certificate in a PEM file.
    static func der(pem file: String) throws -> [UInt8] {
        let base64 = try String(contentsOf: url(file), encoding: .ascii)
            .split(separator: "\n")
            .filter { !$0.hasPrefix("-----") }
            .joined()
        return Array(try #require(Data(base64Encoded: base64)))
    }

    private static func url(_ file: String) throws -> URL {
        try #require(Bundle.module.resourceURL).appendingPathComponent("Fixtures/tls/\(file)")
    }
}

/// Everything an observer reported for one stream: the facts in order, then the error that stopped it, if any.
struct Observation: Equatable {
    var facts: [HandshakeFact] = []
    var error: TLSParseError?
}

/// Feeds `bytes` to a fresh observer in chunks of `chunkSize`, draining `next()` after every append.
func observe(_ bytes: some Collection<UInt8>, chunkSize: Int = .max) -> Observation {
    var observer = TLSObserver()
    var result = Observation()
    var rest = bytes[...]
    repeat {
        let chunk = rest.prefix(chunkSize)
        rest = rest.dropFirst(chunk.count)
        observer.append(chunk)
        do {
            while let fact = try observer.next() { result.facts.append(fact) }
        } catch {
            result.error = error
            return result
        }
    } while !rest.isEmpty
    return result
}

/// The facts of a stream that must parse without error.
func observedFacts(_ bytes: [UInt8], chunkSize: Int = .max) throws -> [HandshakeFact] {
    let observation = observe(bytes, chunkSize: chunkSize)
    if let error = observation.error { throw error }
    return observation.facts
}

/// One TLS record.
func record(_ type: UInt8, version: UInt16 = 0x0303, _ payload: [UInt8]) -> [UInt8] {
    [type, UInt8(version >> 8), UInt8(version & 0xFF), UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
}

/// One handshake message: type, 3-byte length, body.
func handshakeMessage(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
    [type] + uint24(body.count) + body
}

func uint16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
func uint24(_ value: Int) -> [UInt8] { [UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }

/// A vector with a `lengthBytes`-byte length prefix.
func vector(_ lengthBytes: Int, _ body: [UInt8]) -> [UInt8] {
    (lengthBytes == 1 ? [UInt8(body.count)] : lengthBytes == 2 ? uint16(body.count) : uint24(body.count)) + body
}

/// A ClientHello record built from parts, for the cases no real client sends.
func clientHelloRecord(suites: [UInt16] = [0x1301, 0xC02F], extensions: [(type: UInt16, data: [UInt8])]) -> [UInt8] {
    var body: [UInt8] = [0x03, 0x03] + [UInt8](repeating: 0xAB, count: 32) + [0]
    body += vector(2, suites.flatMap { uint16(Int($0)) })
    body += [1, 0]
    body += vector(2, extensions.flatMap { uint16(Int($0.type)) + vector(2, $0.data) })
    return record(22, version: 0x0301, handshakeMessage(1, body))
}

/// Re-frames a stream: each run of consecutive handshake records is joined and cut again into records of
/// `size` payload bytes (1 gives one byte per record; 16384 packs several messages into one record).
/// Other records stay as they are. The result is valid TLS carrying the same handshake messages.
func reframed(_ stream: [UInt8], recordSize size: Int) -> [UInt8] {
    var out: [UInt8] = []
    var pending: [UInt8] = []
    var pendingVersion: UInt16 = 0x0303
    func flush() {
        for start in stride(from: 0, to: pending.count, by: size) {
            out += record(22, version: pendingVersion, Array(pending[start..<min(start + size, pending.count)]))
        }
        pending = []
    }
    var index = 0
    while index + 5 <= stream.count {
        let length = Int(stream[index + 3]) << 8 | Int(stream[index + 4])
        let end = min(index + 5 + length, stream.count)
        if stream[index] == 22 {
            if pending.isEmpty { pendingVersion = UInt16(stream[index + 1]) << 8 | UInt16(stream[index + 2]) }
            pending += stream[(index + 5)..<end]
        } else {
            flush()
            out += stream[index..<end]
        }
        index = end
    }
    flush()
    return out
}

/// The ClientHello of a fact list.
func clientHello(_ facts: [HandshakeFact]) throws -> ClientHello {
    guard case .clientHello(let hello) = facts.first else { throw FixtureError("first fact is not a ClientHello: \(facts)") }
    return hello
}

/// The ServerHellos of a fact list, in order.
func serverHellos(_ facts: [HandshakeFact]) -> [ServerHello] {
    facts.compactMap { if case .serverHello(let hello) = $0 { hello } else { nil } }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
