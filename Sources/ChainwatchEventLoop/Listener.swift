internal import CLibevent
import Glibc

/// A listening socket on a loop (`evconnlistener`, SO_REUSEADDR and SO_REUSEPORT, so every loop can bind
/// the same address and the kernel spreads connections). Owns the listener. Loop thread only.
public final class Listener {
    private var raw: OpaquePointer?   // evconnlistener *
    private let accept: (Int32, SocketAddress) -> Void

    /// Binds and listens; `accept` gets each new socket (ownership passes to it) and the peer's address.
    public init(loop: EventLoop, address: SocketAddress, backlog: Int32 = 1024,
                accept: @escaping (Int32, SocketAddress) -> Void) throws(EventLoopError) {
        self.accept = accept
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT)
        let context = Unmanaged.passUnretained(self).toOpaque()
        raw = address.withSockaddr { sa, len in
            evconnlistener_new_bind(loop.base, { _, fd, sa, len, ctx in
                let listener = Unmanaged<Listener>.fromOpaque(ctx!).takeUnretainedValue()
                listener.accept(fd, SocketAddress(sa!, length: socklen_t(len)))
            }, context, flags, backlog, sa, Int32(len))
        }
        guard raw != nil else { throw .fromErrno("bind/listen \(address)") }
    }

    /// Stops accepting and closes the listening socket. Idempotent.
    public func close() {
        if let raw { evconnlistener_free(raw) }
        raw = nil
    }

    deinit { close() }
}
