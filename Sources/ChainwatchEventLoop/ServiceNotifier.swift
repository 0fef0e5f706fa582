internal import CLibevent
import Glibc

/// systemd's service notification protocol (sd_notify(3)) without libsystemd: one datagram per state change to the
/// unix socket `$NOTIFY_SOCKET` names (a leading `@` is the abstract namespace). Inert when the variable is unset
/// (not started by systemd with Type=notify). Thread-safe: each call makes and closes its own socket.
public struct ServiceNotifier: Sendable {
    private let path: String?
    /// `WATCHDOG_USEC` as milliseconds, when systemd asked for keep-alives (WatchdogSec=).
    public let watchdogMilliseconds: Int?

    public init(environment: [String: String]) {
        path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogMilliseconds = environment["WATCHDOG_USEC"].flatMap { Int($0) }.map { $0 / 1000 }.flatMap { $0 > 0 ? $0 : nil }
    }

    public var isActive: Bool { path != nil }

    /// Sends `state` (`READY=1`, `STOPPING=1`, `WATCHDOG=1`, `STATUS=...`, `RELOADING=1`, lines joined by `\n`).
    /// Returns false when there is no socket or the send failed.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let path else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var name = Array(path.utf8)
        let abstract = name.first == UInt8(ascii: "@")
        if abstract { name[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard name.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: name)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count + (abstract ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
            }
        }
        return sent == message.count
    }
}
