import ChainwatchProcess
import Foundation
import Glibc

/// The firewall rule of `selftest --transparent`: an nftables table of its own that redirects the selftest client's
/// connections to its servers onto the proxy's `--transparent` listener, as a gateway's rule redirects a LAN's.
///
/// Only connections from `clientAddress` (127.0.0.2, an address nothing else uses) to the servers' ports match, so
/// the proxy's own connections to the same servers (from 127.0.0.1) are exempt without a mark, and nothing else on
/// the machine is touched. The table is named after the process (`chainwatch_selftest_PID`) and deleted by `remove`.
struct SelftestRedirect {
    static let clientAddress = "127.0.0.2"
    let table: String
    let directory: URL
    /// Deletes the table, and stops the proxy, if the selftest is interrupted before `remove`.
    private let onSignal: SignalCleanup

    /// Adds the table: connections from `clientAddress` to `serverAddress` on `ports` go to `listenerPort` on the
    /// same host (`redirect`, hook output: the client is a local process, as a gateway's own output chain sees it).
    /// `loopPort` is redirected from every source, the proxy's own connections included: a gateway whose rule lacks
    /// the exemption for chainwatch's traffic, for that one port (nothing listens there).
    init(directory: URL, serverAddress: String, ports: [UInt16], loopPort: UInt16, listenerPort: UInt16, proxyPID: pid_t?) throws {
        try Self.checkAllowed()
        self.directory = directory
        let table = "chainwatch_selftest_\(getpid())"
        self.table = table
        onSignal = SignalCleanup {
            if let proxyPID { kill(proxyPID, SIGTERM) }
            var nft = try? Spawned("nft", ["delete", "table", "ip", table], outputPath: "/dev/null")
            _ = nft?.wait(seconds: 10)
        }
        let set = ports.map(String.init).joined(separator: ", ")
        // Added and deleted first: a table of the same name left behind (a reused PID) is replaced, not added to.
        try nft(["-f", write("""
            add table ip \(table)
            delete table ip \(table)
            table ip \(table) {
              chain output {
                type nat hook output priority -100; policy accept;
                ip saddr \(Self.clientAddress) ip daddr \(serverAddress) tcp dport { \(set) } redirect to :\(listenerPort)
                ip daddr \(serverAddress) tcp dport \(loopPort) redirect to :\(listenerPort)
              }
            }

            """, "redirect.nft")])
    }

    /// Deletes the table (what `init` added, nothing else).
    func remove() {
        try? nft(["delete", "table", "ip", table])
        onSignal.cancel()
    }

    /// Root and the nft command, checked before anything is set up.
    static func checkAllowed() throws {
        guard geteuid() == 0 else {
            throw SelftestError("--transparent adds an nftables rule, which needs root (CAP_NET_ADMIN): run it as root, or in a network namespace of its own (ip netns exec)")
        }
        let path = (getenv("PATH").map { String(cString: $0) } ?? "/usr/sbin:/usr/bin:/sbin:/bin") + ":/usr/sbin:/sbin"
        guard path.split(separator: ":").contains(where: { access("\($0)/nft", X_OK) == 0 }) else {
            throw SelftestError("--transparent needs the nft command: apt-get install nftables")
        }
    }

    private func write(_ text: String, _ name: String) throws -> String {
        let file = directory.appendingPathComponent(name)
        try text.write(to: file, atomically: false, encoding: .utf8)
        return file.path
    }

    /// Runs the nft command, at most 20 s, its output into `nft.log` in the directory.
    private func nft(_ arguments: [String]) throws {
        let log = directory.appendingPathComponent("nft.log").path
        var process: Spawned
        do { process = try Spawned("nft", arguments, outputPath: log) } catch {
            throw SelftestError("\(error)\(error.code == ENOENT ? " (--transparent needs the nft command: apt-get install nftables)" : "")")
        }
        guard process.wait(seconds: 20) else {
            process.stop(grace: 1)
            throw SelftestError("nft \(arguments.joined(separator: " ")) did not finish within 20 s (killed)")
        }
        guard process.exitCode == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw SelftestError("nft \(arguments.joined(separator: " ")) failed with status \(process.exitCode ?? -1): \(output.suffix(2000))")
        }
    }
}
