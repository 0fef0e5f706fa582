import ChainwatchProcess
import Foundation

/// The certificates `chainwatch selftest` serves, made for each run with the openssl command (Debian's
/// ca-certificates depends on it, so it is where chainwatch is): a genuine chain (root, intermediate, leaf) and a
/// forgery (a root with the genuine root's name and its own key, and a leaf with the genuine leaf's names), as an
/// interception CA makes them. EC P-256, valid for two days.
struct SelftestCertificates {
    let directory: URL
    var genuineRoot: URL { directory.appendingPathComponent("genuine-root.pem") }
    /// Leaf then intermediate, as a server sends them.
    var genuineChain: URL { directory.appendingPathComponent("genuine-chain.pem") }
    var genuineKey: URL { directory.appendingPathComponent("genuine-leaf.key") }
    /// The forged leaf then the forged root.
    var forgedChain: URL { directory.appendingPathComponent("forged-chain.pem") }
    var forgedKey: URL { directory.appendingPathComponent("forged-leaf.key") }

    static let rootName = "/O=chainwatch selftest/CN=chainwatch selftest root"

    /// Makes both chains in `directory`, whose leaves name every host in `names`.
    init(in directory: URL, names: [String]) throws {
        self.directory = directory
        let san = names.map { "DNS:\($0)" }.joined(separator: ",") + ",IP:127.0.0.1"
        let ca = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n"
        let leaf = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=\(san)\n"
        try write(ca, "ca.ext")
        try write(leaf, "leaf.ext")
        for key in ["genuine-root", "genuine-intermediate", "genuine-leaf", "forged-root", "forged-leaf"] {
            try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(key).key"])
        }
        try openssl(["req", "-x509", "-new", "-key", "genuine-root.key", "-subj", Self.rootName, "-days", "2", "-sha256",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                     "-out", "genuine-root.pem"])
        try openssl(["req", "-x509", "-new", "-key", "forged-root.key", "-subj", Self.rootName, "-days", "2", "-sha256",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                     "-out", "forged-root.pem"])
        try sign("genuine-intermediate", subject: "/O=chainwatch selftest/CN=chainwatch selftest intermediate",
                 by: "genuine-root", extensions: "ca.ext", serial: 2)
        try sign("genuine-leaf", subject: "/O=chainwatch selftest/CN=\(names[0])", by: "genuine-intermediate",
                 extensions: "leaf.ext", serial: 3)
        try sign("forged-leaf", subject: "/O=chainwatch selftest/CN=\(names[0])", by: "forged-root",
                 extensions: "leaf.ext", serial: 3)
        try write(try read("genuine-leaf.pem") + read("genuine-intermediate.pem"), "genuine-chain.pem")
        try write(try read("forged-leaf.pem") + read("forged-root.pem"), "forged-chain.pem")
    }

    private func sign(_ name: String, subject: String, by issuer: String, extensions: String, serial: Int) throws {
        try openssl(["req", "-new", "-key", "\(name).key", "-subj", subject, "-out", "\(name).csr"])
        try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "\(issuer).pem", "-CAkey", "\(issuer).key",
                     "-set_serial", String(serial), "-days", "2", "-sha256", "-extfile", extensions, "-out", "\(name).pem"])
    }

    private func write(_ text: String, _ name: String) throws {
        try text.write(to: directory.appendingPathComponent(name), atomically: false, encoding: .utf8)
    }

    private func read(_ name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    }

    /// Runs the openssl command in the directory, at most 60 s, its output into `openssl.log` there.
    private func openssl(_ arguments: [String]) throws {
        let log = directory.appendingPathComponent("openssl.log").path
        let what = "openssl \(arguments.prefix(2).joined(separator: " "))"
        var process: Spawned
        do { process = try Spawned("openssl", arguments, outputPath: log, directory: directory.path) } catch {
            throw SelftestError("\(error)\(error.code == ENOENT ? " (is the openssl command installed? apt-get install openssl)" : "")")
        }
        guard process.wait(seconds: 60) else {
            process.stop(grace: 1)
            throw SelftestError("\(what) did not finish within 60 s (killed)")
        }
        guard process.exitCode == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw SelftestError("\(what) failed with status \(process.exitCode ?? -1): \(output.suffix(2000))")
        }
    }
}

struct SelftestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
