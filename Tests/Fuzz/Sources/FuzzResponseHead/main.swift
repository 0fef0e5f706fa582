// Fuzzes the response side of the proxy: ResponseHead.parse, BodyFraming.response and the BodyScanner over the
// body, response after response as an upstream connection sends them.
//
// Input: [options] [max chunk] [seed: 2 bytes] then the server's bytes. options bits 0-1: the head limit
// (64 KiB as the proxy reads, 64, 512, 4096); bits 2-3: the request method (GET, HEAD, POST, CONNECT).
// Invariants: a parsed head took no more than there was (and at most its limit plus the 4 bytes of a head end
// read past it), ends at a line feed, parses the same alone, is incomplete one byte shorter, and survives being
// written (HTTPWriter) and parsed again; its body framing is the one a byte-reading client sees (ReferenceFraming).
import ChainwatchCore
import FuzzSupport

let limits = [ExchangeMachine.maxResponseHead, 64, 512, 4096]
let methods = ["GET", "HEAD", "POST", "CONNECT"]
let roomy = 1 << 24

func same(_ a: ResponseHead, _ b: ResponseHead) -> Bool {
    a.version == b.version && a.status == b.status && a.reasonPhrase == b.reasonPhrase && sameFields(a.headers, b.headers)
}

func checkHead(_ head: ResponseHead, length: Int, in stream: ArraySlice<UInt8>, limit: Int) {
    check(length > 0 && length <= stream.count && length <= limit + 4, "head length \(length) of \(stream.count), limit \(limit)")
    check(stream[stream.startIndex + length - 1] == 0x0A, "head does not end at a line feed")
    check((100...999).contains(head.status), "status \(head.status)")
    check(head.version.utf8.starts(with: "HTTP/1.".utf8), "version \(head.version)")
    check(head.headers.count <= RequestHeadParser.maxHeaderCount, "\(head.headers.count) header fields")
    let alone = try? ResponseHead.parse(stream.prefix(length), limit: limit)
    check(alone.map { same($0.head, head) && $0.length == length } == true, "the head alone parses otherwise")
    let shorter = Result { () throws(RequestHeadError) in try ResponseHead.parse(stream.prefix(length - 1), limit: limit) }
    if case .success(let parsed?) = shorter { check(false, "the head less its last byte parses, \(parsed.length) bytes") }

    let written = HTTPWriter.bytes(of: head)
    let again = Result { () throws(RequestHeadError) in try ResponseHead.parse(written, limit: roomy) }
    guard case .success(let reparsed?) = again else { return check(false, "written head does not parse: \(again)") }
    check(reparsed.length == written.count, "written head parsed as \(reparsed.length) of \(written.count) bytes")
    check(same(reparsed.head, head), "written head parses as \(reparsed.head), not \(head)")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHead(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let options = input.byte()
    let limit = limits[Int(options & 3)]
    let method = methods[Int(options >> 2 & 3)]
    var sizes = ChunkSizes(header: input.byte(), seed: input.uint16())
    var stream = input.rest
    for _ in 0..<16 {
        let parsed: (head: ResponseHead, length: Int)?
        do {
            parsed = try ResponseHead.parse(stream, limit: limit)
        } catch {
            if case .tooLarge(let l) = error { check(l == limit, "tooLarge(\(l)) under limit \(limit)") }
            return 0
        }
        guard let (head, length) = parsed else {
            check(stream.count <= limit, "\(stream.count) bytes without a head end and no tooLarge")
            return 0
        }
        checkHead(head, length: length, in: stream, limit: limit)
        let framing = BodyFraming.response(head, requestMethod: method)
        check(framing == ReferenceFraming.response(head, requestMethod: method),
              "framing \(String(describing: framing)), a byte-reading client's \(String(describing: ReferenceFraming.response(head, requestMethod: method))) for \(head.headers)")
        stream = stream.dropFirst(length)
        guard let framing else { return 0 }
        let scan = scanBody(framing, sizes.split(stream))
        guard scan.complete else { return 0 }
        stream = stream.dropFirst(scan.used)
    }
    return 0
}
