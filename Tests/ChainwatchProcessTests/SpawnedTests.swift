import ChainwatchProcess
import Foundation
import Testing

/// Child processes by posix_spawn and waitpid: exit codes as a shell reports them, output into the file, the working
/// directory, a clean signal state, and waits that end when they say they do.
@Suite struct SpawnedTests {
    private func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "spawned-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func exitCodeAndOutputAreWhatTheChildDid() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var child = try Spawned("sh", ["-c", "echo out; echo err >&2; exit 3"], outputPath: "\(dir)/log")
        let exited = child.wait(seconds: 10)
        #expect(exited)
        #expect(child.exitCode == 3)
        #expect(try String(contentsOfFile: "\(dir)/log", encoding: .utf8) == "out\nerr\n")
    }

    @Test func runsInTheDirectoryItIsGiven() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var child = try Spawned("sh", ["-c", "pwd; touch made-here"], outputPath: "\(dir)/log", directory: dir)
        let exited = child.wait(seconds: 10)
        #expect(exited && child.exitCode == 0)
        #expect(FileManager.default.fileExists(atPath: "\(dir)/made-here"))
        let printed = try String(contentsOfFile: "\(dir)/log", encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(URL(fileURLWithPath: printed).resolvingSymlinksInPath() == URL(fileURLWithPath: dir).resolvingSymlinksInPath())
    }

    @Test func aWaitThatRunsOutReturnsAndStopKills() throws {
        var child = try Spawned("sleep", ["30"], outputPath: "/dev/null")
        let started = Date()
        let exited = child.wait(seconds: 0.2)
        #expect(!exited)
        #expect(child.exitCode == nil)
        child.stop(grace: 5)   // sleep dies of SIGTERM
        #expect(child.exitCode == 128 + SIGTERM)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(kill(child.pid, 0) == -1 && errno == ESRCH, "reaped: no zombie left under its PID")
    }

    @Test func aChildThatIgnoresSIGTERMIsKilledAfterTheGrace() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var child = try Spawned("sh", ["-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"], outputPath: "\(dir)/log")
        // Until the trap is set, by the log's size from stat: polling it with String(contentsOfFile:) while it was
        // still empty leaked 4 KiB inside Foundation (LeakSanitizer reported it in `make sanitize-address`).
        var info = stat()
        for _ in 0..<200 where stat("\(dir)/log", &info) != 0 || info.st_size == 0 { usleep(10_000) }
        child.stop(grace: 0.3)
        #expect(child.exitCode == 128 + SIGKILL)
    }

    @Test func theChildStartsWithDefaultSignalsWhateverTheParentIgnores() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        // SigIgn as the kernel shows it for the child: SIGPIPE (bit 13) not set, though this process ignores it.
        // (This failed with the spawn attributes removed. A blocked-signal check here did not, so it is not claimed.)
        var child = try Spawned("sh", ["-c", "grep -E '^SigIgn' /proc/self/status"], outputPath: "\(dir)/log")
        let exited = child.wait(seconds: 10)
        #expect(exited && child.exitCode == 0)
        let status = try String(contentsOfFile: "\(dir)/log", encoding: .utf8)
        let ignored = status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }.flatMap { UInt64($0.split(separator: "\t").last ?? "", radix: 16) }
        #expect(ignored.map { $0 & (1 << (UInt64(SIGPIPE) - 1)) == 0 } == true, "\(status)")
    }

    @Test func aMissingExecutableIsAnErrorNamingIt() {
        #expect {
            _ = try Spawned("no-such-program-here", [], outputPath: "/dev/null")
        } throws: { error in
            (error as? SpawnError).map { $0.code == ENOENT && $0.description.contains("no-such-program-here") } ?? false
        }
    }
}
