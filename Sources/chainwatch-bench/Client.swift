import CLibevent
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import Foundation
import Synchronization

/// A closed-loop client slot: runs sessions of one kind one after another.
final class Lane {
    weak var worker: Worker?
    let kind: SessionKind
    var active = false
    /// The last TLS session, kept for `--resume`. Owned (one reference).
    var tlsSession: OpaquePointer?
    private var kick: OpaquePointer?

    init(worker: Worker?, kind: SessionKind) { self.worker = worker; self.kind = kind }

    /// Starts the next session from the event loop (never recursively from a callback).
    func schedule() {
        guard let worker else { return }
        active = true
        if kick == nil {
            kick = event_new(worker.base, -1, 0, { _, _, ctx in
                let lane = Unmanaged<Lane>.fromOpaque(ctx!).takeUnretainedValue()
                lane.worker?.startSession(on: lane)
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        event_active(kick, Int32(EV_TIMEOUT), 0)
    }

    func release() {
        if let kick { event_free(kick) }
        kick = nil
        if let tlsSession { SSL_SESSION_free(tlsSession) }
        tlsSession = nil
    }
}

/// One client connection running its state machine over libevent callbacks.
/// Owned by its worker's table of live sessions; lives on the worker's thread.
final class Session {
    unowned let worker: Worker
    let lane: Lane
    var kind: SessionKind { lane.kind }
    private var bev: OpaquePointer?
    private var ssl: OpaquePointer?   // borrowed: the TLS filter bufferevent owns it
    /// The server name this session offers (`--sni`, or its own with `--fresh-names`).
    private var sessionName: String?
    enum Phase: String {
        case connecting, awaitingConnect200, awaitingSocksReplies, handshaking, awaitingResponseHead, readingBody
        case receivingStream, sendingStream, awaitingUploadVerdict
        case awaitingFirstPong, holding, awaitingLastPong, ended

        /// The phase in a failure's words ("closed by peer while waiting for the proxy's 200").
        var words: String {
            switch self {
            case .connecting: "connecting"
            case .awaitingConnect200: "waiting for the proxy's 200"
            case .awaitingSocksReplies: "waiting for the SOCKS replies"
            case .handshaking: "in the TLS handshake"
            case .awaitingResponseHead: "waiting for the response head"
            case .readingBody: "reading the response body"
            case .receivingStream: "receiving the stream"
            case .sendingStream: "sending the stream"
            case .awaitingUploadVerdict: "waiting for the upload's verdict"
            case .awaitingFirstPong: "waiting for the first pong"
            case .holding: "holding the tunnel"
            case .awaitingLastPong: "waiting for the last pong"
            case .ended: "ended"
            }
        }
    }
    private var phase = Phase.connecting
    private let startedAt: UInt64
    private var tunnelAt: UInt64 = 0
    private var bodyLength = 0
    private var received = 0
    private var sent = 0
    private var scratch: [UInt8] = []
    private var settings: ClientSettings { worker.settings }

    init(worker: Worker, lane: Lane, startedAt: UInt64) { self.worker = worker; self.lane = lane; self.startedAt = startedAt }

    private static func from(_ ctx: UnsafeMutableRawPointer?) -> Session {
        Unmanaged<Session>.fromOpaque(ctx!).takeUnretainedValue()
    }

    private func install(_ bev: OpaquePointer) {
        self.bev = bev
        bufferevent_setcb(bev, { _, ctx in Session.from(ctx).readable() },
                          { _, ctx in Session.from(ctx).writable() },
                          { _, what, ctx in Session.from(ctx).event(what) },
                          Unmanaged.passUnretained(self).toOpaque())
        var limit = timeval(seconds: settings.timeout)
        bufferevent_set_timeouts(bev, &limit, &limit)
        bufferevent_enable(bev, EV.readWrite)
    }

    func start() {
        var fd: Int32 = -1
        if let source = settings.sourceAddress {   // bound first: bufferevent_socket_connect then connects this socket
            do throws(BenchError) { fd = try boundSocket(source) } catch { return fail(error.description) }
        }
        guard let bev = bufferevent_socket_new(worker.base, fd, EV.closeOnFree) else {
            if fd >= 0 { close(fd) }
            return fail("bufferevent_socket_new failed")
        }
        install(bev)
        let hop = settings.viaProxy ? settings.firstHop : (kind == .handshake ? settings.tlsUpstream : settings.rawUpstream)
        guard var address = try? hop.sockaddr() else { return fail("bad address \(hop)") }
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bufferevent_socket_connect(bev, $0, Int32(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc != 0 { fail("connect to \(hop): \(String(cString: strerror(errno)))") }
    }

    // MARK: events

    private func event(_ what: Int16) {
        if what & EV.connected != 0 {
            if phase == .connecting { return connected() }
            if phase == .handshaking { return handshakeDone() }
            return
        }
        if what & EV.timeout != 0 { return fail("no progress for \(settings.timeout)s while \(phase.words)") }
        if what & EV.eof != 0 {
            // Read what arrived with the EOF first: a complete stream may end with it.
            readable()
            if phase == .ended { return }
            return fail("closed by peer while \(phase.words)\(progress)")
        }
        if what & EV.error != 0 {
            var detail = String(cString: strerror(errno))
            if let bev {
                var tlsErrors: [String] = []
                while true {
                    let code = bufferevent_get_openssl_error(bev)
                    if code == 0 { break }
                    tlsErrors.append(openSSLErrorString(code))
                }
                if !tlsErrors.isEmpty { detail = tlsErrors.joined(separator: "; ") }
            }
            return fail("error while \(phase.words): \(detail)")
        }
    }

    private var progress: String {
        switch phase {
        case .readingBody: " after \(received) of \(bodyLength) body bytes"
        case .receivingStream, .awaitingUploadVerdict, .sendingStream: " after \(max(received, sent)) of \(settings.bulkBytes) bytes"
        default: ""
        }
    }

    private func connected() {
        let fd = bufferevent_getfd(bev)
        if fd >= 0 { setNoDelay(fd) }
        if settings.viaProxy {
            let target = kind == .handshake ? settings.tlsUpstream : settings.rawUpstream
            if settings.socks {   // the greeting (no authentication) and the request at once, by IPv4 address
                guard let address = target.ipv4Bytes else { return fail("SOCKS needs an IPv4 upstream address, not \(target.host)") }
                let request: [UInt8] = [5, 1, 0, 5, 1, 0, 1] + address + [UInt8(target.port >> 8), UInt8(target.port & 0xFF)]
                _ = request.withUnsafeBytes { bufferevent_write(bev, $0.baseAddress, $0.count) }
                phase = .awaitingSocksReplies
                return
            }
            write(bev!, "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\r\n")
            phase = .awaitingConnect200
        } else {
            tunnelReady()
        }
    }

    private func tunnelReady() {
        tunnelAt = monotonicNanos()
        worker.stats(for: kind) { $0.connect200.record((tunnelAt - startedAt) / 1000) }
        switch kind {
        case .handshake: beginTLS()
        case .bulk:
            if settings.upload {
                write(bev!, "UP \(settings.bulkBytes)\n")
                phase = .sendingStream
                scratch = [UInt8](repeating: 0, count: Pattern.blockSize)
                bufferevent_setwatermark(bev, Int16(EV_WRITE), 256 << 10, 0)
                writable()
            } else {
                write(bev!, "DOWN \(settings.bulkBytes)\n")
                phase = .receivingStream
            }
        case .idle:
            write(bev!, "PING\n")
            phase = .awaitingFirstPong
        }
    }

    private func beginTLS() {
        guard let tls = settings.tls, let ssl = SSL_new(tls.raw) else { return fail("SSL_new failed: \(drainOpenSSLErrors())") }
        if settings.freshNames {
            sessionName = "s\(RunShared.freshNames.add(1, ordering: .relaxed).newValue).fresh.bench.test"
        } else {
            sessionName = settings.sni
        }
        if let sni = sessionName { _ = c_openssl_SSL_set_tlsext_host_name(ssl, sni) }
        if settings.resume, let saved = lane.tlsSession { _ = SSL_set_session(ssl, saved) }
        guard let filter = bufferevent_openssl_filter_new(worker.base, bev, ssl, BUFFEREVENT_SSL_CONNECTING, EV.closeOnFree) else {
            SSL_free(ssl)
            return fail("bufferevent_openssl_filter_new failed")
        }
        self.ssl = ssl
        bufferevent_openssl_set_allow_dirty_shutdown(filter, 1)
        phase = .handshaking
        install(filter)
    }

    private func handshakeDone() {
        let now = monotonicNanos()
        let resumed = ssl.map { SSL_session_reused($0) == 1 } ?? false
        worker.stats(for: kind) {
            $0.tlsHandshake.record((now - tunnelAt) / 1000)
            if resumed { $0.resumed += 1 }
        }
        let host = sessionName ?? settings.tlsUpstream.description
        write(bev!, "GET \(settings.path) HTTP/1.1\r\nHost: \(host)\r\nUser-Agent: chainwatch-bench\r\nConnection: close\r\n\r\n")
        phase = .awaitingResponseHead
    }

    private func readable() {
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        switch phase {
        case .awaitingSocksReplies:   // the method chosen (2 bytes), then the request's reply (10 for an IPv4 bound address)
            guard evbuffer_get_length(input) >= 12 else { return }
            var replies = [UInt8](repeating: 0, count: 12)
            evbuffer_remove(input, &replies, 12)
            guard replies[0...1] == [5, 0], replies[2] == 5, replies[3] == 0 else {
                return fail("SOCKS proxy refused: method reply \(replies[0...1].map(String.init)), reply code \(replies[3])")
            }
            if evbuffer_get_length(input) > 0 { return fail("SOCKS proxy sent bytes after its reply before the upstream spoke") }
            tunnelReady()
        case .awaitingConnect200:
            guard let end = headEnd(input) else {
                if evbuffer_get_length(input) > 16_384 { fail("proxy sent more than 16 KiB without ending its response head") }
                return
            }
            let head = removeText(input, count: end)
            let statusLine = head.prefix { $0 != "\r" }
            let words = statusLine.split(separator: " ")
            guard words.count >= 2, words[0].hasPrefix("HTTP/1."), words[1] == "200" else {
                return fail("proxy refused CONNECT: \(statusLine)")
            }
            if evbuffer_get_length(input) > 0 { return fail("proxy sent bytes after its 200 before the upstream spoke") }
            tunnelReady()
        case .awaitingResponseHead:
            guard let end = headEnd(input) else {
                if evbuffer_get_length(input) > 16_384 { fail("response head longer than 16 KiB") }
                return
            }
            let head = removeText(input, count: end)
            let lines = head.split(separator: "\r\n")
            let status = lines.first.map(String.init) ?? ""
            guard status.split(separator: " ").dropFirst().first == "200" else { return fail("upstream answered: \(status)") }
            guard let lengthLine = lines.first(where: { $0.lowercased().hasPrefix("content-length:") }),
                  let length = Int(lengthLine.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) else {
                return fail("response has no Content-Length")
            }
            if let expected = settings.expectedBodyBytes, expected != length {
                return fail("Content-Length \(length), expected \(expected)")
            }
            bodyLength = length
            received = 0
            phase = .readingBody
            if length == 0 { return complete() }
            readBody(input)
        case .readingBody:
            readBody(input)
        case .receivingStream:
            while phase == .receivingStream, evbuffer_get_length(input) > 0 {
                let chunk = evbuffer_get_contiguous_space(input)
                guard received + chunk <= settings.bulkBytes else {
                    return fail("received more than the \(settings.bulkBytes) bytes asked for")
                }
                guard let bytes = evbuffer_pullup(input, chunk) else { return fail("evbuffer_pullup failed") }
                if let bad = Pattern.firstMismatch(bytes, offset: received, count: chunk) {
                    return fail("corrupted stream: byte at offset \(bad) differs from what the upstream sent")
                }
                evbuffer_drain(input, chunk)
                received += chunk
                worker.stats(for: kind) { $0.bytes += chunk }
                if received == settings.bulkBytes { complete() }
            }
        case .awaitingUploadVerdict:
            guard let line = removeLine(input) else { return }
            if line == "OK \(settings.bulkBytes)" { return complete() }
            fail("upstream rejected the upload: \(line)")
        case .awaitingFirstPong, .awaitingLastPong:
            guard let line = removeLine(input) else { return }
            guard line == "PONG" else { return fail("expected PONG, got '\(line)'") }
            if phase == .awaitingLastPong { return complete() }
            phase = .holding
            bufferevent_set_timeouts(bev, nil, nil)
            worker.shared.established.add(1, ordering: .relaxed)
            if worker.stopping { finishIdle() }
        case .holding:
            fail("unexpected bytes on an idle tunnel")
        default:
            if evbuffer_get_length(input) > 0, phase != .ended { fail("unexpected bytes while \(phase.words)") }
        }
    }

    private func readBody(_ input: OpaquePointer) {
        while phase == .readingBody, evbuffer_get_length(input) > 0 {
            let chunk = evbuffer_get_contiguous_space(input)
            guard received + chunk <= bodyLength else { return fail("more body bytes than Content-Length \(bodyLength)") }
            guard let bytes = evbuffer_pullup(input, chunk) else { return fail("evbuffer_pullup failed") }
            if settings.verifyBody, let bad = Pattern.firstMismatch(bytes, offset: received, count: chunk) {
                return fail("corrupted response body: byte at offset \(bad) differs from what the upstream sent")
            }
            evbuffer_drain(input, chunk)
            received += chunk
            if received == bodyLength {
                worker.stats(for: kind) { $0.bytes += bodyLength }
                complete()
            }
        }
    }

    private func writable() {
        guard phase == .sendingStream, let bev, let output = bufferevent_get_output(bev) else { return }
        let total = settings.bulkBytes
        while evbuffer_get_length(output) < 1 << 20 && sent < total {
            let index = sent & (Pattern.blockSize - 1)
            let run = min(Pattern.blockSize - index, total - sent)
            scratch.withUnsafeMutableBufferPointer { Pattern.fill($0.baseAddress!, offset: sent, count: run) }
            evbuffer_add(output, scratch, run)
            sent += run
        }
        if sent == total {
            worker.stats(for: kind) { $0.bytes += total }
            phase = .awaitingUploadVerdict
        }
    }

    /// Idle tunnels at the end of the run: prove the tunnel still works, then close.
    func finishIdle() {
        guard phase == .holding, let bev else { return }
        var limit = timeval(seconds: settings.timeout)
        bufferevent_set_timeouts(bev, &limit, &limit)
        write(bev, "PING\n")
        phase = .awaitingLastPong
    }

    // MARK: endings

    private func end() {
        phase = .ended
        if let bev { bufferevent_free(bev) }  // frees the socket bufferevent and SSL too
        bev = nil
        ssl = nil
    }

    private func complete() {
        guard phase != .ended else { return }
        // A clean end: without these flags SSL_free would mark the session not resumable.
        if let ssl { SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN) }
        if settings.resume, let ssl, let saved = SSL_get1_session(ssl) {
            if let old = lane.tlsSession { SSL_SESSION_free(old) }
            lane.tlsSession = saved
        }
        let micros = (monotonicNanos() - startedAt) / 1000
        worker.stats(for: kind) { $0.completed += 1; $0.latency.record(micros) }
        end()
        worker.sessionEnded(self, failed: false)
    }

    private func fail(_ message: String) {
        guard phase != .ended else { return }
        worker.stats(for: kind) { $0.recordFailure("\(kind.rawValue): \(message)") }
        end()
        worker.sessionEnded(self, failed: true)
    }

    /// The run's bound ended this session; bytes verified so far still count.
    func cutOff() {
        guard phase != .ended else { return }
        worker.stats(for: kind) { $0.cutOff += 1 }
        end()
        worker.sessionEnded(self, failed: false)
    }
}
