// Fuzzes TLSObserver: one direction of a tunnel, fed whole and in chunks the input chooses.
//
// Input: [options] [max chunk] [seed: 2 bytes] then the stream.
//   options bit 0: track encrypted records; bits 1-2: message limit (client default, server, 64, 300).
// Invariants: the facts, the error, the consumed count and the encrypted record walk do not depend on chunking;
// nothing follows `.encrypted`; a failed observer keeps throwing the same error; the consumed count never passes
// the bytes appended; a TLS 1.3 ServerHello is followed by `.encrypted`.
import ChainwatchCore
import FuzzSupport

/// Everything one run reported.
struct Observation: Equatable {
    var facts: [HandshakeFact] = []
    var error: TLSParseError?
    var consumed = 0
    var records: [EncryptedRecord] = []
    var tracking = EncryptedRecordTracking.off
    var pending = false
}

let limits = [TLSObserver.maxHandshakeMessageLength, TLSObserver.maxServerHandshakeMessageLength, 64, 300]

func observe(_ chunks: [ArraySlice<UInt8>], tracks: Bool, limit: Int) -> Observation {
    var observer = TLSObserver(tracksEncryptedRecords: tracks, messageLimit: limit)
    var result = Observation()
    var appended = 0
    feeding: for chunk in chunks {
        observer.append(chunk)
        appended += chunk.count
        while true {
            let fact: HandshakeFact?
            do {
                fact = try observer.next()
            } catch {
                result.error = error
                do {
                    _ = try observer.next()
                    check(false, "next() after \(error) did not throw")
                } catch let again {
                    check(again == error, "next() after \(error) threw \(again)")
                }
                break feeding
            }
            check(observer.consumedByteCount <= appended, "consumed \(observer.consumedByteCount) of \(appended) bytes")
            guard let fact else { break }
            check(result.facts.last != .encrypted, "\(fact) after .encrypted")
            if case .serverHello(let hello)? = result.facts.last, hello.version > .tls1_2, !hello.isHelloRetryRequest {
                check(fact == .encrypted, "\(fact) after a TLS 1.3 ServerHello")
            }
            if case .clientHello(let hello) = fact {
                // What a tunnel derives from a hello: the probe's offer and the JA4 fingerprint.
                let offer = ClientOffer(mirroring: hello)
                check(offer.serverName == hello.serverName, "offer lost the server name")
                check(hello.ja4.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "JA4 \(hello.ja4) is not printable ASCII")
            }
            result.facts.append(fact)
        }
    }
    result.consumed = observer.consumedByteCount
    result.records = observer.encryptedRecords
    result.tracking = observer.encryptedRecordTracking
    result.pending = observer.hasPendingHandshakeBytes
    check(result.records.count <= TLSObserver.maxTrackedEncryptedRecords, "\(result.records.count) encrypted records listed")
    check(tracks || (result.records.isEmpty && result.tracking == .off), "records listed without tracking")
    return result
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTLSObserver(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let options = input.byte()
    var sizes = ChunkSizes(header: input.byte(), seed: input.uint16())
    let stream = input.rest
    let tracks = options & 1 == 1
    let limit = limits[Int(options >> 1 & 3)]

    let whole = observe(stream.isEmpty ? [] : [stream], tracks: tracks, limit: limit)
    let chunked = observe(sizes.split(stream), tracks: tracks, limit: limit)
    check(whole == chunked, "whole \(whole) != chunked \(chunked)")
    return 0
}
