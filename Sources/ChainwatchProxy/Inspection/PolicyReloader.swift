import ChainwatchLock
import ChainwatchCore
import ChainwatchOpenSSL
import ChainwatchPolicyFile
import Foundation
import Logging
import Synchronization

/// Loads the policy file into snapshots: at start, on SIGHUP, and when `--watch` sees the file change.
/// A file that fails to load is reported with every diagnostic and the policy in force stays.
public final class PolicyReloader: @unchecked Sendable {
    public let path: String?
    private let extraAnchors: [Certificate]
    private let publicRoots: PublicRoots?
    private let logger: Logger
    private var generation = 0
    private var lastModification: FileIdentity?
    public private(set) var store: PolicyStore!
    public var cache: VerdictCache?
    private let counters = Lock(Status())

    /// What the admin listener shows of the policy: the loaded file's SHA-256 (as `sha256sum` prints it; empty for
    /// the built-in policy), reloads done and rejected.
    public struct Status: Sendable {
        public var digest = ""
        public var reloads = 0
        public var rejected = 0
    }
    /// Safe from any thread.
    public var status: Status { counters.withLock { $0 } }

    /// Loads the first snapshot (from `path`, or the built-in default when nil); throws the load errors.
    /// - Parameter publicRoots: the public root set that tells public system roots from local ones (`AnchorKind`).
    public init(path: String?, extraAnchors: [Certificate], publicRoots: PublicRoots?, logger: Logger) throws {
        self.path = path
        self.extraAnchors = extraAnchors
        self.publicRoots = publicRoots
        self.logger = logger
        store = PolicyStore(try load())
    }

    private func load() throws -> PolicySnapshot {
        generation += 1
        guard let path else {
            return try PolicySnapshot(policy: .builtIn, source: "built-in", generation: generation, extraAnchors: extraAnchors,
                                      publicRoots: publicRoots)
        }
        lastModification = Self.modification(of: path)
        // Read once: the digest the admin listener shows is of the very bytes loaded, even when the file is replaced
        // between two reads.
        let contents = try PolicyLoader.read(path: path)
        let (policy, warnings) = try PolicyLoader.load(contents: contents, path: path)
        for warning in warnings { logger.warning("\(warning)") }
        let snapshot = try PolicySnapshot(policy: policy, source: path, generation: generation, extraAnchors: extraAnchors,
                                          publicRoots: publicRoots)
        let digest = try? HashText.hex(Digest.sha256([UInt8](contents)), uppercase: false)
        counters.withLock { $0.digest = digest ?? "" }
        return snapshot
    }

    /// Loads the file again (the built-in policy when there is none); on success swaps the snapshot in and drops
    /// cached verdicts of rules that changed (all of them when the OS trust store changed since the last load: its
    /// anchors are read again with the policy, the built-in one's too, so `update-ca-certificates` and a SIGHUP take
    /// effect without a restart whatever the policy).
    @discardableResult
    public func reload() -> Bool {
        do {
            let previous = store.snapshot
            let snapshot = try load()
            store.replace(with: snapshot)
            cache?.retain(rules: snapshot.ruleIdentities)
            // Against the snapshot in force, not the last read: a rejected reload may have read the changed store.
            if snapshot.anchorsGeneration != previous.anchorsGeneration {
                // The OS store changed (update-ca-certificates): every verdict and known-bad mark was judged against
                // the old anchors, whatever rule it belongs to.
                cache?.retain(rules: [])
                logger.notice("the OS trust store changed: cached verdicts and known-bad marks dropped")
            }
            counters.withLock { $0.reloads += 1 }
            logger.notice("policy \(snapshot.source) reloaded (generation \(snapshot.generation), \(snapshot.policy.rules.count) rule(s))")
            return true
        } catch {
            generation -= 1
            counters.withLock { $0.rejected += 1 }
            logger.error("policy reload rejected, keeping generation \(store.snapshot.generation):\n\(error)")
            return false
        }
    }

    /// For `--watch`: reloads when the file changed since the last load: another file now (a new inode, as a
    /// Kubernetes ConfigMap's `..data` symlink swap or an editor's rename gives) or the same one modified.
    public func reloadIfChanged() {
        guard let path, let now = Self.modification(of: path), now != lastModification else { return }
        reload()
    }

    /// What identifies a file's content version, through every symbolic link on the way (stat(2), not lstat: a
    /// ConfigMap's `policy.yaml` is a link into `..data`, which is itself a link swapped on update).
    struct FileIdentity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64, seconds: Int, nanoseconds: Int
    }

    static func modification(of path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                            seconds: info.st_mtim.tv_sec, nanoseconds: info.st_mtim.tv_nsec)
    }
}
