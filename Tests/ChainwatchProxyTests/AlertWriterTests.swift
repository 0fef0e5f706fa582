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

    @Test func manyShortLinesAreBoundedInLinesCheaply() throws {
        let writer = try AlertWriter(path: "/dev/full", logger: Logger(label: "test"))
        defer { writer.close(timeout: 0.5) }
        let started = Date()
        for i in 0..<(AlertWriter.maxPending + 50_000) { writer.submit("{\"n\":\(i)}") }
        #expect(Date().timeIntervalSince(started) < 5, "submitting past the bound must not copy the queue per line")
        #expect(writer.pending.lines <= AlertWriter.maxPending)
    }
}
