internal import CLibevent

/// Borrows one `evbuffer` of a connection. Moving bytes between buffers moves libevent's chains: no copies.
public struct Buffer {
    package let raw: OpaquePointer  // evbuffer *, owned by its connection

    public var count: Int { evbuffer_get_length(raw) }

    /// Moves every byte of `source` to the end of this buffer (zero-copy).
    public func moveAll(from source: Buffer) {
        evbuffer_add_buffer(raw, source.raw)
    }

    /// Copies up to `max` bytes from the front without removing them.
    public func peek(max: Int) -> [UInt8] {
        let n = min(max, count)
        guard n > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: n) { buf, initialized in
            let copied = evbuffer_copyout(raw, buf.baseAddress, n)
            initialized = Swift.max(0, copied)
        }
    }

    /// A copy of at most `max` bytes from `offset` on (fewer when the buffer holds fewer).
    public func peek(from offset: Int, max: Int) -> [UInt8] {
        guard offset > 0 else { return peek(max: max) }
        let n = min(max, count - offset)
        guard n > 0 else { return [] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(n)
        forEachChunk(from: offset) { chunk in
            if bytes.count < n { bytes.append(contentsOf: chunk.prefix(n - bytes.count)) }
        }
        return bytes
    }

    /// Calls `body` with the bytes from `offset` to the end, chain by chain, without copying.
    public func forEachChunk(from offset: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        var skip = offset
        let total = count
        guard offset < total else { return }
        let n = Int(evbuffer_peek(raw, -1, nil, nil, 0))
        guard n > 0 else { return }
        // On the stack for the usual few chains: this runs for every read an inspection sees.
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: n) { vectors in
            let got = Int(evbuffer_peek(raw, -1, nil, vectors.baseAddress, Int32(n)))
            for v in vectors.prefix(min(got, n)) where v.iov_base != nil {
                if skip >= v.iov_len { skip -= v.iov_len; continue }
                body(UnsafeRawBufferPointer(start: v.iov_base!.advanced(by: skip), count: v.iov_len - skip))
                skip = 0
            }
        }
    }

    public func drain(_ n: Int) { evbuffer_drain(raw, n) }

    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = evbuffer_add(raw, $0.baseAddress, $0.count) }
    }
}

extension Buffer {
    /// Moves the first `n` bytes of `source` to the end of this buffer (whole chains move without copying).
    public func move(_ n: Int, from source: Buffer) {
        guard n > 0 else { return }
        evbuffer_remove_buffer(source.raw, raw, n)
    }
}
