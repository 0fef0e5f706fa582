import ChainwatchProcess
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What an interrupted bench (SIGINT, SIGTERM) undoes before it dies of the signal as it would have (130, 143): the
/// processes it started, stopped by their PIDs (SIGTERM, then SIGKILL after 5 s), its nftables table, and its
/// temporary directory (the bench CA's key is in it). Without it a SIGTERM to the bench alone (a supervisor's, a CI
/// runner's) left the proxy it started running under init, holding its listener and admin port, and the directory
/// behind. The runs measured so far are not reported: it says so.
///
/// One for the process, installed while a `Runner` runs (`install`, `uninstall`). Thread-safe: the signal's cleanup
/// runs on a dispatch queue while the bench's threads go on.
final class BenchInterruption: @unchecked Sendable {   // its state is under `lock`
    static let current = BenchInterruption()

    private let lock = NSLock()
    private var pids: [Int32] = []
    private var tables: [String] = []
    private var directory: String?
    private var signals: SignalCleanup?
    /// Set at the first signal: a child started after it (the runner goes on meanwhile) is stopped at once.
    private var interrupted = false

    /// From now on SIGINT and SIGTERM undo what is registered, then end the bench. `directory`: the run's temporary
    /// directory, removed then unless `keep`.
    func install(directory: String, keep: Bool) {
        lock.withLock {
            self.directory = keep ? nil : directory
            if signals == nil { signals = SignalCleanup { [self] in undo() } }
        }
    }

    /// The run is over and has undone it all itself: the signals have their default dispositions again.
    func uninstall() {
        lock.withLock {
            signals?.cancel()
            signals = nil
            pids = []
            tables = []
            directory = nil
        }
    }

    func started(_ pid: Int32) {
        let late = lock.withLock { () -> Bool in
            pids.append(pid)
            return interrupted
        }
        if late { kill(pid, SIGTERM) }
    }
    func stopped(_ pid: Int32) { lock.withLock { pids.removeAll { $0 == pid } } }
    func tableAdded(_ table: String) { lock.withLock { tables.append(table) } }
    func tableRemoved(_ table: String) { lock.withLock { tables.removeAll { $0 == table } } }

    private func undo() {
        let (pids, tables, directory) = lock.withLock { () -> ([Int32], [String], String?) in
            interrupted = true
            return (self.pids, self.tables, self.directory)
        }
        FileHandle.standardError.write(Data("chainwatch-bench: interrupted: stopping what it started (\(pids.count) process(es)); no report\n".utf8))
        for table in tables {
            var nft = try? Spawned("nft", ["delete", "table", "ip", table], outputPath: "/dev/null")
            _ = nft?.wait(seconds: 10)
        }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(5)
        var running = pids
        while !running.isEmpty && Date() < deadline {
            var status: Int32 = 0
            running.removeAll { waitpid($0, &status, WNOHANG) != 0 }   // exited (its PID), or not ours to wait for (-1)
            if !running.isEmpty { usleep(50_000) }
        }
        for pid in running { kill(pid, SIGKILL) }
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }
}
