import ChainwatchLock
import Glibc
import Synchronization

/// The local ports of the connections chainwatch itself opens (upstream tunnels, probes), kept only while a
/// transparent listener runs: a firewall that redirects chainwatch's own traffic back to it (its exemption missing)
/// would otherwise make each tunnel open another through itself, without end. A redirected connection whose source is
/// this host and one of these ports is chainwatch's own, and is refused (`Worker`).
public enum OutboundPorts {
    /// Set once at start, before any loop runs, when `--transparent` is given.
    nonisolated(unsafe) public static var tracking = false
    private static let ports = Lock([UInt16: Int]())

    static func opened(_ fd: Int32) -> UInt16? {
        guard tracking, let port = SocketAddress.localAddress(of: fd)?.port, port != 0 else { return nil }
        ports.withLock { $0[port, default: 0] += 1 }
        return port
    }

    static func closed(_ port: UInt16) {
        ports.withLock { table in
            let left = table[port, default: 1] - 1
            table[port] = left > 0 ? left : nil
        }
    }

    /// Whether a connection from `port` on this host could be one of chainwatch's own.
    public static func isOwn(_ port: UInt16) -> Bool {
        tracking && ports.withLock { $0[port] != nil }
    }
}
