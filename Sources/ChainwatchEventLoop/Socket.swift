internal import CLibevent
import Glibc

/// The socket calls `Connection` and `Listener` share.
enum Socket {
    /// SOCK_NONBLOCK | SOCK_CLOEXEC: every socket a loop owns, made by socket(2) or accept4(2).
    static let loopFlags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)

    /// A new TCP socket for a loop, or -1 with `errno` set.
    static func stream(family: Int32) -> Int32 {
        Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | loopFlags, 0)
    }

    /// setsockopt(2) with an `int` value; failures are left to show up in later calls.
    static func set(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }
}
