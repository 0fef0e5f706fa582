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
}

/// Receives a connection's callbacks on its loop's thread.
public protocol ConnectionDelegate: AnyObject {
    /// New bytes are in `connection.input`.
    func connectionDidRead(_ connection: Connection)
    /// `connection.output` drained to its low watermark.
    func connectionDidDrain(_ connection: Connection)
    func connection(_ connection: Connection, didReceive event: ConnectionEvent)
}

/// A non-blocking TCP socket on a loop with an input and an output `evbuffer`. Owns the socket, both buffers and
/// its two persistent events; `close()` (or deinit) frees them. While open it keeps itself alive (the events carry a
/// retained reference), so the owner can drop it only after `close()`. Loop thread only.
///
/// Why not a `bufferevent`: libevent 2.1's socket bufferevent asks `ioctl(FIONREAD)` before every read and reads at
/// most 4 KiB per read event (`EVBUFFER_MAX_READ`). Here every read is one `readv` straight into the input's chains,
/// sized by what the last read got (16 KiB up to 256 KiB), and the events are armed only while they have work:
/// reading while enabled, writing while bytes are queued (or a connect is in flight).
public final class Connection {
    private let base: OpaquePointer              // event_base *, borrowed from the loop
    private var socket: Int32 = -1
    private var readEvent: OpaquePointer?        // event *, EV_READ | EV_PERSIST
    private var writeEvent: OpaquePointer?       // event *, EV_WRITE | EV_PERSIST
    private let inputRaw: OpaquePointer          // evbuffer *
    private let outputRaw: OpaquePointer         // evbuffer *
    public var delegate: ConnectionDelegate?
    public private(set) var isOpen = true
    public private(set) var isReading = false
    private var isWriting = false
    private var isConnecting = false
    /// The local port of an outbound connection, while `OutboundPorts` tracks them.
    private var outboundPort: UInt16?
    private var lowWatermark = 0
    private var readSize = Connection.smallestRead
    private var selfReference: Unmanaged<Connection>?

    /// First read size: fits one 16 KiB evbuffer chain with its header (a TLS record is at most 16 KiB + 256).
    static let smallestRead = 16 * 1024 - 128
    /// A read that fills its size doubles the next one, up to this.
    static let largestRead = 256 * 1024

    /// Wraps an accepted, non-blocking socket; takes ownership of `fd`. TCP_NODELAY comes from the listener.
    public init(loop: EventLoop, fd: Int32) throws(EventLoopError) {
        base = loop.base
        do {
            (inputRaw, outputRaw) = try Self.makeBuffers()
        } catch {
            Glibc.close(fd)
            throw error
        }
        try attach(fd)   // on failure deinit frees what was made and closes fd
        selfReference = Unmanaged.passRetained(self)
    }

    /// A connection not yet connected; call `connect(to:)`.
    public init(loop: EventLoop) throws(EventLoopError) {
        base = loop.base
        (inputRaw, outputRaw) = try Self.makeBuffers()
        selfReference = Unmanaged.passRetained(self)
    }

    private static func makeBuffers() throws(EventLoopError) -> (OpaquePointer, OpaquePointer) {
        guard let input = evbuffer_new() else { throw .fromErrno("evbuffer_new") }
        guard let output = evbuffer_new() else {
            let error = EventLoopError.fromErrno("evbuffer_new")
            evbuffer_free(input)
            throw error
        }
        return (input, output)
    }

    private func attach(_ fd: Int32) throws(EventLoopError) {
        socket = fd
        let context = Unmanaged.passUnretained(self).toOpaque()   // the retained selfReference keeps it valid
        readEvent = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { _, _, ctx in
            Unmanaged<Connection>.fromOpaque(ctx!).takeUnretainedValue().readable()
        }, context)
        writeEvent = event_new(base, fd, Int16(EV_WRITE | EV_PERSIST), { _, _, ctx in
            Unmanaged<Connection>.fromOpaque(ctx!).takeUnretainedValue().writable()
        }, context)
        guard readEvent != nil, writeEvent != nil else { throw .fromErrno("event_new") }
    }

    deinit {
        freeResources()
        evbuffer_free(inputRaw)
        evbuffer_free(outputRaw)
    }

    public var fd: Int32? { socket >= 0 ? socket : nil }
    public var input: Buffer { Buffer(raw: inputRaw) }
    public var output: Buffer { Buffer(raw: outputRaw) }

    // MARK: Reading

    private func readable() {
        let result = readOnce()
        if result > 0 { delegate?.connectionDidRead(self) }
        guard isOpen else { return }
        if result == 0 {
            disableRead()   // as a bufferevent does: an enableRead later reads end-of-stream again
            delegate?.connection(self, didReceive: .endOfStream)
        } else if result < 0, result != -Int(EAGAIN) {
            disableRead()
            delegate?.connection(self, didReceive: .error(Int32(-result)))
        }
    }

    /// One `readv` into the input's own chains (no copy). Returns the byte count, 0 at end of stream, or `-errno`.
    private func readOnce() -> Int {
        var vectors = (iovec(), iovec())
        return withUnsafeMutableBytes(of: &vectors) { raw -> Int in
            let v = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
            let n = evbuffer_reserve_space(inputRaw, readSize, v, 2)
            guard n > 0 else { return -Int(ENOMEM) }
            let got = readv(socket, v, n)
            guard got > 0 else {
                let e = errno
                evbuffer_commit_space(inputRaw, v, 0)
                if got == 0 { return 0 }
                return e == EWOULDBLOCK || e == EINTR ? -Int(EAGAIN) : -Int(e)
            }
            var left = got
            var used: Int32 = 0
            while left > 0 {   // commit only the vectors that got bytes, each to its length
                let i = Int(used)
                v[i].iov_len = min(left, v[i].iov_len)
                left -= v[i].iov_len
                used += 1
            }
            evbuffer_commit_space(inputRaw, v, used)
            readSize = got >= readSize ? min(readSize * 2, Self.largestRead) : max(Self.smallestRead, min(readSize, got * 2))
            return got
        }
    }

    /// Reads now, without waiting for the loop to report the socket readable (for a socket whose peer has most
    /// likely sent already, such as one accepted after TCP_DEFER_ACCEPT). Delivers like a read event would;
    /// nothing happens when there is nothing to read.
    public func readNow() {
        guard isOpen, socket >= 0 else { return }
        readable()
    }

    public func enableRead() {
        guard !isReading, let readEvent else { return }
        isReading = true
        event_add(readEvent, nil)
    }

    public func disableRead() {
        guard isReading, let readEvent else { return }
        isReading = false
        event_del(readEvent)
    }

    public func enableReadWrite() {
        enableRead()
        enableWrite()
    }

    // MARK: Writing

    /// From now on, whatever is added to `output` directly (`output.append`, `Buffer.move`) is written without being
    /// asked, as a bufferevent would. `write` and `send(movingFrom:)` need none of this: they arm the write event
    /// themselves when they queue, so the relay pays no buffer callback per move.
    public func enableWrite() {
        if !watchesOutput {
            watchesOutput = true
            evbuffer_add_cb(outputRaw, { _, info, ctx in
                guard info!.pointee.n_added > 0 else { return }
                Unmanaged<Connection>.fromOpaque(ctx!).takeUnretainedValue().armWrite()
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        armWrite()
    }
    private var watchesOutput = false

    /// Arms the write event for bytes put in `output` by other means than `write`/`send`.
    func queueWrite() { armWrite() }

    /// Arms the write event while bytes are queued (or a connect is in flight).
    private func armWrite() {
        guard !isWriting, let writeEvent, evbuffer_get_length(outputRaw) > 0 || isConnecting else { return }
        isWriting = true
        event_add(writeEvent, nil)
    }

    private func disableWrite() {
        guard isWriting, let writeEvent else { return }
        isWriting = false
        event_del(writeEvent)
    }

    private func writable() {
        if isConnecting {
            finishConnect()
            return
        }
        if evbuffer_get_length(outputRaw) > 0 {
            if evbuffer_write(outputRaw, socket) < 0 {
                let e = errno
                if e != EAGAIN && e != EWOULDBLOCK && e != EINTR {
                    disableWrite()
                    delegate?.connection(self, didReceive: .error(e))
                }
                return
            }
        }
        let left = evbuffer_get_length(outputRaw)
        if left == 0 { disableWrite() }
        if left <= lowWatermark { delegate?.connectionDidDrain(self) }
    }

    /// Write-side low watermark: `connectionDidDrain` fires when output falls to `low` bytes.
    public func setWriteLowWatermark(_ low: Int) { lowWatermark = low }

    /// Sends `bytes`: straight to the socket when nothing is queued before them (see `send(movingFrom:)`), the rest
    /// queued.
    public func write(_ bytes: [UInt8]) {
        var sent = 0
        if evbuffer_get_length(outputRaw) == 0, socket >= 0, !isConnecting {
            sent = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if sent < 0 { sent = 0 }
        }
        guard sent < bytes.count else { return }
        bytes.withUnsafeBytes { _ = evbuffer_add(outputRaw, $0.baseAddress! + sent, $0.count - sent) }
        armWrite()
    }

    /// Moves every byte of `source` to this connection: when nothing is queued before them, one `writev` straight
    /// from `source`'s chains to the socket (no copy, no waiting a loop turn for writability, no epoll change to
    /// arm and disarm the write event); whatever the socket does not take is queued in `output` (zero-copy) and
    /// written when the socket is writable, which also reports any socket error.
    ///
    /// With `eager` false the bytes are only queued: for bulk data, where batching reads into larger writes measured
    /// cheaper per byte (and fewer wakeups for the reader) than a write per read.
    public func send(movingFrom source: Buffer, eager: Bool = true) {
        if eager, evbuffer_get_length(outputRaw) == 0, socket >= 0, !isConnecting {
            _ = evbuffer_write(source.raw, socket)   // drains what was written; -1 (EAGAIN, an error): all stays queued
        }
        if source.count > 0 {
            evbuffer_add_buffer(outputRaw, source.raw)
            armWrite()
        }
    }

    // MARK: Connecting and closing

    /// Starts a non-blocking connect; the delegate hears `.connected` or `.error`. On `false`, `errno` says why.
    public func connect(to address: SocketAddress) -> Bool {
        guard socket < 0 else { errno = EISCONN; return false }
        let fd = Socket.stream(family: address.family)
        guard fd >= 0 else { return false }
        Socket.set(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)   // before connect: the first segment goes without Nagle's wait
        do { try attach(fd) } catch { errno = error.errno; return false }
        let r = address.withSockaddr { sa, len in Glibc.connect(fd, sa, len) }
        if r != 0 && errno != EINPROGRESS { return false }
        outboundPort = OutboundPorts.opened(fd)
        isConnecting = true
        armWrite()
        return true
    }

    private func finishConnect() {
        isConnecting = false
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &length) != 0 { error = errno }
        if evbuffer_get_length(outputRaw) == 0 || error != 0 { disableWrite() }
        delegate?.connection(self, didReceive: error == 0 ? .connected : .error(error))
    }

    /// Half-close: no more bytes will be sent (the peer reads end-of-stream). Call once output is empty.
    public func shutdownWrite() {
        if socket >= 0 { shutdown(socket, Int32(SHUT_WR)) }
    }

    /// Closes with an RST instead of a FIN (SO_LINGER 0), so a peer knows the stream did not end normally.
    public func abort() {
        if socket >= 0 {
            var l = linger(l_onoff: 1, l_linger: 0)
            setsockopt(socket, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        }
        close()
    }

    /// Frees the events, closes the socket, drops queued bytes and releases the self-reference. Idempotent.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        freeResources()
        evbuffer_drain(inputRaw, evbuffer_get_length(inputRaw))
        evbuffer_drain(outputRaw, evbuffer_get_length(outputRaw))
        delegate = nil
        let reference = selfReference
        selfReference = nil
        reference?.release()
    }

    private func freeResources() {
        if let readEvent { event_free(readEvent) }   // event_free deletes a pending event first
        if let writeEvent { event_free(writeEvent) }
        readEvent = nil
        writeEvent = nil
        isReading = false
        isWriting = false
        if socket >= 0 { Glibc.close(socket) }
        socket = -1
        if let port = outboundPort {
            outboundPort = nil
            OutboundPorts.closed(port)
        }
    }
}

extension Connection {
    /// Moves the first `count` bytes of `source` to this connection's output (zero-copy) and writes them when the
    /// socket is writable; `count` equal to everything in `source` is `send(movingFrom:eager:)`.
    public func send(_ count: Int, movingFrom source: Buffer, eager: Bool = true) {
        if count >= source.count { return send(movingFrom: source, eager: eager) }
        output.move(count, from: source)
        queueWrite()
    }
}

/// The system's words for an `errno` value, lowercased as they read in a sentence (`connection refused`).
public func describeErrno(_ code: Int32) -> String {
    String(cString: strerror(code)).lowercased()
}
