import ChainwatchCore
import Foundation
import Logging

/// Writes alert lines (JSON, one per line) to a file from its own thread, so no event loop ever waits on a disk.
/// `submit` is non-blocking from any thread. Lines reach the file within milliseconds; a failing write (full disk)
/// is reported on stderr and retried, and lines are kept (up to `maxPending` lines and `maxPendingBytes`) until it
/// succeeds; lines dropped past that (the oldest first) are counted, reported, and recorded in the log itself once
/// writing works again. At `close` the file is tried for a few seconds more; lines it still cannot take are written
/// to standard error, after an error that says so, and counted (`unwrittenAtClose`): no finding is lost silently.
public final class AlertWriter: @unchecked Sendable {
    /// Lines kept in memory while the file cannot be written.
    public static let maxPending = 100_000
    /// Bytes kept in memory while the file cannot be written (600 long lines once held 250 MiB under the line bound).
    public let maxPendingBytes: Int

    public let path: String
    /// What the file is, in messages: `alert log`, `access log`.
    public let name: String
    private let logger: Logger
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var queue: [String] = []
    private var queueBytes = 0
    private var reopenRequested = false
    private var stopping = false
    private var droppedSinceReport = 0
    private var writtenTotal = 0
    private var droppedTotal = 0
    private var failedWrites = 0
    private var unwrittenAtClose = 0
    private var drained = true
    /// The lines the writer thread has taken from the queue and is writing (a write to a pipe whose reader stopped
    /// reading, or an open of a FIFO, can block it): still pending, and at a `close` that times out, written to
    /// standard error with the queue.
    private var inFlight: [String] = []
    /// Set when `close` gave up on the writer thread: whatever it does after is not counted.
    private var abandoned = false
    /// Set by the writer once it has taken the last lines and is writing them (to the file's end, or to standard
    /// error): `close` then waits for it rather than taking lines it no longer has (and counting none).
    private var finishing = false
    // Writer thread only:
    private var fd: Int32 = -1
    private var thread: Thread?
    private var failing = false

    /// Opens (creating, appending) `path`; `-` means standard output.
    public init(path: String, logger: Logger, maxPendingBytes: Int = 64 * 1024 * 1024, name: String = "alert log") throws {
        self.path = path
        self.name = name
        self.maxPendingBytes = maxPendingBytes
        self.logger = logger
        fd = try Self.open(path, name: name)
        // A file size limit (`ulimit -f`, LimitFSIZE=) then fails a write with EFBIG, reported and retried like a full
        // disk, instead of killing the proxy.
        signal(SIGXFSZ, SIG_IGN)
        let thread = Thread { [self] in run() }
        thread.name = "chainwatch-alerts"
        self.thread = thread
        thread.start()
    }

    private static func open(_ path: String, name: String) throws -> Int32 {
        if path == "-" { return dup(STDOUT_FILENO) }
        // Not through a symbolic link (at start or at a SIGUSR1 reopen): whoever can plant one in the log's directory
        // would choose which file the proxy appends to. Not waiting for a FIFO's reader (O_NONBLOCK: ENXIO when there is
        // none), which blocked start-up without a word, or the writer at a reopen; writes block again once open.
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o640)
        guard fd >= 0 else {
            let code = errno
            throw AlertLogError(name: name, path: path, message: code == ELOOP ? "it is a symbolic link (refused: give the file itself, or - for standard output)"
                                                                   : code == ENXIO ? "it is a FIFO with no reader (start the reader first)"
                                                                   : String(cString: strerror(code)))
        }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        // A regular file that others may write could hold forged lines: group and other lose write. Only a regular
        // file: a device (`--alert-log /dev/null` as root) is the system's, not the log's.
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o022 != 0 {
            _ = fchmod(fd, info.st_mode & 0o7755)
        }
        return fd
    }

    /// Whether `other` writes to the same file (device and inode; standard output for both `-`), as opened now.
    public func isSameFile(as other: AlertWriter) -> Bool {
        let mine = identity, theirs = other.identity
        return mine != nil && mine == theirs
    }

    /// The open file's device and inode (read before the writer thread reopens anything: at start).
    private var identity: [UInt64]? {
        condition.lock(); defer { condition.unlock() }
        var info = stat()
        guard fd >= 0, fstat(fd, &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }

    public struct AlertLogError: Error, CustomStringConvertible {
        public var name: String, path: String, message: String
        public var description: String { "cannot open \(name) \(path): \(message)" }
    }

    /// Queues one alert line (without its newline). Never blocks on I/O.
    public func submit(_ line: String) {
        condition.lock()
        queue.append(line)
        queueBytes += line.utf8.count + 1
        trimQueue()
        drained = false
        condition.signal()
        condition.unlock()
    }

    /// Lines and bytes waiting to be written, those being written included.
    public var pending: (lines: Int, bytes: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (queue.count + inFlight.count, queueBytes + inFlight.reduce(0) { $0 + $1.utf8.count + 1 })
    }

    /// Drops the oldest lines while the queue is over either bound, a tenth at a time (the loops call `submit`: one
    /// `removeFirst` per line on a 100 000-line queue was a copy of the queue per alert). Caller holds `condition`.
    private func trimQueue() {
        guard queue.count > Self.maxPending || queueBytes > maxPendingBytes else { return }
        var drop = 0, freed = 0
        let chunk = max(1, queue.count / 10)
        while drop < queue.count - 1, drop < chunk || queue.count - drop > Self.maxPending || queueBytes - freed > maxPendingBytes {
            freed += queue[drop].utf8.count + 1
            drop += 1
        }
        queue.removeFirst(drop)
        queueBytes -= freed
        droppedSinceReport += drop
        droppedTotal += drop
    }

    /// Reopens the file by its path (after log rotation moved it). Safe from any thread, e.g. a SIGUSR1 handler.
    public func reopen() {
        condition.lock()
        reopenRequested = true
        condition.signal()
        condition.unlock()
    }

    /// Lines written so far.
    public var written: Int {
        condition.lock(); defer { condition.unlock() }
        return writtenTotal
    }

    /// Lines dropped because the backlog was full while the file could not be written, and writes that failed.
    public var failures: (dropped: Int, failedWrites: Int) {
        condition.lock(); defer { condition.unlock() }
        return (droppedTotal, failedWrites)
    }

    /// Lines the file could not take by the time it was closed, written to standard error instead.
    public var unwrittenLines: Int {
        condition.lock(); defer { condition.unlock() }
        return unwrittenAtClose
    }

    /// Tries to write the lines still queued at `close` while the file fails, once a `closingRetryInterval`, this
    /// many times, before they go to standard error (well within `close`'s 5 s).
    public static let closingRetries = 3
    public static let closingRetryInterval: TimeInterval = 1

    /// Writes everything queued, syncs the file and stops the thread. Waits at most `timeout` seconds; a writer still
    /// busy then (blocked in a write to a pipe whose reader stopped reading, or in an open) is left, and the lines it
    /// holds and the queue's go to standard error from here, counted in `unwrittenLines` (the lines of its write
    /// that had reached the file already appear twice: none is lost). A writer already writing its last lines (to
    /// standard error, when the file refused them) gets 30 s more to finish them itself.
    public func close(timeout: TimeInterval = 5) {
        condition.lock()
        stopping = true
        condition.signal()
        let deadline = Date().addingTimeInterval(timeout)
        while thread != nil && Date() < deadline { _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.05))) }
        // A writer past its last take is writing to standard error, or syncing: the last resort, given 30 s more.
        let last = Date().addingTimeInterval(30)
        while thread != nil && finishing && Date() < last { _ = condition.wait(until: min(last, Date().addingTimeInterval(0.05))) }
        var left: [String] = []
        if thread != nil && !finishing {
            abandoned = true
            left = inFlight + queue
            unwrittenAtClose += left.count
            inFlight = []
            queue.removeAll()
            queueBytes = 0
        }
        condition.unlock()
        if !left.isEmpty {
            logger.error("\(name) \(path): the writer did not finish within \(Int(timeout)) s (a reader that stopped reading?)")
            writeToStandardError(left)
        }
    }

    /// How long lines after a written one gather before the next write.
    static let coalescingInterval: TimeInterval = 0.01

    private func run() {
        var closingTries = 0
        while true {
            condition.lock()
            while queue.isEmpty && !reopenRequested && !stopping { condition.wait() }
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            queueBytes = 0
            let reopenNow = reopenRequested
            reopenRequested = false
            let dropped = droppedSinceReport
            droppedSinceReport = 0
            let stop = stopping
            inFlight = batch
            condition.unlock()

            if reopenNow { reopenFile() }
            var lines = batch
            if dropped > 0 {
                logger.error("\(name) \(path): \(dropped) line(s) dropped while it could not be written")
                var w = JSONWriter()
                w.field("@timestamp", UnixTime(seconds: Int64(Date().timeIntervalSince1970)).rfc3339)
                w.object("ecs") { $0.field("version", Observer.ecsVersion) }
                w.object("event") { $0.field("kind", "pipeline_error") }
                w.object("chainwatch") { $0.field("dropped_alerts", dropped) }
                lines.insert(w.text, at: 0)
            }
            let unwritten = write(lines)
            condition.lock()
            if abandoned { condition.unlock(); return }   // `close` took the lines and wrote them elsewhere
            inFlight = []
            writtenTotal += lines.count - unwritten.count
            if !unwritten.isEmpty {
                failedWrites += 1
                queue.insert(contentsOf: unwritten, at: 0)
                queueBytes += unwritten.reduce(0) { $0 + $1.utf8.count + 1 }
                trimQueue()
            }
            drained = queue.isEmpty
            if stop && !queue.isEmpty && failing { closingTries += 1 }
            let finished = stop && (queue.isEmpty || closingTries > Self.closingRetries)
            let left = finished ? queue : []
            if finished {
                unwrittenAtClose += left.count
                finishing = true
                queue.removeAll()
                queueBytes = 0
            }
            condition.unlock()
            if finished {
                if !left.isEmpty { writeToStandardError(left) }
                if fd >= 0 { fsync(fd); Glibc.close(fd) }
                condition.lock()
                thread = nil
                condition.broadcast()
                condition.unlock()
                return
            }
            if !unwritten.isEmpty || (stop && !drained) {
                Thread.sleep(forTimeInterval: stop ? Self.closingRetryInterval : 1)   // full disk: retry each second
            } else if !stop, !batch.isEmpty {
                // A line is written the moment it wakes the writer; the lines after it wait up to this long and go
                // out together. A flagged upstream's storm then costs one wake-up and one write per interval, not
                // one per line (each wake-up a context switch on the loops' cores).
                Thread.sleep(forTimeInterval: Self.coalescingInterval)
            }
        }
    }

    /// The last resort at close for lines the file would not take: an error naming the file and the count, then the
    /// lines themselves, whole, on standard error (a service's journal keeps them).
    private func writeToStandardError(_ lines: [String]) {
        logger.error("\(name) \(path): \(lines.count) line(s) could not be written before exit; they follow on standard error")
        var text = Array((lines.joined(separator: "\n") + "\n").utf8)[...]
        while !text.isEmpty {
            let n = text.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            text = text.dropFirst(n)
        }
    }

    /// Writes lines; returns the ones that could not be written.
    private func write(_ lines: [String]) -> [String] {
        guard !lines.isEmpty else { return [] }
        var text = lines.joined(separator: "\n")
        text += "\n"
        var bytes = Array(text.utf8)[...]
        let start = lseek(fd, 0, SEEK_END)   // where this write begins (appending); -1 for a pipe
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let message = String(cString: strerror(n < 0 ? errno : EIO))
                if !failing { logger.error("\(name) \(path): write failed: \(message); keeping lines in memory and retrying") }
                failing = true
                return unwrittenLines(lines, afterBytes: text.utf8.count - bytes.count, fileOffset: start)
            }
            bytes = bytes.dropFirst(n)
        }
        if failing { logger.notice("\(name) \(path): writing again") }
        failing = false
        return []
    }

    /// The lines a failed write left to write, after `written` bytes of them reached the file at `fileOffset`. A
    /// line written in part is cut off the file again, so the file ends at a line's end and the whole line is
    /// written later, to this file or, after a rotation, to the next: a line split across the two files was
    /// two broken records. Where the file cannot be cut (a pipe), the rest of the line is kept as its own record.
    private func unwrittenLines(_ lines: [String], afterBytes written: Int, fileOffset: Int) -> [String] {
        var offset = 0
        for (i, line) in lines.enumerated() {
            let end = offset + line.utf8.count + 1
            if end > written {
                guard offset < written else { return Array(lines[i...]) }
                if fileOffset >= 0, ftruncate(fd, off_t(fileOffset + offset)) == 0 { return Array(lines[i...]) }
                let tail = String(decoding: Array(line.utf8).dropFirst(written - offset), as: UTF8.self)
                return [tail] + lines[(i + 1)...]
            }
            offset = end
        }
        return []
    }

    private func reopenFile() {
        guard path != "-" else { return }
        do {
            let newFD = try Self.open(path, name: name)
            if fd >= 0 { Glibc.close(fd) }
            fd = newFD
            logger.notice("\(name) \(path) reopened")
        } catch {
            logger.error("\(error); still writing to the old file")
        }
    }
}
