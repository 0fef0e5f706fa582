#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `CLOCK_MONOTONIC`, the one clock deadlines and TTLs are measured on (`ChainFetcher`'s deadline, the prober's
/// cache). Never goes back when the wall clock is set.
public enum MonotonicClock {
    /// Nanoseconds since an arbitrary fixed point (boot).
    public static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// Milliseconds since the same point.
    @Sendable public static func milliseconds() -> Int64 {
        Int64(nanoseconds() / 1_000_000)
    }
}
