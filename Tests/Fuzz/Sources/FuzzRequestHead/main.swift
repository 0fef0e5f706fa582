// Fuzzes the request side of the proxy: RequestHeadParser.parse, ProxyRequest.classify, BodyFraming.request and
// the BodyScanner over the body, message after message as a client connection pipelines them.
//
// Input: [options] [max chunk] [seed: 2 bytes] then the client's bytes. options bits 0-1: the head limit
// (16 KiB default, 64, 512, 4096).
// Invariants: a parsed head took at most its limit and the bytes there were, ends at a line feed, parses the same
// alone, is incomplete one byte shorter, and survives being written (HTTPWriter) and parsed again; its body framing
// is the one a byte-reading server sees (ReferenceFraming); a request the proxy forwards is written as a head that
// parses back with the same framing and one Host, the URL's.
import ChainwatchCore
import FuzzSupport

let limits = [RequestHeadParser.defaultLimit, 64, 512, 4096]
/// No head needs more to be written back and parsed again (a byte not UTF-8 is written as three).
let roomy = 1 << 24

func checkHead(_ head: RequestHead, length: Int, in stream: ArraySlice<UInt8>, limit: Int) {
    check(length > 0 && length <= stream.count && length <= limit, "head length \(length) of \(stream.count), limit \(limit)")
    check(stream[stream.startIndex + length - 1] == 0x0A, "head does not end at a line feed")
    check(head.headers.count <= RequestHeadParser.maxHeaderCount, "\(head.headers.count) header fields")
    check(head.version == "HTTP/1.1" || head.version == "HTTP/1.0", "version \(head.version)")
    let alone = try? RequestHeadParser.parse(stream.prefix(length), limit: limit)
    check(alone.map { $0.head == head && $0.length == length } == true, "the head alone parses otherwise: \(String(describing: alone))")
    let shorter = Result { () throws(RequestHeadError) in try RequestHeadParser.parse(stream.prefix(length - 1), limit: limit) }
    check(shorter.map { $0 == nil } == .success(true), "the head less its last byte: \(shorter)")

    let written = HTTPWriter.bytes(of: head)
    let again = Result { () throws(RequestHeadError) in try RequestHeadParser.parse(written, limit: roomy) }
    guard case .success(let reparsed?) = again else { return check(false, "written head does not parse: \(again)") }
    check(reparsed.length == written.count, "written head parsed as \(reparsed.length) of \(written.count) bytes")
    check(reparsed.head.method == head.method && reparsed.head.target == head.target && reparsed.head.version == head.version
          && sameFields(reparsed.head.headers, head.headers), "written head parses as \(reparsed.head), not \(head)")
}

func checkForwarded(_ original: RequestHead, _ authority: Authority, _ head: RequestHead) {
    let written = HTTPWriter.bytes(of: head)
    let again = Result { () throws(RequestHeadError) in try RequestHeadParser.parse(written, limit: roomy) }
    guard case .success(let reparsed?) = again else { return check(false, "forwarded head does not parse: \(again)") }
    check(BodyFraming.request(reparsed.head) == BodyFraming.request(original),
          "forwarded framing \(String(describing: BodyFraming.request(reparsed.head))), client's \(String(describing: BodyFraming.request(original)))")
    check(reparsed.head.headers.filter { $0.name.lowercased() == "host" }.count == 1, "forwarded head has not one Host")
    check(head.target.hasPrefix("/"), "forwarded target \(head.target)")
    check(!authority.host.isEmpty, "empty host")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestHead(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let limit = limits[Int(input.byte() & 3)]
    var sizes = ChunkSizes(header: input.byte(), seed: input.uint16())
    var stream = input.rest
    for _ in 0..<16 {
        let parsed: (head: RequestHead, length: Int)?
        do {
            parsed = try RequestHeadParser.parse(stream, limit: limit)
        } catch {
            if case .tooLarge(let l) = error { check(l == limit, "tooLarge(\(l)) under limit \(limit)") }
            check(error.status == 400 || error.status == 431, "status \(error.status)")
            return 0
        }
        guard let (head, length) = parsed else {
            check(stream.count <= limit, "\(stream.count) bytes without a head end and no tooLarge")
            return 0
        }
        checkHead(head, length: length, in: stream, limit: limit)
        let framing = BodyFraming.request(head)
        check(framing == ReferenceFraming.request(head),
              "framing \(String(describing: framing)), a byte-reading server's \(String(describing: ReferenceFraming.request(head))) for \(head.headers)")
        _ = ProxyRequest.clientKeepsAlive(head)
        if case .forward(let authority, let rewritten)? = try? ProxyRequest.classify(head) {
            checkForwarded(head, authority, rewritten)
        }
        stream = stream.dropFirst(length)
        guard let framing else { return 0 }
        let scan = scanBody(framing, sizes.split(stream))
        guard scan.complete else { return 0 }
        stream = stream.dropFirst(scan.used)
    }
    return 0
}
