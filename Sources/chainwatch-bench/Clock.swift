#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time in nanoseconds (CLOCK_MONOTONIC), for intervals only.
@inline(__always)
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// A `timeval` for libevent from seconds.
func timeval(seconds: Double) -> timeval {
    let whole = seconds.rounded(.down)
    return timeval(tv_sec: Int(whole), tv_usec: Int((seconds - whole) * 1_000_000))
}
