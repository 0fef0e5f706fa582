import Foundation

/// The alert log of a chainwatch the bench started (`--alert-log {dir}/alerts.jsonl`): its lines counted per run, so an
/// alert storm (`--policy flagged`, with `--fresh-certificates` a new chain behind every line) shows that every
/// flagged connection got its line, and a clean run that none did.
enum AlertLog {
    /// Newline-terminated lines in the file (0 when it does not exist yet). Read with read(2) in 64 KiB pieces, not
    /// Foundation: `FileManager.contents` leaks 4 KiB on an empty file (LeakSanitizer), and the log starts empty.
    static func lines(in path: String) -> Int {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var count = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            for index in 0..<n where buffer[index] == UInt8(ascii: "\n") { count += 1 }
        }
        return count
    }

    /// The count once the proxy's writer thread has caught up: it has not grown for 300 ms (5 s at most).
    static func settledLines(in path: String) -> Int {
        var last = lines(in: path)
        var stableSince = Date()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            usleep(50_000)
            let now = lines(in: path)
            if now != last { last = now; stableSince = Date() } else if Date().timeIntervalSince(stableSince) >= 0.3 { break }
        }
        return last
    }

    /// What is wrong with `lines` for a handshake run (TLS upstream; bulk and idle tunnels carry no TLS, a finding of
    /// their own) under `policy`: under `flagged` every completed session wrote one line
    /// (and no session more than one); under `alert` and `block` (the bench's root anchors the rule) a genuine
    /// handshake writes none.
    static func problem(lines: Int, policy: String?, kinds: [KindResult]) -> String? {
        let completed = kinds.reduce(0) { $0 + $1.completed }, started = kinds.reduce(0) { $0 + $1.started }
        switch policy {
        case "flagged"?:
            if lines < completed { return "alert log: \(lines) lines for \(completed) flagged sessions completed (lines lost)" }
            if lines > started { return "alert log: \(lines) lines for \(started) sessions started (more than one per session)" }
        case "alert"?, "block"?:
            if lines > 0 { return "alert log: \(lines) lines from genuine handshakes under \(policy!) (false alarms)" }
        default:
            break
        }
        return nil
    }
}
