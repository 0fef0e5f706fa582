import ChainwatchProcess
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The redirect of `--via transparent`: an nftables table of the bench's own (`chainwatch_bench_PID`, hook output)
/// that sends its sessions' connections to the upstreams onto the proxy's `--transparent` listener, as a gateway's
/// rule sends a LAN's. Only connections from `sourceAddress` (127.0.0.3, which the sessions bind to) match, so the
/// proxy's own connections to the same upstreams (from 127.0.0.1) are exempt, and nothing else is touched.
struct BenchRedirect {
    static let sourceAddress = "127.0.0.3"
    let table: String
    /// Deletes the table if the bench is interrupted before `remove` (with the rest of what it started).
    private let interrupted: BenchInterruption

    init(temp: TempDirectory, upstreams: [Endpoint], to listener: Endpoint, interrupted: BenchInterruption) throws(BenchError) {
        let table = "chainwatch_bench_\(getpid())"
        self.table = table
        self.interrupted = interrupted
        interrupted.tableAdded(table)
        let rules = upstreams.map { "    ip saddr \(Self.sourceAddress) ip daddr \($0.host) tcp dport \($0.port) counter redirect to :\(listener.port)" }
        // Added and deleted first: a table of the same name left behind (a reused PID) is replaced, not added to.
        let text = "add table ip \(table)\ndelete table ip \(table)\n"
            + "table ip \(table) {\n  chain output {\n    type nat hook output priority -100; policy accept;\n"
            + rules.joined(separator: "\n") + "\n  }\n}\n"
        let path = temp.file("redirect.nft")
        do { try text.write(toFile: path, atomically: true, encoding: .utf8) } catch { throw BenchError("write \(path): \(error)") }
        try runTool("nft", ["-f", path], seconds: 20)
    }

    /// Connections redirected so far: the rules' counters (a NAT chain sees each connection's first packet only).
    func redirected() throws(BenchError) -> Int {
        let listing = try runTool("nft", ["list", "table", "ip", table], seconds: 20)
        var total = 0
        var rest = Substring(listing)
        while let range = rest.range(of: "counter packets ") {
            rest = rest[range.upperBound...]
            total += Int(rest.prefix { $0.isNumber }) ?? 0
        }
        return total
    }

    /// Deletes the table (what `init` added, nothing else).
    func remove() {
        try? runTool("nft", ["delete", "table", "ip", table], seconds: 20)
        interrupted.tableRemoved(table)
    }
}
