#if canImport(Glibc)
import Glibc
#endif

/// A child process started by posix_spawn and reaped by waitpid on its PID only, every wait bounded.
///
/// Not Foundation's `Process`: it learns of an exit through a SIGCHLD dispatch source and a run loop, and its
/// `waitUntilExit` has no deadline, so a missed exit hangs the caller (the bench and `selftest`, whose every other
/// step has a deadline). Not Sendable: one owner polls it.
public struct Spawned {
    public let pid: pid_t
    /// The raw wait status once reaped (-1 if waitpid failed).
    public private(set) var status: Int32?

    /// Starts `executable` (searched on PATH when it has no slash) with stdin from /dev/null and stdout and stderr
    /// appended to `outputPath`, in `directory` if given (else this process's working directory). The child starts with no signal blocked and every signal at its default action (a
    /// parent's ignored SIGPIPE or blocked SIGTERM would otherwise carry across exec), as Foundation's `Process` does.
    public init(_ executable: String, _ arguments: [String], outputPath: String, directory: String? = nil) throws(SpawnError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        if let directory {
            guard let addchdir = Self.addchdir else { throw SpawnError(executable: executable, code: ENOSYS) }
            let rc = addchdir(&actions, directory)
            guard rc == 0 else { throw SpawnError(executable: executable, code: rc) }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, executable, &actions, &attributes, &argv, environ)
        guard rc == 0 else { throw SpawnError(executable: executable, code: rc) }
        self.pid = pid
    }

    /// Whether it still runs (reaps it, once, when it has exited).
    public mutating func running() -> Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        let rc = waitpid(pid, &raw, WNOHANG)
        if rc == 0 { return true }
        status = rc == pid ? raw : -1
        return false
    }

    /// Waits at most `seconds` for it to exit; true when it did.
    public mutating func wait(seconds: Double) -> Bool {
        let deadline = Self.now() + UInt64(max(seconds, 0) * 1e9)
        while running() {
            if Self.now() >= deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// The exit code, or 128 + the signal that killed it (as a shell says it); nil while it runs.
    public var exitCode: Int32? {
        guard let status else { return nil }
        if status == -1 { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// SIGTERM, up to `grace` seconds to exit, then SIGKILL and reap.
    public mutating func stop(grace: Double = 5) {
        guard running() else { return }
        kill(pid, SIGTERM)
        if wait(seconds: grace) { return }
        kill(pid, SIGKILL)
        _ = wait(seconds: 10)
    }

    /// glibc's posix_spawn_file_actions_addchdir_np (2.29 and later), which Swift's Glibc module does not export.
    private static let addchdir: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32)? =
        dlsym(nil, "posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self) }

    private static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// posix_spawnp failed: the executable was not found or could not be run.
public struct SpawnError: Error, CustomStringConvertible {
    public let executable: String
    /// The errno posix_spawnp returned (ENOENT: not on PATH).
    public let code: Int32
    public var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
}
