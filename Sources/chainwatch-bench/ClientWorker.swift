import CLibevent
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import Foundation
import Synchronization

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
    /// One-shot timers and the boxes their callbacks borrow; both live until deinit (a timer that never fired, such as
    /// the deadline of a run that ended first, must not keep its box alive after the worker is gone).
    private var timers: [(event: OpaquePointer, box: TimerBox)] = []
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
        for timer in timers { event_free(timer.event) }
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
            let box = Unmanaged<TimerBox>.fromOpaque(ctx!).takeUnretainedValue()
            if let worker = box.worker { box.action(worker) }
        }, Unmanaged.passUnretained(box).toOpaque())!
        var tv = timeval(seconds: seconds)
        event_add(timer, &tv)
        timers.append((timer, box))
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

    func stats(for kind: SessionKind, _ update: (inout KindStats) -> Void) {
        update(&stats[kind, default: KindStats()])
    }

    /// Starts a session on `lane` if the run's bound allows it.
    func startSession(on lane: Lane) {
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

    func sessionEnded(_ session: Session, failed: Bool) {
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
