internal import CLibevent
import Glibc

/// A listening socket on a loop, with SO_REUSEADDR and SO_REUSEPORT so every loop can bind the same address and
/// the kernel spreads connections. Owns the socket and its event. Loop thread only.
///
/// Two options shape what an accepted socket costs: TCP_NODELAY set here is inherited by every accepted socket (no
/// `setsockopt` per connection), and TCP_DEFER_ACCEPT wakes the loop only once the client's first bytes have
/// arrived, so the connection's first read finds its request instead of waiting another loop turn. Each wakeup
/// accepts one connection: the loop reports the socket again while more are queued, so an empty queue costs no
/// `accept4` that fails with EAGAIN.
public final class Listener {
    private var socket: Int32 = -1
    private var event: OpaquePointer?        // event *, EV_READ | EV_PERSIST
    private var backoff: Timer?              // accepting again after EMFILE
    private let accept: (Int32, SocketAddress) -> Void
    /// When accepting fails for want of descriptors: how long to pause, and one line per burst.
    private var acceptFailures = AcceptBackoff()
    private let log: (String) -> Void
    /// Where it listens: the address given, with the port the kernel chose for port 0.
    public private(set) var address: SocketAddress

    /// Seconds the kernel holds a connection that has sent nothing before handing it over anyway.
    static let deferAcceptSeconds: Int32 = 1

    /// Binds and listens; `accept` gets each new non-blocking socket (ownership passes to it) and the peer's address.
    /// `log` gets a line when accepting fails for want of descriptors or memory, once per burst (`AcceptBackoff`).
    /// `reusePort` false: one socket owns the address (the admin listener; a second process cannot join it).
    /// `transparent`: `IP_TRANSPARENT` (IPv6: `IPV6_TRANSPARENT`), so a firewall's `tproxy` rule can deliver
    /// connections addressed to other hosts (it needs CAP_NET_ADMIN; without it, `redirect` rules still work).
    public init(loop: EventLoop, address: SocketAddress, backlog: Int32 = 1024, reusePort: Bool = true, transparent: Bool = false,
                log: @escaping (String) -> Void = { _ in },
                accept: @escaping (Int32, SocketAddress) -> Void) throws(EventLoopError) {
        self.accept = accept
        self.log = log
        let fd = Socket.stream(family: address.family)
        guard fd >= 0 else { throw .fromErrno("socket") }
        socket = fd
        Socket.set(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        if reusePort { Socket.set(fd, SOL_SOCKET, SO_REUSEPORT, 1) }
        Socket.set(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        Socket.set(fd, Int32(IPPROTO_TCP), TCP_DEFER_ACCEPT, Self.deferAcceptSeconds)
        if transparent {
            if address.family == AF_INET6 { Socket.set(fd, SOL_IPV6, 75, 1) } else { Socket.set(fd, SOL_IP, 19, 1) }   // IPV6_TRANSPARENT, IP_TRANSPARENT
        }
        self.address = address
        guard address.withSockaddr({ sa, len in bind(fd, sa, len) }) == 0 else { throw failure("bind \(address)") }
        guard listen(fd, backlog) == 0 else { throw failure("listen \(address)") }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> SocketAddress? in
                getsockname(fd, sa, &length) == 0 ? SocketAddress(sa, length: length) : nil
            }
        }
        self.address = bound ?? address
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, ctx in
            Unmanaged<Listener>.fromOpaque(ctx!).takeUnretainedValue().acceptOne()
        }, context)
        backoff = Timer(loop: loop) { [unowned self] in
            if let event { event_add(event, nil) }
        }
        guard let event else { throw failure("event_new") }
        event_add(event, nil)
    }

    /// Fails with EADDRINUSE when another process listens on `address`. SO_REUSEPORT lets any process of the same
    /// user join the port and take its share of the connections, under its own policy; only this process's own
    /// loops may share it. A socket bound without SO_REUSEPORT cannot join a port group, so binding one shows
    /// whether the port is taken; it is closed before the loops bind. (Two instances started in the same instant
    /// can both pass; a service manager that starts one instance, or a distinct user per instance, closes that gap.)
    public static func checkUnused(_ address: SocketAddress) throws(EventLoopError) {
        let fd = Socket.stream(family: address.family)
        guard fd >= 0 else { throw .fromErrno("socket") }
        defer { Glibc.close(fd) }
        Socket.set(fd, SOL_SOCKET, SO_REUSEADDR, 1)   // a TIME_WAIT from an earlier run is not "in use"
        guard address.withSockaddr({ sa, len in bind(fd, sa, len) }) == 0 else {
            let e = Glibc.errno
            throw EventLoopError(call: "bind \(address)", errno: e, hint: e == EADDRINUSE
                ? "another process listens there; chainwatch shares its port only among its own loops" : nil)
        }
    }

    private func failure(_ call: String) -> EventLoopError {
        let error = EventLoopError.fromErrno(call)
        close()
        return error
    }

    private func acceptOne() {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                c_libevent_accept4(socket, $0, &length, Socket.loopFlags)
            }
        }
        guard fd >= 0 else {
            let e = errno
            if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM, let event, let backoff {
                // Out of descriptors: the queued connection stays readable and would spin the loop. Pause, and say
                // so once per burst.
                event_del(event)
                let (pause, line) = acceptFailures.failed(describeErrno(e))
                if let line { log(line) }
                backoff.schedule(milliseconds: pause)
            }
            return   // EAGAIN (another loop took it), ECONNABORTED (the client gave up): nothing to do
        }
        if let line = acceptFailures.accepted() { log(line) }
        let peer = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: length) }
        }
        accept(fd, peer)
    }

    /// Stops accepting and closes the listening socket. Idempotent.
    public func close() {
        if let event { event_free(event) }
        event = nil
        backoff?.cancel()
        backoff = nil
        if socket >= 0 { Glibc.close(socket) }
        socket = -1
    }

    deinit { close() }
}
