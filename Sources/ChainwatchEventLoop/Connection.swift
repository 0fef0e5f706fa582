internal import CLibevent
import Glibc

/// What happened to a connection, as its delegate hears it.
public enum ConnectionEvent: Sendable, Equatable {
    /// An outgoing connect completed.
    case connected
    /// The peer closed its sending side (read returned 0).
    case endOfStream
    /// A socket error; `errno` as read on the line after it.
    case error(Int32)
    /// A read or write timeout set with `setTimeouts` expired.
    case timeout
}

/// Receives a connection's callbacks on its loop's thread.
public protocol ConnectionDelegate: AnyObject {
    /// New bytes are in `connection.input`.
    func connectionDidRead(_ connection: Connection)
    /// `connection.output` drained to its low watermark.
    func connectionDidDrain(_ connection: Connection)
    func connection(_ connection: Connection, didReceive event: ConnectionEvent)
}

/// A TCP socket on a loop: a `bufferevent` that it owns, closed and freed by `close()` (or deinit).
/// While open it keeps itself alive (the bufferevent holds a retained reference), so the owner can drop it
/// only after `close()`. Loop thread only.
public final class Connection {
    package private(set) var bev: OpaquePointer?   // bufferevent *
    public var delegate: ConnectionDelegate?
    public private(set) var isOpen = true
    private var selfReference: Unmanaged<Connection>?

    /// Wraps an accepted socket; takes ownership of `fd`.
    public init(loop: EventLoop, fd: Int32) throws(EventLoopError) {
        guard let bev = bufferevent_socket_new(loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            Glibc.close(fd)
            throw .fromErrno("bufferevent_socket_new")
        }
        self.bev = bev
        Self.setNoDelay(fd)
        install()
    }

    /// A connection not yet connected; call `connect(to:)`.
    public init(loop: EventLoop) throws(EventLoopError) {
        guard let bev = bufferevent_socket_new(loop.base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            throw .fromErrno("bufferevent_socket_new")
        }
        self.bev = bev
        install()
    }

    private func install() {
        let reference = Unmanaged.passRetained(self)
        selfReference = reference
        bufferevent_setcb(bev, { _, ctx in
            let c = Unmanaged<Connection>.fromOpaque(ctx!).takeUnretainedValue()
            let failure = c.readMore()
            c.delegate?.connectionDidRead(c)
            if let failure, c.isOpen { c.delegate?.connection(c, didReceive: .error(failure)) }
            if c.isOpen { c.inputAfterCallback = c.input.count }
        }, { _, ctx in
            let c = Unmanaged<Connection>.fromOpaque(ctx!).takeUnretainedValue()
            c.delegate?.connectionDidDrain(c)
        }, { _, what, ctx in
            let savedErrno = errno
            let c = Unmanaged<Connection>.fromOpaque(ctx!).takeUnretainedValue()
            let event: ConnectionEvent
            if what & Int16(BEV_EVENT_CONNECTED) != 0 {
                if let fd = c.fd { Connection.setNoDelay(fd) }
                event = .connected
            } else if what & Int16(BEV_EVENT_TIMEOUT) != 0 {
                event = .timeout
            } else if what & Int16(BEV_EVENT_EOF) != 0 {
                event = .endOfStream
            } else {
                event = .error(savedErrno == 0 ? EIO : savedErrno)
            }
            c.delegate?.connection(c, didReceive: event)
        }, reference.toOpaque())
        bufferevent_setwatermark(bev, Int16(EV_WRITE), 0, 0)
        bufferevent_set_max_single_read(bev, 64 * 1024)
        bufferevent_set_max_single_write(bev, 256 * 1024)
    }

    deinit { if let bev { bufferevent_free(bev) } }

    /// libevent 2.1 reads at most 4 096 bytes per read event (EVBUFFER_MAX_READ, whatever max_single_read says), so
    /// a bulk transfer cost a wakeup, an ioctl and a readv per 4 KiB. When a read filled that cap, more is likely
    /// waiting: read up to `extraRead` more here, into the input buffer's own chains (no copy), before the delegate
    /// hears of it. End of stream (0) is left for libevent's next read, which sees it again; an error is returned so
    /// the caller reports it after the bytes before it.
    static let libeventReadCap = 4096
    static let extraRead = 256 * 1024
    private var inputAfterCallback = 0

    private func readMore() -> Int32? {
        let input = self.input
        let count = input.count
        guard count - inputAfterCallback >= Self.libeventReadCap, let fd else { return nil }
        var vectors = (iovec(), iovec())
        return withUnsafeMutableBytes(of: &vectors) { raw -> Int32? in
            let v = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
            // The bufferevent keeps its input's end frozen outside its own reads; thaw it for this one read.
            evbuffer_unfreeze(input.raw, 0)
            defer { evbuffer_freeze(input.raw, 0) }
            let n = evbuffer_reserve_space(input.raw, Self.extraRead, v, 2)
            guard n > 0 else { return nil }
            let got = readv(fd, v, n)
            if got <= 0 {
                let e = errno
                evbuffer_commit_space(input.raw, v, 0)
                return got < 0 && e != EAGAIN && e != EWOULDBLOCK && e != EINTR ? e : nil
            }
            var left = got
            var used: Int32 = 0
            while left > 0 {   // commit only the vectors that got bytes, each to its length
                let i = Int(used)
                v[i].iov_len = min(left, v[i].iov_len)
                left -= v[i].iov_len
                used += 1
            }
            evbuffer_commit_space(input.raw, v, used)
            return nil
        }
    }

    private static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    public var fd: Int32? {
        guard let bev else { return nil }
        let fd = bufferevent_getfd(bev)
        return fd >= 0 ? fd : nil
    }

    public var input: Buffer { Buffer(raw: bufferevent_get_input(bev)) }
    public var output: Buffer { Buffer(raw: bufferevent_get_output(bev)) }

    /// Starts a non-blocking connect; the delegate hears `.connected` or `.error`.
    public func connect(to address: SocketAddress) -> Bool {
        address.withSockaddr { sa, len in bufferevent_socket_connect(bev, UnsafeMutablePointer(mutating: sa), Int32(len)) } == 0
    }

    public func enableRead() { bufferevent_enable(bev, Int16(EV_READ)) }
    public func disableRead() { bufferevent_disable(bev, Int16(EV_READ)) }
    public func enableReadWrite() { bufferevent_enable(bev, c_libevent_EV_READ_WRITE) }
    public var isReading: Bool { bufferevent_get_enabled(bev) & Int16(EV_READ) != 0 }
    /// Enables writing from `output`. `write` and `send(movingFrom:)` do it themselves when they queue bytes, so a
    /// connection whose only writers are those can stay read-only until then: libevent arms the write event whenever
    /// writing is enabled, even with nothing to write, and an empty output costs a wakeup and two epoll changes.
    public func enableWrite() {
        if bufferevent_get_enabled(bev) & Int16(EV_WRITE) == 0 { bufferevent_enable(bev, Int16(EV_WRITE)) }
    }

    /// Write-side low watermark: `connectionDidDrain` fires when output falls to `low` bytes.
    public func setWriteLowWatermark(_ low: Int) { bufferevent_setwatermark(bev, Int16(EV_WRITE), low, 0) }

    /// Read and write timeouts in milliseconds (0: none).
    public func setTimeouts(readMilliseconds: Int, writeMilliseconds: Int) {
        var r = timeval(tv_sec: readMilliseconds / 1000, tv_usec: (readMilliseconds % 1000) * 1000)
        var w = timeval(tv_sec: writeMilliseconds / 1000, tv_usec: (writeMilliseconds % 1000) * 1000)
        withUnsafePointer(to: &r) { rp in
            withUnsafePointer(to: &w) { wp in
                _ = bufferevent_set_timeouts(bev, readMilliseconds > 0 ? rp : nil, writeMilliseconds > 0 ? wp : nil)
            }
        }
    }

    /// Sends `bytes`: straight to the socket when nothing is queued before them (see `send(movingFrom:)`), the rest
    /// queued.
    public func write(_ bytes: [UInt8]) {
        var sent = 0
        if output.count == 0, let fd {
            sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if sent < 0 { sent = 0 }
        }
        guard sent < bytes.count else { return }
        bytes.withUnsafeBytes { _ = bufferevent_write(bev, $0.baseAddress! + sent, $0.count - sent) }
        enableWrite()
    }

    /// Moves every byte of `source` to this connection: when nothing is queued before them, one `writev` straight
    /// from `source`'s chains to the socket (no copy, no waiting a loop turn for writability, no epoll change to
    /// arm and disarm the write event); whatever the socket does not take is queued in `output` (zero-copy) and
    /// written by the bufferevent as before, which also reports any socket error.
    ///
    /// With `eager` false the bytes are only queued: for bulk data, where batching reads into the bufferevent's
    /// larger writes measured cheaper per byte (and fewer wakeups for the reader) than a write per read.
    public func send(movingFrom source: Buffer, eager: Bool = true) {
        if eager, output.count == 0, let fd {
            _ = evbuffer_write(source.raw, fd)   // drains what was written; -1 (EAGAIN, an error): all stays queued
        }
        if source.count > 0 {
            output.moveAll(from: source)
            enableWrite()
        }
    }

    /// Half-close: no more bytes will be sent (the peer reads end-of-stream). Call once output is empty.
    public func shutdownWrite() {
        if let fd { shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Closes with an RST instead of a FIN (SO_LINGER 0), so a peer knows the stream did not end normally.
    public func abort() {
        if let fd {
            var l = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        }
        close()
    }

    /// Frees the bufferevent (closing the socket) and releases the self-reference. Idempotent.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        if let bev { bufferevent_free(bev) }
        bev = nil
        delegate = nil
        selfReference?.release()
        selfReference = nil
    }
}
