import ChainwatchProcess
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process the bench started (proxy, nginx). Stopped by its PID only.
final class Child {
    let name: String
    private var process: Spawned
    let logPath: String
    var pid: Int32 { process.pid }

    /// Starts `executable` with `arguments`, stdout and stderr into `logPath`.
    init(name: String, executable: String, arguments: [String], logPath: String) throws(BenchError) {
        self.name = name
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        do { process = try Spawned(executable, arguments, outputPath: logPath) } catch {
            throw BenchError("cannot start \(name) (\(executable)): \(error.description)")
        }
        BenchInterruption.current.started(process.pid)
    }

    /// Waits (at most `seconds`) until `endpoint` accepts connections; fails if the process exits first.
    func waitUntilListening(_ endpoint: Endpoint, seconds: Double = 10) throws(BenchError) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if !process.running() { throw BenchError("\(name) exited with status \(process.exitCode ?? -1) before listening on \(endpoint); its log: \(logTail())") }
            if accepts(endpoint) { return }
            usleep(20_000)
        }
        throw BenchError("\(name) did not listen on \(endpoint) within \(seconds)s; its log: \(logTail())")
    }

    /// SIGTERM to the PID, up to 5 s to exit, then SIGKILL to the PID.
    func stop() {
        process.stop()
        BenchInterruption.current.stopped(process.pid)
    }

    func logTail() -> String {
        let text = readText(logPath) ?? ""
        return String(text.suffix(800)).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Runs a short command to completion (openssl, rsvg-convert, nft), at most `seconds`; its output, or a failure with
/// its output when it fails, cannot start, or is still running then (and is killed). `executable` is searched on PATH.
@discardableResult
func runTool(_ executable: String, _ arguments: [String], seconds: Double = 60) throws(BenchError) -> String {
    let directory = try TempDirectory()   // private: a fixed name in /tmp could be another user's link
    defer { directory.remove() }
    let outputPath = directory.file("tool.log")
    var process: Spawned
    do { process = try Spawned(executable, arguments, outputPath: outputPath) } catch { throw BenchError(error.description) }
    let output = { String((readText(outputPath) ?? "").suffix(2000)) }
    guard process.wait(seconds: seconds) else {
        process.stop(grace: 1)
        throw BenchError("\(executable) \(arguments.joined(separator: " ")) did not finish within \(Int(seconds)) s (killed): \(output())")
    }
    guard process.exitCode == 0 else {
        throw BenchError("\(executable) \(arguments.joined(separator: " ")) failed with status \(process.exitCode ?? -1): \(output())")
    }
    return readText(outputPath) ?? ""
}

/// A file's text (invalid UTF-8 replaced), nil when it cannot be opened. Through `FileHandle`: Foundation's
/// `String(contentsOfFile:)` and `Data(contentsOf:)` leak a 4 KiB buffer for every empty file they read (Swift 6.3's
/// swift-foundation; LeakSanitizer found it under `make sanitize`), and a tool's output is usually empty.
func readText(_ path: String) -> String? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
}

/// Finds an executable on PATH (or takes a path as is).
func which(_ name: String) -> String? {
    if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let dirs = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin"]
    for dir in dirs where access("\(dir)/\(name)", X_OK) == 0 { return "\(dir)/\(name)" }
    return nil
}

/// A private temporary directory, removed by `remove()` unless kept.
struct TempDirectory {
    let path: String
    init() throws(BenchError) {
        var template = Array((NSTemporaryDirectory() + "chainwatch-bench.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        path = String(cString: made)
    }
    func file(_ name: String) -> String { "\(path)/\(name)" }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// The generated PKI: root CA → intermediate CA → leaf for 127.0.0.1 and localhost, all EC P-256.
struct GeneratedChain {
    let rootFile: String
    /// Leaf then intermediate, as a server sends it.
    let chainFile: String
    let keyFile: String
    let intermediateFile: String
    let intermediateKeyFile: String

    init(in dir: TempDirectory) throws(BenchError) {
        guard let openssl = which("openssl") else { throw BenchError("openssl CLI not found (apt-get install openssl)") }
        let d = dir.path
        let ext = """
            [ca]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [leaf]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:*.fresh.bench.test
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            """
        do { try ext.write(toFile: "\(d)/ext.cnf", atomically: true, encoding: .utf8) } catch { throw BenchError("write ext.cnf: \(error)") }
        for name in ["root", "intermediate", "leaf"] {
            try runTool(openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(d)/\(name).key"])
        }
        try runTool(openssl, ["req", "-x509", "-new", "-key", "\(d)/root.key", "-subj", "/O=chainwatch-bench/CN=bench root CA",
                              "-days", "3", "-sha256", "-out", "\(d)/root.pem",
                              "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try runTool(openssl, ["req", "-new", "-key", "\(d)/intermediate.key", "-subj", "/O=chainwatch-bench/CN=bench intermediate CA", "-out", "\(d)/intermediate.csr"])
        try runTool(openssl, ["x509", "-req", "-in", "\(d)/intermediate.csr", "-CA", "\(d)/root.pem", "-CAkey", "\(d)/root.key", "-CAcreateserial",
                              "-days", "3", "-sha256", "-extfile", "\(d)/ext.cnf", "-extensions", "ca", "-out", "\(d)/intermediate.pem"])
        try runTool(openssl, ["req", "-new", "-key", "\(d)/leaf.key", "-subj", "/O=chainwatch-bench/CN=127.0.0.1", "-out", "\(d)/leaf.csr"])
        try runTool(openssl, ["x509", "-req", "-in", "\(d)/leaf.csr", "-CA", "\(d)/intermediate.pem", "-CAkey", "\(d)/intermediate.key", "-CAcreateserial",
                              "-days", "3", "-sha256", "-extfile", "\(d)/ext.cnf", "-extensions", "leaf", "-out", "\(d)/leaf.pem"])
        let leaf = readText("\(d)/leaf.pem") ?? ""
        let intermediate = readText("\(d)/intermediate.pem") ?? ""
        do { try (leaf + intermediate).write(toFile: "\(d)/chain.pem", atomically: true, encoding: .utf8) } catch { throw BenchError("write chain.pem: \(error)") }
        rootFile = "\(d)/root.pem"
        chainFile = "\(d)/chain.pem"
        keyFile = "\(d)/leaf.key"
        intermediateFile = "\(d)/intermediate.pem"
        intermediateKeyFile = "\(d)/intermediate.key"
    }
}

/// nginx from Debian as the HTTPS upstream: a generated config in the temp dir, serving
/// `body.bin` (the pattern, `bodyBytes` long) on 127.0.0.1 with the generated chain.
func startNginx(dir: TempDirectory, chain: GeneratedChain, bodyBytes: Int, port: UInt16, workers: Int) throws(BenchError) -> Child {
    guard let nginx = which("nginx") else { throw BenchError("nginx not found (apt-get install nginx-light)") }
    let www = dir.file("www")
    try? FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
    var body = [UInt8](repeating: 0, count: bodyBytes)
    body.withUnsafeMutableBufferPointer { Pattern.fill($0.baseAddress!, offset: 0, count: bodyBytes) }
    _ = FileManager.default.createFile(atPath: "\(www)/body.bin", contents: Data(body))
    let config = """
        \(getuid() == 0 ? "user root;" : "")
        worker_processes \(workers);
        pid \(dir.file("nginx.pid"));
        error_log \(dir.file("nginx-error.log")) warn;
        events { worker_connections 16384; }
        http {
            access_log off;
            client_body_temp_path \(dir.path)/nginx-tmp;
            server {
                listen 127.0.0.1:\(port) ssl;
                ssl_certificate \(chain.chainFile);
                ssl_certificate_key \(chain.keyFile);
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_session_tickets off;
                ssl_session_cache off;
                keepalive_timeout 0;
                root \(www);
            }
        }
        """
    do { try config.write(toFile: dir.file("nginx.conf"), atomically: true, encoding: .utf8) } catch { throw BenchError("write nginx.conf: \(error)") }
    let child = try Child(name: "nginx", executable: nginx,
                          arguments: ["-e", dir.file("nginx-error.log"), "-p", dir.path, "-c", dir.file("nginx.conf"), "-g", "daemon off;"],
                          logPath: dir.file("nginx.log"))
    do { try child.waitUntilListening(Endpoint(host: "127.0.0.1", port: port)) } catch { child.stop(); throw error }
    return child
}

/// CPU time and memory of a process and all its descendants, read from /proc.
struct ProcSample: Sendable {
    /// utime+stime of the tree, plus cutime+cstime of the root (children it already reaped), in ticks.
    var cpuTicks: Int
    var rssKiB: Int
    var processes: Int

    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    var cpuSeconds: Double { Double(cpuTicks) / Self.ticksPerSecond }

    /// Nil when `pid` no longer exists.
    static func read(root pid: Int32) -> ProcSample? {
        guard let rootStat = stat(pid) else { return nil }
        var children: [Int32: [Int32]] = [:]
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") {
            for entry in entries {
                guard let child = Int32(entry), child != pid, let fields = stat(child), let ppid = Int32(fields[1]) else { continue }
                children[ppid, default: []].append(child)
            }
        }
        var sample = ProcSample(cpuTicks: (Int(rootStat[13]) ?? 0) + (Int(rootStat[14]) ?? 0), rssKiB: 0, processes: 0)
        var queue = [pid]
        while let next = queue.popLast() {
            guard let fields = stat(next) else { continue }
            sample.cpuTicks += (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
            sample.rssKiB += rss(next)
            sample.processes += 1
            queue += children[next] ?? []
        }
        return sample
    }

    /// The fields of /proc/PID/stat after the command name: index 0 is field 3 (state).
    private static func stat(_ pid: Int32) -> [Substring]? {
        guard let text = readText("/proc/\(pid)/stat"),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 15 ? fields : nil
    }

    /// VmRSS from /proc/PID/status, in KiB (0 for kernel threads or vanished processes).
    static func rss(_ pid: Int32) -> Int {
        guard let text = readText("/proc/\(pid)/status") else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}
