internal import CLibevent
import Glibc

/// A failed libevent or socket call, named, with `errno` read on the line after it.
public struct EventLoopError: Error, Sendable, CustomStringConvertible {
    public var call: String
    public var errno: Int32
    public var description: String { "\(call) failed: \(String(cString: strerror(errno)))" }
    public init(call: String, errno: Int32) { self.call = call; self.errno = errno }
    static func fromErrno(_ call: String) -> EventLoopError { EventLoopError(call: call, errno: Glibc.errno) }
}
