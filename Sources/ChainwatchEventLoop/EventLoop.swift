internal import CLibevent
import Glibc
import ChainwatchLock

/// One libevent `event_base` and the `evdns_base` beside it. Owns both.
/// Thread: everything except `execute(_:)` and `stop()` must be called on the loop's own thread
/// (the one inside `run()`); tunnels and connections made on a loop live and die on it.
public final class EventLoop: @unchecked Sendable {
    package let base: OpaquePointer          // event_base *
    package private(set) var dns: OpaquePointer?  // evdns_base *
    private var inboxEvent: OpaquePointer?   // event *, persistent, activated from other threads
    private let inbox = Lock<[@Sendable () -> Void]>([])
    public let index: Int

    /// Makes libevent thread-aware; idempotent. Must run before the first loop is made.
    private static let threadsEnabled: Bool = { evthread_use_pthreads() == 0 }()

    /// - Parameters:
    ///   - index: a number for logs (`loop 0`, `loop 1`, ...).
    ///   - hostsFile: a hosts(5) file consulted before DNS, in addition to /etc/hosts.
    public init(index: Int = 0, hostsFile: String? = nil) throws(EventLoopError) {
        _ = Self.threadsEnabled
        // epoll's changelist: an event deleted and added again (or added and deleted) within one loop turn costs one
        // epoll_ctl, or none, instead of two. Its one hazard is dup()ed descriptors registered with a loop, and chainwatch registers none.
        guard let config = event_config_new() else { throw .fromErrno("event_config_new") }
        defer { event_config_free(config) }
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        guard let base = event_base_new_with_config(config) else { throw .fromErrno("event_base_new_with_config") }
        self.base = base
        self.index = index
        // Name servers from /etc/resolv.conf (127.0.0.1 when it has none), /etc/hosts included.
        dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS)
        if dns == nil { dns = evdns_base_new(base, 0) }
        if let dns {
            evdns_base_set_option(dns, "timeout:", "5")
            evdns_base_set_option(dns, "attempts:", "2")
            if let hostsFile, evdns_base_load_hosts(dns, hostsFile) != 0 {
                throw EventLoopError(call: "evdns_base_load_hosts(\(hostsFile))", errno: ENOENT)
            }
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        inboxEvent = event_new(base, -1, Int16(EV_PERSIST), { _, _, ctx in
            Unmanaged<EventLoop>.fromOpaque(ctx!).takeUnretainedValue().drainInbox()
        }, context)
        guard let inboxEvent else { throw .fromErrno("event_new") }
        event_add(inboxEvent, nil)
    }

    deinit {
        if let inboxEvent { event_free(inboxEvent) }
        if let dns { evdns_base_free(dns, 0) }
        event_base_free(base)
    }

    /// CPUs this process may run on (its affinity mask, which `taskset` and cpuset containers narrow), so one loop per
    /// usable CPU does not put two busy loops on one; the online CPU count when the mask cannot be read.
    public static var usableCPUCount: Int {
        let n = Int(c_libevent_sched_getaffinity_count())
        return n > 0 ? n : max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Runs the loop on the calling thread until `stop()` or until no events remain.
    public func run() {
        event_base_loop(base, 0)
    }

    /// Runs `work` on the loop's thread soon. Safe from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(work) }
        event_active(inboxEvent, EV_READ, 0)
    }

    /// Makes `run()` return after the current callbacks. Safe from any thread, and before `run()` has started:
    /// `loopexit` is remembered by the loop (`loopbreak` is cleared when a loop starts, so an early stop was lost).
    public func stop() {
        event_base_loopexit(base, nil)
    }

    private func drainInbox() {
        let work = inbox.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        for item in work { item() }
    }

    /// The loop's cached wall-clock time, in milliseconds since the epoch (cheap: no system call inside callbacks).
    public var cachedMilliseconds: Int64 {
        var tv = timeval()
        event_base_gettimeofday_cached(base, &tv)
        return Int64(tv.tv_sec) * 1000 + Int64(tv.tv_usec) / 1000
    }
}
