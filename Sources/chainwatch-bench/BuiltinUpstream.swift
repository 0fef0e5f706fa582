import CLibevent
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import Foundation
import Synchronization

/// Faults the builtin upstream can inject so tests can prove the bench notices them.
enum Fault: String, Sendable, Codable {
    /// Flip one byte in the middle of every response body and every download (and of every upload
    /// as received), so the receiver's verification must fail.
    case corrupt
}

/// The bench's own upstream: an HTTPS server answering every request with a known body, and a raw
/// TCP server speaking a line protocol (`DOWN n`, `UP n`, `PING`) for tunnel throughput and idle
/// tests. Runs on its own thread and event_base, bound to 127.0.0.1 only. Owns both listeners.
final class BuiltinUpstream: @unchecked Sendable {
    /// Where the HTTPS server and the raw server listen.
    private(set) var tlsAddress = Endpoint(host: "127.0.0.1", port: 0)
    private(set) var rawAddress = Endpoint(host: "127.0.0.1", port: 0)
    private let base: OpaquePointer
    private var listeners: [OpaquePointer] = []
    private let tls: TLSContext
    private let body: [UInt8]
    let fault: Fault?
    private var connections: [ObjectIdentifier: UpstreamConnection] = [:]
    private let finished = DispatchSemaphore(value: 0)
    /// TLS connections accepted so far: beside the sessions a run started, what a proxy adds upstream (its probes,
    /// spot checks and spare connections).
    let tlsAccepted = Atomic<Int>(0)

    /// Binds both listeners (port 0 picks free ports) and starts serving on a new thread.
    init(tls: TLSContext, bodyBytes: Int, fault: Fault?, tlsPort: UInt16 = 0, rawPort: UInt16 = 0) throws(BenchError) {
        guard let base = event_base_new() else { throw BenchError("event_base_new failed") }
        self.base = base
        self.tls = tls
        self.fault = fault
        var body = [UInt8](repeating: 0, count: bodyBytes)
        body.withUnsafeMutableBufferPointer { Pattern.fill($0.baseAddress!, offset: 0, count: bodyBytes) }
        if fault == .corrupt, bodyBytes > 0 { body[bodyBytes / 2] ^= 0x01 }
        self.body = body
        let tlsListener = try listen(port: tlsPort, callback: { _, fd, _, _, ctx in
            Unmanaged<BuiltinUpstream>.fromOpaque(ctx!).takeUnretainedValue().accept(fd, raw: false)
        })
        let rawListener = try listen(port: rawPort, callback: { _, fd, _, _, ctx in
            Unmanaged<BuiltinUpstream>.fromOpaque(ctx!).takeUnretainedValue().accept(fd, raw: true)
        })
        tlsAddress = Endpoint(host: "127.0.0.1", port: try boundPort(evconnlistener_get_fd(tlsListener)))
        rawAddress = Endpoint(host: "127.0.0.1", port: try boundPort(evconnlistener_get_fd(rawListener)))
        let thread = Thread { [self] in
            event_base_dispatch(self.base)
            self.finished.signal()
        }
        thread.name = "bench-upstream"
        thread.start()
    }

    private func listen(port: UInt16, callback: evconnlistener_cb) throws(BenchError) -> OpaquePointer {
        var address = try Endpoint(host: "127.0.0.1", port: port).sockaddr()
        let listener = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                evconnlistener_new_bind(base, callback, Unmanaged.passUnretained(self).toOpaque(),
                                        UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC), 4096,
                                        $0, Int32(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard let listener else { throw BenchError("upstream: cannot listen on 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        listeners.append(listener)
        return listener
    }

    /// Stops serving (from any thread), waits for the loop thread, frees everything.
    func stop() {
        // Not event_base_loopbreak: event_base_loop clears the break flag when it starts, so a stop that comes before
        // the thread enters the loop (a run that fails at once, on a loaded machine) was lost and this wait hung.
        // loopexit queues a timer event that the loop runs whenever it gets there.
        event_base_loopexit(base, nil)
        finished.wait()
        for connection in connections.values { connection.close() }
        connections.removeAll()
        for listener in listeners { evconnlistener_free(listener) }
        listeners.removeAll()
        event_base_free(base)
    }

    private func accept(_ fd: Int32, raw: Bool) {
        setNoDelay(fd)
        let bev: OpaquePointer?
        if raw {
            bev = bufferevent_socket_new(base, fd, EV.closeOnFree)
        } else {
            tlsAccepted.add(1, ordering: .relaxed)
            guard let ssl = SSL_new(tls.raw) else { close(fd); return }
            bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, EV.closeOnFree)
            if let bev { bufferevent_openssl_set_allow_dirty_shutdown(bev, 1) }
        }
        guard let bev else { close(fd); return }
        let connection = UpstreamConnection(server: self, bev: bev, raw: raw)
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    fileprivate func closed(_ connection: UpstreamConnection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
    }

    fileprivate var responseHead: String {
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
    }
    fileprivate var responseBody: [UInt8] { body }
}

/// One accepted connection of the builtin upstream. Owned by the upstream's table; lives on its thread.
private final class UpstreamConnection {
    unowned let server: BuiltinUpstream
    let bev: OpaquePointer
    let raw: Bool
    enum Phase { case command, sending(total: Int), receiving(total: Int), closingAfterWrite, lingering, closed }
    var phase = Phase.command
    var offset = 0
    var scratch = [UInt8](repeating: 0, count: Pattern.blockSize)
    static let highWater = 1 << 20
    static let lowWater = 256 << 10

    init(server: BuiltinUpstream, bev: OpaquePointer, raw: Bool) {
        self.server = server; self.bev = bev; self.raw = raw
    }

    func start() {
        bufferevent_setcb(bev, { _, ctx in UpstreamConnection.from(ctx).readable() },
                          { _, ctx in UpstreamConnection.from(ctx).writable() },
                          { _, what, ctx in UpstreamConnection.from(ctx).event(what) },
                          Unmanaged.passUnretained(self).toOpaque())
        var idle = timeval(seconds: 120)
        bufferevent_set_timeouts(bev, &idle, &idle)
        bufferevent_enable(bev, EV.readWrite)
    }

    static func from(_ ctx: UnsafeMutableRawPointer?) -> UpstreamConnection {
        Unmanaged<UpstreamConnection>.fromOpaque(ctx!).takeUnretainedValue()
    }

    func close() {
        if case .closed = phase { return }
        phase = .closed
        bufferevent_free(bev)
        server.closed(self)
    }

    func event(_ what: Int16) {
        if what & EV.connected != 0 { return }  // TLS handshake done: wait for the request.
        close()  // EOF, error or timeout: this side has nothing more to say.
    }

    func readable() {
        let input = bufferevent_get_input(bev)!
        if !raw {
            guard case .command = phase else { evbuffer_drain(input, evbuffer_get_length(input)); return }
            guard let end = headEnd(input) else {
                if evbuffer_get_length(input) > 16_384 { close() }
                return
            }
            evbuffer_drain(input, end)
            write(bev, server.responseHead)
            server.responseBody.withUnsafeBufferPointer { _ = bufferevent_write(bev, $0.baseAddress, $0.count) }
            closeWhenFlushed()
            return
        }
        while true {
            switch phase {
            case .command:
                guard let line = removeLine(input) else {
                    if evbuffer_get_length(input) > 256 { close() }
                    return
                }
                let words = line.split(separator: " ")
                if words.first == "PING" {
                    write(bev, "PONG\n")
                } else if words.count == 2, words[0] == "DOWN", let total = Int(words[1]), total >= 0 {
                    phase = .sending(total: total)
                    offset = 0
                    bufferevent_setwatermark(bev, Int16(EV_WRITE), Self.lowWater, 0)
                    refill()
                    return
                } else if words.count == 2, words[0] == "UP", let total = Int(words[1]), total >= 0 {
                    phase = .receiving(total: total)
                    offset = 0
                    if total == 0 { write(bev, "OK 0\n"); closeWhenFlushed(); return }
                } else {
                    write(bev, "ERR unknown command\n")
                    closeWhenFlushed()
                    return
                }
            case .receiving(let total):
                let available = evbuffer_get_length(input)
                if available == 0 { return }
                let chunk = min(evbuffer_get_contiguous_space(input), total - offset)
                guard chunk > 0, let bytes = evbuffer_pullup(input, chunk) else {
                    write(bev, "BAD \(offset) more bytes than announced\n"); rejectWhenFlushed(); return
                }
                let corruptAt = total / 2
                if server.fault == .corrupt, corruptAt >= offset, corruptAt < offset + chunk {
                    bytes[corruptAt - offset] ^= 0x01
                }
                if let bad = Pattern.firstMismatch(bytes, offset: offset, count: chunk) {
                    write(bev, "BAD \(bad) byte differs\n"); rejectWhenFlushed(); return
                }
                evbuffer_drain(input, chunk)
                offset += chunk
                if offset == total { write(bev, "OK \(total)\n"); closeWhenFlushed(); return }
            case .sending, .closingAfterWrite, .lingering, .closed:
                evbuffer_drain(input, evbuffer_get_length(input))
                return
            }
        }
    }

    func writable() {
        switch phase {
        case .sending: refill()
        case .closingAfterWrite:
            if evbuffer_get_length(bufferevent_get_output(bev)) == 0 { closeCleanly() }
        case .lingering:
            if evbuffer_get_length(bufferevent_get_output(bev)) == 0 { shutdown(bufferevent_getfd(bev), Int32(SHUT_WR)) }
        default: break
        }
    }

    /// A rejected upload: the verdict line is sent, then the write side shut, and the rest of the upload read and
    /// dropped until the client closes (the event callback). Closing at once, with upload bytes unread, resets the
    /// connection, and the client could see the reset before the line.
    func rejectWhenFlushed() {
        phase = .lingering
        bufferevent_setwatermark(bev, Int16(EV_WRITE), 0, 0)
        if evbuffer_get_length(bufferevent_get_output(bev)) == 0 { shutdown(bufferevent_getfd(bev), Int32(SHUT_WR)) }
    }

    func closeWhenFlushed() {
        phase = .closingAfterWrite
        bufferevent_setwatermark(bev, Int16(EV_WRITE), 0, 0)
        if evbuffer_get_length(bufferevent_get_output(bev)) == 0 { closeCleanly() }
    }

    /// Closes after a complete exchange; for TLS, keeps the session resumable (SSL_free would not).
    func closeCleanly() {
        if !raw, let ssl = bufferevent_openssl_get_ssl(bev) { SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN) }
        close()
    }

    /// Tops the output up to `highWater` with the next stream bytes; zero-copy for whole clean blocks.
    func refill() {
        guard case .sending(let total) = phase else { return }
        let output = bufferevent_get_output(bev)!
        let corruptAt = server.fault == .corrupt ? total / 2 : -1
        while evbuffer_get_length(output) < Self.highWater && offset < total {
            let index = offset & (Pattern.blockSize - 1)
            let run = min(Pattern.blockSize - index, total - offset)
            let clean = corruptAt < offset || corruptAt >= offset + run
            if index == 0 && run == Pattern.blockSize && clean {
                scratch.withUnsafeMutableBufferPointer { Pattern.stamp(block: offset / Pattern.blockSize, into: $0.baseAddress!) }
                evbuffer_add(output, scratch, Pattern.stampSize)
                evbuffer_add_reference(output, Pattern.base + Pattern.stampSize, Pattern.blockSize - Pattern.stampSize, nil, nil)
            } else {
                scratch.withUnsafeMutableBufferPointer { Pattern.fill($0.baseAddress!, offset: offset, count: run) }
                if !clean { scratch[corruptAt - offset] ^= 0x01 }
                evbuffer_add(output, scratch, run)
            }
            offset += run
        }
        if offset == total { closeWhenFlushed() }
    }
}
