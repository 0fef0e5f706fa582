import ChainwatchProxy
import Foundation
import Glibc
import Logging
import Testing

/// The alert writer while the disk is full (`/dev/full`: every write fails with ENOSPC): what it keeps is bounded in
/// bytes as well as lines, the oldest lines go first, and submitting stays cheap. And on a FIFO whose reader stopped
/// reading or is missing, and on a device, whose mode it must not change.
@Suite struct AlertWriterTests {
    /// A new directory of the test's own under the temporary directory (for a FIFO or a device node).
    static func privateDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("alertwriter-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        return directory
    }

    @Test func aFullDiskBacklogIsBoundedInBytes() throws {
        let writer = try AlertWriter(path: "/dev/full", logger: Logger(label: "test"), maxPendingBytes: 1 << 20)
        defer { writer.close(timeout: 0.5) }
        let line = String(repeating: "x", count: 100_000)
        for i in 0..<100 { writer.submit("\(i) " + line) }   // 10 MB offered
        Thread.sleep(forTimeInterval: 0.3)                    // the writer has tried, failed and put them back
        let pending = writer.pending
        #expect(pending.bytes <= 1 << 20, "\(pending)")
        #expect(pending.lines >= 5 && pending.lines <= 11, "\(pending)")
    }

    /// At close, lines the file still refuses are counted (they go to standard error) after a few seconds of
    /// retries, within `close`'s 5 s; a file that takes them leaves none.
    @Test func linesAFullDiskRefusesAtCloseAreCountedNotDropped() throws {
        let writer = try AlertWriter(path: "/dev/full", logger: Logger(label: "test"))
        writer.submit("{\"n\":1}")
        writer.submit("{\"n\":2}")
        let started = Date()
        writer.close(timeout: 5)
        let took = Date().timeIntervalSince(started)
        #expect(writer.unwrittenLines == 2)
        #expect(took >= Double(AlertWriter.closingRetries) * AlertWriter.closingRetryInterval * 0.9 && took < 5, "\(took) s")

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("alerts-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fine = try AlertWriter(path: path, logger: Logger(label: "test"))
        fine.submit("{\"n\":1}")
        fine.close(timeout: 5)
        #expect(fine.unwrittenLines == 0)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "{\"n\":1}\n")
    }

    @Test func manyShortLinesAreBoundedInLinesCheaply() throws {
        let writer = try AlertWriter(path: "/dev/full", logger: Logger(label: "test"))
        defer { writer.close(timeout: 0.5) }
        let started = Date()
        for i in 0..<(AlertWriter.maxPending + 50_000) { writer.submit("{\"n\":\(i)}") }
        #expect(Date().timeIntervalSince(started) < 5, "submitting past the bound must not copy the queue per line")
        #expect(writer.pending.lines <= AlertWriter.maxPending)
    }

    /// A FIFO whose reader stopped reading blocks the writer thread in `write`: at close its lines (the write it was
    /// in, and the queue) go to standard error from `close` itself, counted, within the timeout. They were lost, with
    /// exit status 0 (`--alert-log -` into a stalled pipe: 24 of 40 lines, an operator review).
    @Test func aWriterBlockedOnAStalledReaderGivesItsLinesToStandardErrorAtClose() throws {
        let directory = try Self.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/alerts"
        try #require(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { Glibc.close(reader) }
        _ = fcntl(reader, 1031, 4_096)   // F_SETPIPE_SZ (not in Glibc's Swift overlay): a small pipe, little for standard error
        let writer = try AlertWriter(path: fifo, logger: Logger(label: "test"))
        let line = String(repeating: "x", count: 500)
        for i in 0..<30 { writer.submit("{\"n\":\(i),\"pad\":\"\(line)\"}") }   // 15 KB: more than the pipe holds
        Thread.sleep(forTimeInterval: 0.3)
        #expect(writer.pending.lines > 0, "the lines of a write that has not finished are pending")
        let started = Date()
        writer.close(timeout: 0.5)
        let took = Date().timeIntervalSince(started)
        #expect(took < 2, "\(took) s")
        #expect(writer.unwrittenLines >= 15, "\(writer.unwrittenLines) lines counted for standard error")
        // Let the abandoned writer finish its write, so it leaves nothing blocked behind the test.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let until = Date().addingTimeInterval(1)
        while Date() < until { if read(reader, &buffer, buffer.count) <= 0 { Thread.sleep(forTimeInterval: 0.02) } }
    }

    /// A close whose timeout ends while the writer is between its retries of a full disk (not stuck, asleep) takes
    /// the lines itself: all counted, none twice as none was written.
    @Test func aCloseThatTimesOutBetweenRetriesCountsEveryLine() throws {
        let writer = try AlertWriter(path: "/dev/full", logger: Logger(label: "test"))
        writer.submit("{\"n\":1}")
        writer.submit("{\"n\":2}")
        Thread.sleep(forTimeInterval: 0.1)   // the writer has failed once and sleeps before its next try
        let started = Date()
        writer.close(timeout: 0.3)
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(writer.unwrittenLines == 2)
        #expect(writer.pending.lines == 0)
    }

    /// A FIFO with no reader is refused at once with the reason; opening it waited for a reader, start-up hung
    /// without a word.
    @Test func aFIFOWithNoReaderIsRefusedNotWaitedFor() throws {
        let directory = try Self.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/alerts"
        try #require(mkfifo(fifo, 0o600) == 0)
        #expect { try AlertWriter(path: fifo, logger: Logger(label: "test")) } throws: { error in
            "\(error)".contains("it is a FIFO with no reader")
        }
    }

    /// Group and other lose write on a regular log file, never on a device: run as root with `--alert-log
    /// /dev/null`, the old code made the system's /dev/null 0644 (and these tests /dev/full). A device node of the
    /// test's own (mknod: the tests run as root, as CI does).
    @Test func aDeviceKeepsItsModeARegularFileLosesGroupWrite() throws {
        let directory = try Self.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let device = directory + "/null"
        try #require(mknod(device, S_IFCHR | 0o666, dev_t(1 << 8 | 3)) == 0, "mknod needs root: \(String(cString: strerror(errno)))")
        try #require(chmod(device, 0o666) == 0)
        let onDevice = try AlertWriter(path: device, logger: Logger(label: "test"))
        onDevice.close(timeout: 1)
        var info = stat()
        try #require(stat(device, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o666)

        let file = directory + "/alerts.jsonl"
        let created = creat(file, 0o666)
        try #require(created >= 0)
        Glibc.close(created)
        try #require(chmod(file, 0o666) == 0)
        let onFile = try AlertWriter(path: file, logger: Logger(label: "test"))
        onFile.close(timeout: 1)
        try #require(stat(file, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o644)
    }
}

