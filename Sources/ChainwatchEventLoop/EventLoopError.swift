internal import CLibevent
import Glibc

/// A failed libevent or socket call, named, with `errno` read on the line after it.
public struct EventLoopError: Error, Sendable, CustomStringConvertible {
    public var call: String
    public var errno: Int32
    /// What the failure means here, when errno alone would mislead.
    public var hint: String?
    public var description: String {
        "\(call) failed: \(String(cString: strerror(errno)))" + (hint.map { " (\($0))" } ?? "")
    }
    public init(call: String, errno: Int32, hint: String? = nil) { self.call = call; self.errno = errno; self.hint = hint }
    static func fromErrno(_ call: String) -> EventLoopError { EventLoopError(call: call, errno: Glibc.errno) }
}
