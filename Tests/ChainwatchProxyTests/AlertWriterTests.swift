import ChainwatchProxy
import Foundation
import Logging
import Testing

/// The alert writer while the disk is full (`/dev/full`: every write fails with ENOSPC): what it keeps is bounded in
/// bytes as well as lines, the oldest lines go first, and submitting stays cheap.
@Suite struct AlertWriterTests {
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
}
