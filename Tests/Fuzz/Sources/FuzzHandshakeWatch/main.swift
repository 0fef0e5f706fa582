// Fuzzes HandshakeWatch: both directions of one tunnel, interleaved as the input says.
//
// Input: [max chunk] [seed: 2 bytes] then frames: [direction and length: 2 bytes] [bytes].
//   The length's top bit is the direction (set: server → client), the other 15 bits the length (cut at the end).
//   The seed's low bit picks the server message limit: the default (224 KiB) or the protocol's (16 MiB), as the proxy
//   runs it (it takes room for what `announcedServerMessageLength` announces).
// Run twice: each frame whole, and each frame cut into chunks. Invariants: the need after each frame, and all the
// watch's public state at the end, do not depend on that cutting; a decided need never changes (but for a probe
// decided before the client's hello, which takes that hello's offer once it is whole) and is `decided`; a probe
// mirrors the client's hello; what may pass before the verdict was fed by the server.
import ChainwatchCore
import FuzzSupport

struct Frame {
    var fromServer: Bool
    var bytes: ArraySlice<UInt8>
}

/// What one run ended with.
struct Outcome: Equatable {
    var needs: [HandshakeWatch.Need] = []
    var decided: HandshakeWatch.Need?
    var clientHello: ClientHello?
    var serverHello: ServerHello?
    var passable = 0
    var staple: [UInt8]?
    var flight: [EncryptedRecord] = []
    var flightTracking = EncryptedRecordTracking.off
}

func watch(_ frames: [Frame], sizes: inout ChunkSizes?, limit: Int) -> Outcome {
    var watch = HandshakeWatch(serverMessageLimit: limit)
    var outcome = Outcome()
    var serverBytes = 0
    for frame in frames {
        let pieces = sizes?.split(frame.bytes) ?? [frame.bytes]
        var need = HandshakeWatch.Need.moreBytes
        for piece in pieces.isEmpty ? [frame.bytes] : pieces {
            let before = watch.decided, hadHello = watch.sawClientHello
            need = frame.fromServer ? watch.server(piece) : watch.client(piece)
            if frame.fromServer { serverBytes += piece.count }
            if let before {
                // A probe decided before the client's hello (a server that spoke first) takes that hello's offer.
                if case .probe = before, !hadHello, watch.sawClientHello {
                    check(need == watch.decided, "a probe decided before the hello returned \(need)")
                } else {
                    check(need == before, "decided \(before), then returned \(need)")
                }
            }
            check(need == .moreBytes ? watch.decided == nil : watch.decided == need, "returned \(need), decided \(String(describing: watch.decided))")
            check(watch.sawClientHello == (watch.clientHello != nil), "sawClientHello disagrees with clientHello")
            check(watch.passableServerBytes <= serverBytes, "\(watch.passableServerBytes) passable of \(serverBytes) server bytes")
            check(watch.serverFlight.count <= TLSObserver.maxTrackedEncryptedRecords, "flight of \(watch.serverFlight.count) records")
            if let announced = watch.announcedServerMessageLength {
                check(watch.decided == nil && announced <= limit, "announced \(announced) (limit \(limit)), decided \(String(describing: watch.decided))")
            }
        }
        outcome.needs.append(need)
    }
    if case .probe(let offer)? = watch.decided {
        check(watch.serverHello != nil, "probe without a ServerHello")
        let expected = watch.clientHello.map(ClientOffer.init(mirroring:)) ?? ClientOffer(serverName: nil)
        check(offer == expected, "probe offer \(offer) is not the client's \(expected)")
    }
    outcome.decided = watch.decided
    outcome.clientHello = watch.clientHello
    outcome.serverHello = watch.serverHello
    outcome.passable = watch.passableServerBytes
    outcome.staple = watch.stapledOCSP
    outcome.flight = watch.serverFlight
    outcome.flightTracking = watch.serverFlightTracking
    // Letting go of the buffers keeps what was read.
    var released = watch
    released.release()
    check(released.decided == watch.decided && released.clientHello == watch.clientHello
          && released.serverHello == watch.serverHello && released.stapledOCSP == watch.stapledOCSP
          && released.announcedServerMessageLength == nil, "release() changed what was read")
    return outcome
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHandshakeWatch(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let header = input.byte(), seed = input.uint16()
    var sizes: ChunkSizes? = ChunkSizes(header: header, seed: seed)
    let limit = seed & 1 == 0 ? TLSObserver.maxServerHandshakeMessageLength : TLSObserver.maxProtocolMessageLength
    var frames: [Frame] = []
    while !input.rest.isEmpty {
        let header = input.uint16()
        frames.append(Frame(fromServer: header & 0x8000 != 0, bytes: input.take(Int(header & 0x7FFF))))
    }
    var whole: ChunkSizes? = nil
    let a = watch(frames, sizes: &whole, limit: limit)
    let b = watch(frames, sizes: &sizes, limit: limit)
    check(a == b, "frames whole: \(a)\nframes cut: \(b)")
    return 0
}
