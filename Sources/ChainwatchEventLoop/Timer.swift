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

/// A one-shot timer on a loop that fires within tens of microseconds of its time, not on libevent's millisecond
/// clock (`Timer`: a wait rounded up to the next whole millisecond, or passed at once when the loop took longer than
/// the rest): a `timerfd` of its own, watched for reading. Three system calls more than a `Timer` per use, for the few
/// times that must look like a peer's (a spot check's hellos). Loop thread only.
public final class PreciseTimer {
    private let fd: Int32
    private var event: OpaquePointer?
    private let action: () -> Void

    /// Nil when the kernel gives no timer descriptor (descriptors exhausted): the caller does without (a spot check then
    /// sends its hello at once).
    public init?(loop: EventLoop, action: @escaping () -> Void) {
        let fd = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.action = action
        event = event_new(loop.base, fd, Int16(EV_READ), { fd, _, ctx in
            var expirations: UInt64 = 0
            _ = read(fd, &expirations, 8)
            Unmanaged<PreciseTimer>.fromOpaque(ctx!).takeUnretainedValue().action()
        }, Unmanaged.passUnretained(self).toOpaque())
        guard event != nil else {
            close(fd)
            return nil
        }
    }

    deinit {
        if let event { event_free(event) }
        close(fd)
    }

    /// Fires once after `microseconds` (at once for 0 or less), replacing any earlier schedule.
    public func schedule(microseconds: Int64) {
        let microseconds = max(1, microseconds)   // an all-zero value would disarm the timer
        var spec = itimerspec(it_interval: timespec(tv_sec: 0, tv_nsec: 0),
                              it_value: timespec(tv_sec: Int(microseconds / 1_000_000), tv_nsec: Int(microseconds % 1_000_000) * 1000))
        timerfd_settime(fd, 0, &spec, nil)
        event_add(event, nil)
    }

    public func cancel() {
        event_del(event)
        var spec = itimerspec()
        timerfd_settime(fd, 0, &spec, nil)
    }
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
