// Fuzzes BodyScanner: chunked, fixed-length and until-close bodies, fed whole and in chunks the input chooses.
//
// Input: [framing] [max chunk] [seed: 2 bytes] then the bytes after the head.
//   framing: 0-63 chunked, 64-127 until close, 128-255 a length: the low 6 bits pick how many of the next bytes
//   (0-7, big-endian) make it.
// Invariants (`scanBody`): a consume never takes more than it was given, stops short only at the body's end and
// takes nothing after it; a fixed length takes exactly min(length, bytes); whole and chunked feeding agree on
// how much is body, whether it ended, and the error.
import ChainwatchCore
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBodyScanner(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let kind = input.byte()
    var sizes = ChunkSizes(header: input.byte(), seed: input.uint16())
    let framing: BodyFraming
    switch kind {
    case 0..<64: framing = .chunked
    case 64..<128: framing = .untilClose
    default: framing = .length(input.take(Int(kind & 7)).reduce(0) { $0 << 8 | UInt64($1) })
    }
    let body = input.rest
    let whole = scanBody(framing, body.isEmpty ? [] : [body])
    let chunked = scanBody(framing, sizes.split(body))
    check(whole == chunked, "\(framing): whole \(whole), chunked \(chunked)")
    return 0
}
