import ChainwatchCore

/// Body framing read from the header bytes as a server on the wire reads them (RFC 9112 §6), written apart from
/// `BodyFraming`: values split on the byte `,`, trimmed of SP and HTAB, compared after ASCII lowercasing only.
/// Where chainwatch and the peer behind it frame a body differently, one message can hide another (request smuggling,
/// response splitting), so the fuzzers require the same answer from both.
public enum ReferenceFraming {
    public static func request(_ head: RequestHead) -> BodyFraming? {
        let te = tokens(head.headers, "transfer-encoding")
        let lengths = values(head.headers, "content-length")
        if !te.isEmpty {
            guard lengths.isEmpty, te.last == Array("chunked".utf8) else { return nil }
            return .chunked
        }
        return contentLength(lengths).map { .length($0 ?? 0) }
    }

    public static func response(_ head: ResponseHead, requestMethod method: String) -> BodyFraming? {
        if method == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
            return .length(0)
        }
        let te = tokens(head.headers, "transfer-encoding")
        if !te.isEmpty { return te.last == Array("chunked".utf8) ? .chunked : .untilClose }
        guard let length = contentLength(values(head.headers, "content-length")) else { return nil }
        return length.map { .length($0) } ?? .untilClose
    }

    /// The values of every field named `name` (ASCII case-insensitive), as bytes.
    static func values(_ headers: [(name: String, value: String)], _ name: String) -> [ArraySlice<UInt8>] {
        headers.filter { $0.name.utf8.map(lowercased).elementsEqual(name.utf8) }.map { Array($0.value.utf8)[...] }
    }

    /// The list elements of every field named `name`: split on `,`, trimmed, lowercased, empty ones dropped.
    static func tokens(_ headers: [(name: String, value: String)], _ name: String) -> [[UInt8]] {
        values(headers, name).flatMap { $0.split(separator: UInt8(ascii: ",")) }.map { trimmed($0).map(lowercased) }
            .filter { !$0.isEmpty }
    }

    /// nil: invalid; .some(nil): absent; .some(n): every element of every copy is the same n.
    static func contentLength(_ values: [ArraySlice<UInt8>]) -> UInt64?? {
        let all = values.flatMap { $0.split(separator: UInt8(ascii: ",")) }.map(trimmed)
        guard let first = all.first else { return .some(nil) }
        guard !first.isEmpty, first.count <= 18, first.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              all.allSatisfy({ $0.elementsEqual(first) }) else { return nil }
        return .some(first.reduce(0) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) })
    }

    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}

/// `bytes` without leading and trailing SP and HTAB.
public func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var s = bytes
    while let f = s.first, f == 0x20 || f == 0x09 { s = s.dropFirst() }
    while let l = s.last, l == 0x20 || l == 0x09 { s = s.dropLast() }
    return s
}

/// Whether two header lists carry the same fields: names equal, values equal up to SP and HTAB at their ends.
public func sameFields(_ a: [(name: String, value: String)], _ b: [(name: String, value: String)]) -> Bool {
    a.elementsEqual(b) { x, y in
        x.name == y.name && trimmed(Array(x.value.utf8)[...]).elementsEqual(trimmed(Array(y.value.utf8)[...]))
    }
}

/// What scanning a body gave.
public struct BodyScan: Equatable {
    /// Body bytes found (0 after an error: a consume that throws reports none, so the count depends on the chunks).
    public var used = 0
    public var complete = false
    public var error: BodyScanner.ScanError?
}

/// Scans `bytes` for the body `framing` frames, one chunk at a time, checking what `consume` returns: never more
/// than it was given, less only once the body is complete, nothing after that.
public func scanBody(_ framing: BodyFraming, _ chunks: [ArraySlice<UInt8>]) -> BodyScan {
    var scanner = BodyScanner(framing)
    var scan = BodyScan()
    scan.complete = scanner.isComplete
    check(scanner.endsAtClose == (framing == .untilClose), "endsAtClose for \(framing)")
    for chunk in chunks {
        let wasComplete = scanner.isComplete
        do {
            let used = try scanner.consume(chunk)
            check(used >= 0 && used <= chunk.count, "consumed \(used) of \(chunk.count)")
            check(!wasComplete || used == 0, "consumed \(used) after the end of the body")
            check(used == chunk.count || scanner.isComplete, "stopped at \(used) of \(chunk.count) before the end")
            scan.used += used
        } catch {
            scan.error = error
            scan.used = 0
            break
        }
        scan.complete = scanner.isComplete
    }
    if case .length(let n) = framing, scan.error == nil {
        let total = chunks.reduce(0) { $0 + $1.count }
        check(UInt64(scan.used) == min(n, UInt64(total)), "length(\(n)) body of \(total) bytes took \(scan.used)")
        check(scan.complete == (n <= UInt64(total)), "length(\(n)) body of \(total) bytes: complete \(scan.complete)")
    }
    return scan
}
