#if SANITIZE_THREAD
import Glibc

/// A value behind a `pthread_mutex_t`: what `Lock` is in the ThreadSanitizer build (`-Xswiftc -DSANITIZE_THREAD`,
/// `make sanitize-thread`). `Synchronization.Mutex` on Linux waits and wakes with futex system calls that
/// ThreadSanitizer does not model, so it reported every access behind one as a data race; it intercepts
/// `pthread_mutex_lock`/`unlock`, so with this lock it sees the ordering and reports only real races.
/// Owns the mutex and the value; the API is the part of `Mutex` that chainwatch uses.
public final class Lock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    public init(_ initialValue: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init")
        value = .allocate(capacity: 1)
        value.initialize(to: initialValue)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock. Not reentrant.
    public func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
#else
public import Synchronization

/// A value behind a lock, shared between threads: `Synchronization.Mutex` itself. Only the ThreadSanitizer
/// build (`SANITIZE_THREAD`) makes it a pthread-backed class with the same `init(_:)` and `withLock(_:)`, because
/// ThreadSanitizer does not see `Mutex`'s futex waits; use no other `Mutex` API, or that build stops compiling.
public typealias Lock<Value> = Mutex<Value>
#endif
