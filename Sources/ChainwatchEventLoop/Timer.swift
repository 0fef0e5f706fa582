internal import CLibevent

/// A timer on a loop: one-shot, or `repeating` at the scheduled interval. Owns its `event`. Loop thread only.
public final class Timer {
    private var event: OpaquePointer?
    private let action: () -> Void

    public init(loop: EventLoop, repeating: Bool = false, action: @escaping () -> Void) {
        self.action = action
        event = event_new(loop.base, -1, repeating ? Int16(EV_PERSIST) : 0, { _, _, ctx in
            Unmanaged<Timer>.fromOpaque(ctx!).takeUnretainedValue().action()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { if let event { event_free(event) } }

    /// Fires after `milliseconds` (then every `milliseconds` when repeating), replacing any earlier schedule.
    public func schedule(milliseconds: Int) {
        schedule(microseconds: Int64(milliseconds) * 1000)
    }

    /// Fires after `microseconds` (libevent waits in whole milliseconds, rounded up, on this backend).
    public func schedule(microseconds: Int64) {
        let microseconds = max(0, microseconds)
        var tv = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
        event_add(event, &tv)
    }

    public func cancel() { event_del(event) }
}

/// A signal watched on a loop. Owns its `event`.
///
/// Signals that arrive together run the action once: libevent calls a signal event's callback once per signal
/// caught, so ten queued SIGHUPs were ten policy reloads (seconds each with a large bundle), with SIGTERM waiting
/// behind them. The callback only marks the action due; a zero-delay timer runs it once.
public final class SignalWatcher {
    private var event: OpaquePointer?
    private let action: () -> Void
    private var due: Timer?

    public init(loop: EventLoop, signal: Int32, action: @escaping () -> Void) {
        self.action = action
        due = Timer(loop: loop) { [unowned self] in self.action() }
        event = event_new(loop.base, signal, Int16(EV_SIGNAL | EV_PERSIST), { _, _, ctx in
            Unmanaged<SignalWatcher>.fromOpaque(ctx!).takeUnretainedValue().due?.schedule(milliseconds: 0)
        }, Unmanaged.passUnretained(self).toOpaque())
        event_add(event, nil)
    }

    deinit { if let event { event_free(event) } }
}
