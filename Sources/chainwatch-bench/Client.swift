import CLibevent
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import Foundation
import Synchronization

/// Everything a client session needs to know about one run. Immutable; shared by worker threads.
struct ClientSettings: @unchecked Sendable {
    /// The proxy sessions connect to (unused with `--direct`: sessions then connect to their upstream).
    var firstHop: Endpoint
    /// True when sessions go through a proxy (send CONNECT and wait for 200 first).
    var viaProxy: Bool
    /// The HTTPS upstream (handshake sessions) and the raw upstream (bulk and idle sessions).
    var tlsUpstream: Endpoint
    var rawUpstream: Endpoint
    var tls: TLSContext?
    var sni: String?
    /// Each session sends a server name of its own (`--fresh-names`).
    var freshNames = false
    var path = "/body.bin"
    /// The body length every response must have; nil: whatever Content-Length says.
    var expectedBodyBytes: Int?
    /// Check every body byte against the pattern (only when the bench started the upstream).
    var verifyBody = true
    var bulkBytes = 64 << 20
    var upload = false
    var resume = false
    /// A session making no progress for this long fails.
    var timeout = 10.0
    /// The run stops early once this many sessions have failed (all workers together).
    var maxFailures = 10
    /// Bound by time: stop starting sessions after this; nil when bound by count.
    var duration: Double?
    /// How long in-flight handshake sessions may finish after the deadline before they are cut off.
    var grace = 5.0
    /// Open loop: new primary sessions per second for this worker (arrivals on a schedule, whatever the answers'
    /// pace); nil: closed loop (each lane starts its next session when the last one ends). Latency then counts
    /// from the scheduled arrival, so time spent waiting for a free lane is not hidden (no coordinated omission).
    var rate: Double?
}

/// Counters shared by the workers of one run.
final class RunShared: Sendable {
    /// Sessions of the primary kind still to start (Int.max: bound by time only).
    let budget: Atomic<Int>
    let failures = Atomic<Int>(0)
    /// Sessions that took a fresh server name (`--fresh-names`).
    let freshNames = Atomic<Int>(0)
    /// Idle tunnels established and holding.
    let established = Atomic<Int>(0)

    init(budget: Int) { self.budget = Atomic(budget) }

    func take() -> Bool {
        while true {
            let now = budget.load(ordering: .relaxed)
            if now <= 0 { return false }
            if budget.compareExchange(expected: now, desired: now - 1, ordering: .relaxed).exchanged { return true }
        }
    }
}

/// One event_base on one thread driving some lanes (each lane runs one session at a time,
/// back to back: a closed loop). Owned by its thread from `run()` on.
final class Worker: @unchecked Sendable {
    let base: OpaquePointer
    let settings: ClientSettings
    let shared: RunShared
    let primary: SessionKind
    private(set) var stats: [SessionKind: KindStats] = [:]
    private var lanes: [Lane] = []
    private var live: [ObjectIdentifier: Session] = [:]
    private(set) var stopping = false
    private var exiting = false
    private var timers: [OpaquePointer] = []
    private(set) var startedAt: UInt64 = 0
    private(set) var endedAt: UInt64 = 0
    /// Open loop: arrivals started so far, the arrival timer, and arrivals waiting for a free lane (their times).
    private var arrivals = 0
    private var arrivalTimer: OpaquePointer?
    private var waiting: [UInt64] = []

    init(settings: ClientSettings, shared: RunShared, primary: SessionKind, kinds: [SessionKind]) throws(BenchError) {
        // A precise timer (timerfd): open-loop arrivals are due to the microsecond, not rounded up to the next
        // millisecond of epoll_wait's timeout.
        let config = event_config_new()
        defer { event_config_free(config) }
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_PRECISE_TIMER.rawValue))
        guard let base = event_base_new_with_config(config) ?? event_base_new() else { throw BenchError("event_base_new failed") }
        self.base = base
        self.settings = settings
        self.shared = shared
        self.primary = primary
        for kind in kinds { lanes.append(Lane(worker: nil, kind: kind)) }
        for lane in lanes { lane.worker = self }
    }

    deinit {
        for timer in timers { event_free(timer) }
        if let arrivalTimer { event_free(arrivalTimer) }
        for lane in lanes { lane.release() }
        event_base_free(base)
    }

    /// Runs until every lane is done or the bound ends the run. Call on the worker's own thread.
    func run() {
        startedAt = monotonicNanos()
        if let duration = settings.duration {
            arm(after: duration) { $0.deadline() }
        }
        if let rate = settings.rate, rate > 0 {
            arrivalTimer = event_new(base, -1, 0, { _, _, ctx in
                Unmanaged<Worker>.fromOpaque(ctx!).takeUnretainedValue().arrive()
            }, Unmanaged.passUnretained(self).toOpaque())
            for lane in lanes where lane.kind != primary { lane.schedule() }
            arrive()
        } else {
            for lane in lanes { lane.schedule() }
        }
        if lanes.isEmpty { exiting = true } else { event_base_dispatch(base) }
        endedAt = monotonicNanos()
    }

    private func arm(after seconds: Double, _ action: @escaping (Worker) -> Void) {
        let box = TimerBox(worker: self, action: action)
        let timer = event_new(base, -1, 0, { _, _, ctx in
            let box = Unmanaged<TimerBox>.fromOpaque(ctx!).takeRetainedValue()
            if let worker = box.worker { box.action(worker) }
        }, Unmanaged.passRetained(box).toOpaque())!
        var tv = timeval(seconds: seconds)
        event_add(timer, &tv)
        timers.append(timer)
    }

    /// Open loop: starts every arrival that is due by now (each on a free lane, or queued for the next one that
    /// frees), then sleeps until the next one is due.
    private func arrive() {
        guard let rate = settings.rate, !stopping, !exiting else { return }
        let now = monotonicNanos()
        let due = Int(Double(now - startedAt) / 1e9 * rate) + 1
        while arrivals < due {
            let scheduled = startedAt + UInt64(Double(arrivals) / rate * 1e9)
            arrivals += 1
            guard shared.take() else { stopping = true; checkDone(); return }
            if let lane = lanes.first(where: { $0.kind == primary && !$0.active }) {
                begin(on: lane, scheduled: scheduled)
            } else {
                waiting.append(scheduled)
            }
            if stopping || exiting { return }
        }
        let next = startedAt + UInt64(Double(arrivals) / rate * 1e9)
        var tv = timeval(seconds: Double(next > now ? next - now : 0) / 1e9)
        event_add(arrivalTimer, &tv)
    }

    /// The run's time is up: start nothing new; end the sessions that are open-ended now.
    private func deadline() {
        stopping = true
        waiting.removeAll()
        if let arrivalTimer { event_del(arrivalTimer) }
        for session in live.values {
            switch session.kind {
            case .bulk: session.cutOff()
            case .idle: session.finishIdle()
            case .handshake: break
            }
        }
        if !live.isEmpty { arm(after: settings.grace) { $0.cutOffAll() } }
        checkDone()
    }

    private func cutOffAll() {
        for session in live.values { session.cutOff() }
        checkDone()
    }

    fileprivate func stats(for kind: SessionKind, _ update: (inout KindStats) -> Void) {
        update(&stats[kind, default: KindStats()])
    }

    /// Starts a session on `lane` if the run's bound allows it.
    fileprivate func startSession(on lane: Lane) {
        if stopping || exiting { lane.active = false; checkDone(); return }
        if settings.rate != nil && lane.kind == primary {
            // Open loop: this lane was freed; it takes the oldest arrival still waiting, if any.
            guard !waiting.isEmpty else { lane.active = false; checkDone(); return }
            begin(on: lane, scheduled: waiting.removeFirst())
            return
        }
        if lane.kind == primary && !shared.take() { lane.active = false; checkDone(); return }
        begin(on: lane, scheduled: nil)
    }

    private func begin(on lane: Lane, scheduled: UInt64?) {
        let session = Session(worker: self, lane: lane, startedAt: scheduled ?? monotonicNanos())
        live[ObjectIdentifier(session)] = session
        lane.active = true
        stats(for: lane.kind) { $0.started += 1 }
        session.start()
    }

    fileprivate func sessionEnded(_ session: Session, failed: Bool) {
        live.removeValue(forKey: ObjectIdentifier(session))
        if failed, shared.failures.add(1, ordering: .relaxed).newValue >= settings.maxFailures { stopping = true }
        if session.kind == .idle || stopping { session.lane.active = false; checkDone(); return }
        session.lane.schedule()
    }

    /// Ends the loop once the primary lanes are idle; then cuts off the others (mixed: long transfers).
    private func checkDone() {
        guard !exiting else { return }
        if settings.rate != nil && !stopping { return }   // open loop: idle lanes between arrivals are not the end
        let primaryBusy = lanes.contains { $0.kind == primary && $0.active }
        if primaryBusy { return }
        exiting = true
        for session in live.values { session.cutOff() }
        event_base_loopexit(base, nil)
    }
}

/// Holds a timer's action; the timer event owns one retain, released when it fires.
private final class TimerBox {
    weak var worker: Worker?
    let action: (Worker) -> Void
    init(worker: Worker, action: @escaping (Worker) -> Void) { self.worker = worker; self.action = action }
}

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
        case connecting, awaitingConnect200, handshaking, awaitingResponseHead, readingBody
        case receivingStream, sendingStream, awaitingUploadVerdict
        case awaitingFirstPong, holding, awaitingLastPong, ended
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
        guard let bev = bufferevent_socket_new(worker.base, -1, EV.closeOnFree) else {
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
        if what & EV.timeout != 0 { return fail("no progress for \(settings.timeout)s while \(phase.rawValue)") }
        if what & EV.eof != 0 {
            // Read what arrived with the EOF first: a complete stream may end with it.
            readable()
            if phase == .ended { return }
            return fail("closed by peer while \(phase.rawValue)\(progress)")
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
            return fail("error while \(phase.rawValue): \(detail)")
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
            sessionName = "s\(worker.shared.freshNames.add(1, ordering: .relaxed).newValue).fresh.bench.test"
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
            if evbuffer_get_length(input) > 0, phase != .ended { fail("unexpected bytes while \(phase.rawValue)") }
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
