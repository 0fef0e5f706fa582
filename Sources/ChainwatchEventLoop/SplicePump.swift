internal import CLibevent
import Glibc

/// One direction of a tunnel moved by splice(2): source socket → pipe → destination socket, all inside the kernel.
/// The bytes are never copied into this process, and each wakeup moves up to a pipe's worth (256 KiB) per call.
///
/// Owns the pipe and two events (readable on the source, writable on the destination); borrows both sockets, whose
/// `Connection`s must neither read the source nor write the destination while the pump runs (their buffers are
/// empty when it starts, and stay so). Backpressure is the pipe: while it holds bytes the destination did not take,
/// the source is not read. Loop thread only.
public final class SplicePump {
    public enum End: Sendable, Equatable {
        /// The source sent FIN and every byte before it reached the destination.
        case endOfStream
        /// A splice failed; `errno` as read on the line after it.
        case error(Int32)
        /// Nothing moved for `idleRelease` milliseconds: the pipe was empty and is released (pipes are a per-user
        /// kernel budget, and a long-lived quiet tunnel should not hold one). The caller reads the source again.
        case idle
    }

    private let loop: EventLoop
    private let source: Int32
    private let destination: Int32
    private var pipeRead: Int32 = -1
    private var pipeWrite: Int32 = -1
    private var readEvent: OpaquePointer?        // event *, EV_READ | EV_PERSIST on source
    private var writeEvent: OpaquePointer?       // event *, EV_WRITE | EV_PERSIST on destination
    private var idleTimer: Timer?
    private var waitingForRead = false
    private var waitingForWrite = false
    private var inPipe = 0
    private var sourceEnded = false
    private var isOpen = true
    private let onEnd: (End) -> Void
    private let onMoved: (Int) -> Void
    /// The loop's cached time (ms since the epoch) at the pump's last wakeup.
    public private(set) var lastActivityMilliseconds: Int64 = 0

    /// Pipe capacity asked for (the kernel's default is 64 KiB; fewer, larger splices cost less per byte).
    static let pipeBytes: Int32 = 256 * 1024
    /// A smaller pipe is not worth it: an unprivileged user past `/proc/sys/fs/pipe-user-pages-soft` gets 8 KiB
    /// pipes, which splice far slower than copying (measured in review, as user nobody with the budget used up:
    /// 780–870 MiB/s spliced against ~2 GiB/s copied).
    static let smallestUsefulPipe: Int32 = 64 * 1024
    /// How long the pump may wait for the source with an empty pipe before it lets the pipe go.
    static let idleReleaseMilliseconds = 2_000
    /// Most source reads per wakeup, so one busy tunnel cannot starve the others on its loop.
    static let roundsPerWakeup = 8

    /// Makes the pipe and events, or returns nil (out of descriptors, say): the caller keeps copying instead.
    /// `onMoved` gets the bytes delivered to the destination, once per wakeup that moved any; `onEnd` is called
    /// once. Both on the loop's thread.
    public init?(loop: EventLoop, from source: Connection, to destination: Connection,
                 onMoved: @escaping (Int) -> Void = { _ in }, onEnd: @escaping (End) -> Void) {
        guard let sourceFD = source.fd, let destinationFD = destination.fd else { return nil }
        self.loop = loop
        self.source = sourceFD
        self.destination = destinationFD
        self.onEnd = onEnd
        self.onMoved = onMoved
        var fds: (Int32, Int32) = (-1, -1)
        let made = withUnsafeMutableBytes(of: &fds) {
            c_libevent_pipe2($0.baseAddress!.assumingMemoryBound(to: Int32.self), O_NONBLOCK | O_CLOEXEC)
        }
        guard made == 0 else { return nil }
        (pipeRead, pipeWrite) = fds
        if fcntl(pipeWrite, c_libevent_F_SETPIPE_SZ, Self.pipeBytes) < 0,
           fcntl(pipeWrite, c_libevent_F_GETPIPE_SZ) < Self.smallestUsefulPipe {
            close()
            return nil
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, sourceFD, Int16(EV_READ | EV_PERSIST), { _, _, ctx in
            Unmanaged<SplicePump>.fromOpaque(ctx!).takeUnretainedValue().pump()
        }, context)
        writeEvent = event_new(loop.base, destinationFD, Int16(EV_WRITE | EV_PERSIST), { _, _, ctx in
            Unmanaged<SplicePump>.fromOpaque(ctx!).takeUnretainedValue().pump()
        }, context)
        guard readEvent != nil, writeEvent != nil else {
            close()
            return nil
        }
    }

    deinit { close() }

    /// Moves what is readable now and waits for more.
    public func start() {
        idleTimer = Timer(loop: loop) { [unowned self] in self.checkIdle() }
        idleTimer?.schedule(milliseconds: Self.idleReleaseMilliseconds)
        pump()
    }

    private func pump() {
        guard isOpen else { return }
        lastActivityMilliseconds = loop.cachedMilliseconds
        let flags = c_libevent_SPLICE_F_MOVE | c_libevent_SPLICE_F_NONBLOCK
        var moved = 0
        defer { if moved > 0 { onMoved(moved) } }
        for _ in 0..<Self.roundsPerWakeup {
            // Empty the pipe first: the source is read only into an empty pipe, so EAGAIN there means "no data".
            while inPipe > 0 {
                let n = c_libevent_splice(pipeRead, destination, inPipe, flags)
                if n > 0 {
                    inPipe -= n
                    moved += n
                    continue
                }
                let e = errno
                if n < 0 && (e == EAGAIN || e == EINTR) {
                    wait(forWrite: true)
                    return
                }
                finish(.error(n == 0 ? EPIPE : e))
                return
            }
            if sourceEnded {
                finish(.endOfStream)
                return
            }
            let n = c_libevent_splice(source, pipeWrite, Int(Self.pipeBytes), flags)
            if n > 0 {
                inPipe = n
            } else if n == 0 {
                sourceEnded = true
            } else {
                let e = errno
                if e == EAGAIN || e == EINTR {
                    wait(forWrite: false)
                } else {
                    finish(.error(e))
                }
                return
            }
        }
        if inPipe > 0 { wait(forWrite: true) } else { wait(forWrite: false) }
    }

    /// Arms the one event the pump waits for: the destination writable (the pipe holds bytes) or the source readable.
    private func wait(forWrite: Bool) {
        guard let readEvent, let writeEvent else { return }
        if forWrite {
            if waitingForRead { event_del(readEvent); waitingForRead = false }
            if !waitingForWrite { event_add(writeEvent, nil); waitingForWrite = true }
        } else {
            if waitingForWrite { event_del(writeEvent); waitingForWrite = false }
            if !waitingForRead { event_add(readEvent, nil); waitingForRead = true }
        }
    }

    /// The idle clock is the last wakeup's time, so busy wakeups cost no timer work; this runs every
    /// `idleReleaseMilliseconds` at most, and lets the pipe go once the source has been quiet that long.
    private func checkIdle() {
        guard isOpen else { return }
        let quiet = Int(loop.cachedMilliseconds - lastActivityMilliseconds)
        if waitingForRead, inPipe == 0, quiet >= Self.idleReleaseMilliseconds {
            finish(.idle)
        } else {
            idleTimer?.schedule(milliseconds: max(1, Self.idleReleaseMilliseconds - (waitingForRead ? quiet : 0)))
        }
    }

    private func finish(_ end: End) {
        close()
        onEnd(end)
    }

    /// Frees the events and the pipe (bytes still in it are dropped). Idempotent; does not call `onEnd`.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        readEvent = nil
        writeEvent = nil
        idleTimer?.cancel()
        idleTimer = nil
        if pipeRead >= 0 { Glibc.close(pipeRead) }
        if pipeWrite >= 0 { Glibc.close(pipeWrite) }
        pipeRead = -1
        pipeWrite = -1
    }
}
