internal import COpenSSL
import ChainwatchLock
import Foundation
import Synchronization

/// The OS trust store's certificates, read into memory once: the bundle file and the hashed certificate directory that
/// OpenSSL's default paths name (Debian: `/usr/lib/ssl/cert.pem` → `/etc/ssl/certs/ca-certificates.crt`, and
/// `/usr/lib/ssl/certs` → `/etc/ssl/certs`; `SSL_CERT_FILE` and `SSL_CERT_DIR`, colon-separated, override them).
///
/// Why not `X509_STORE_set_default_paths`: besides loading the bundle it installs two lookups that go to the
/// filesystem whenever an issuer is not among the loaded certificates, which is every validation: a leaf's issuer is
/// an intermediate, never an anchor, and an interception chain's issuer is nowhere. The hashed-directory lookup
/// `stat`s `<hash>.0`, and OpenSSL 3's store lookup reads the whole directory (`getdents64` over a few hundred
/// entries) for each miss: about half a millisecond of kernel time per new chain, more than its signature check.
/// Here the directory's `<hash>.<n>` files are read at start, as the hashed lookup would find them, and a store holds
/// only certificates in memory: a miss costs a hash-table probe.
///
/// Read once per process while the files stay as they are: every trust store with system roots shares the decoded
/// certificates (`X509_STORE_add_cert` takes a reference), and a store built after the bundle or a directory changed
/// (`update-ca-certificates`, then a reload) reads them again. Not read: `TRUSTED CERTIFICATE` blocks (OpenSSL's
/// trust-settings format, which Debian's ca-certificates does not use) and CRLs.
public enum SystemRoots {
    /// The bundle file and the certificate directories OpenSSL's defaults and environment name.
    public static var defaultLocations: (file: String, directories: [String]) {
        let fileVariable = String(cString: X509_get_default_cert_file_env())
        let directoryVariable = String(cString: X509_get_default_cert_dir_env())
        let file = ProcessInfo.processInfo.environment[fileVariable] ?? String(cString: X509_get_default_cert_file())
        let directories = (ProcessInfo.processInfo.environment[directoryVariable] ?? String(cString: X509_get_default_cert_dir()))
            .split(separator: ":").map(String.init)
        return (file, directories)
    }

    /// The certificates at the default locations, decoded once each (the same certificate in the bundle and in the
    /// directory, as Debian links them, is decoded once). Missing or unreadable locations contribute nothing, as with
    /// OpenSSL's default paths; a block that does not decode is skipped.
    public static func load() -> [Certificate] {
        let locations = defaultLocations
        return load(file: locations.file, directories: locations.directories)
    }

    /// The certificates of `file` and of the hashed files in `directories`. See `load()`.
    public static func load(file: String, directories: [String]) -> [Certificate] {
        let hashed = directories.map { ($0, hashedFiles(in: $0)) }
        let paths = [file] + hashed.flatMap { directory, names in [directory] + names.map { directory + "/" + $0 } }
        let key = ([file] + directories).joined(separator: "\n")
        let stamp = paths.map(Self.stamp).joined(separator: "\n")
        if let known = loaded.withLock({ $0[key] }), known.stamp == stamp { return known.certificates }
        var certificates: [Certificate] = []
        var seen = Set<[UInt8]>()
        func add(_ path: String, limit: Int, hash: String? = nil) {
            guard let data = regularFile(path, limit: limit) else { return }
            for der in derBlocks(in: data) where !seen.contains(der) {
                guard let certificate = try? Certificate(der: der) else { continue }
                // The hashed lookup finds a file by its issuer's name hash: a file under another name is never read.
                if let hash, subjectHash(certificate) != hash { continue }
                seen.insert(der)
                certificates.append(certificate)
            }
        }
        add(file, limit: 64 << 20)
        for (directory, names) in hashed {
            for name in names { add(directory + "/" + name, limit: 1 << 20, hash: String(name.prefix(8))) }
        }
        loaded.withLock { $0[key] = (stamp, certificates) }
        generationCounter.add(1, ordering: .relaxed)
        return certificates
    }

    /// The `<hash>.<n>` names of `directory` that OpenSSL's hashed lookup would open: for each hash, `.0`, `.1`, … up
    /// to the first missing suffix.
    static func hashedFiles(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var suffixes: [String: Set<Int>] = [:]
        for name in names where isHashedName(name) {
            if let n = Int(name.dropFirst(9)) { suffixes[String(name.prefix(8)), default: []].insert(n) }
        }
        var files: [String] = []
        for hash in suffixes.keys.sorted() {
            var n = 0
            while suffixes[hash]!.contains(n) { files.append("\(hash).\(n)"); n += 1 }
        }
        return files
    }

    /// `X509_NAME_hash_ex` of the subject, as `%08lx`: the name the hashed lookup opens for it.
    public static func subjectHash(_ certificate: Certificate) -> String? {
        guard let name = X509_get_subject_name(certificate.raw) else { return nil }
        var ok: Int32 = 0
        let hash = X509_NAME_hash_ex(name, nil, nil, &ok)
        guard ok == 1 else { return nil }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }

    /// The contents of a regular file (through symbolic links) of at most `limit` bytes; nil otherwise.
    private static func regularFile(_ path: String, limit: Int) -> Data? {
        var info = stat()
        // Empty files hold no certificate (and `FileManager.contents` leaks 4 KiB reading one).
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > 0, info.st_size <= limit else {
            return nil
        }
        return FileManager.default.contents(atPath: path)
    }

    /// Grows by one each time the OS store is read (at the first load, and again after it changed): a reload that
    /// sees it grow knows that verdicts judged against the old store may no longer hold.
    public static var generation: Int { generationCounter.load(ordering: .relaxed) }
    private static let generationCounter = Atomic<Int>(0)

    private static let loaded = Lock<[String: (stamp: String, certificates: [Certificate])]>([:])

    /// What changes when the file or directory at `path` does: its inode, size and modification time (through
    /// symbolic links: a link repointed or a file copied over in place counts as a change).
    private static func stamp(_ path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return "-" }
        return "\(info.st_ino) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
    }

    /// `<8 hex digits>.<digits>`: the names `c_rehash` / `openssl rehash` give certificates (CRLs are `.r<n>`).
    public static func isHashedName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count >= 10, bytes[8] == UInt8(ascii: ".") else { return false }
        let hex = bytes[..<8].allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
        let digits = bytes[9...].allSatisfy { $0 >= 48 && $0 <= 57 }
        return hex && digits
    }

    /// The DER of every `CERTIFICATE` PEM block in `data`; blocks whose base64 does not decode are skipped.
    static func derBlocks(in data: Data) -> [[UInt8]] {
        let text = String(decoding: data, as: UTF8.self)
        var blocks: [[UInt8]] = []
        var rest = text[...]
        while let begin = rest.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = rest.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<rest.endIndex) {
            let body = rest[begin.upperBound..<end.lowerBound]
            if let der = Data(base64Encoded: String(body), options: .ignoreUnknownCharacters), !der.isEmpty {
                blocks.append([UInt8](der))
            }
            rest = rest[end.upperBound...]
        }
        return blocks
    }
}
