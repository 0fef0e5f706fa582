import ArgumentParser
import ChainwatchCore
import ChainwatchOpenSSL
import ChainwatchPolicyFile
import Foundation

extension Chainwatch {
    /// `chainwatch pin HOST:PORT...`: the network version of exporting a server's certificate into an app bundle.
    struct Pin: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Connect to servers and print a policy pinning the chains they present now.",
            discussion: """
                For each HOST[:PORT] (default port 443) chainwatch makes a TLS handshake (SNI = HOST), validates \
                the chain to the system roots (plus --ca), and prints a complete policy file with one rule per host: \
                the root's and intermediates' SPKI hashes and the leaf's subject, each with a comment naming the \
                certificate (subject, issuer, not-after). `chainwatch run --policy` loads it as is. Trust on first \
                use: run it from a network you trust, and add a backup pin per level before enforcing (`policy \
                check` warns while a blocking set has one pin).

                Examples:
                  chainwatch pin api.example.com > policy.yaml
                  chainwatch pin --action block --ca private-ca.pem --hosts hosts.txt private.test:8443
                """)

        @Argument(help: "Servers to pin, HOST[:PORT] or [V6]:PORT.")
        var servers: [String]

        @Option(help: "What the rules do on a mismatch: block or alert.")
        var action: String = "alert"

        @Option(help: "A hosts(5) file consulted before DNS.")
        var hosts: String?

        @Option(help: "Extra trust anchors (PEM): the CA a private server's chain ends at; it becomes the rules' anchor.")
        var ca: String?

        @Option(help: "Seconds for each handshake.")
        var timeout = 10.0

        func validate() throws {
            guard Action(rawValue: action) != nil else { throw ValidationError("--action must be block or alert") }
            for server in servers where Authority.parse(server, defaultPort: 443) == nil {
                throw ValidationError("\(server) is not HOST[:PORT]")
            }
        }

        func run() throws {
            let hostsFile = try hosts.map { path -> HostsFile in
                guard let data = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read --hosts \(path)") }
                return HostsFile(text: String(decoding: data, as: UTF8.self))
            }
            var extraAnchors: [Certificate] = []
            var anchors = ["system"]
            if let ca {
                extraAnchors = try caCertificates(inPEMFile: ca, option: "--ca")
                anchors.append(URL(fileURLWithPath: ca).standardizedFileURL.path)
            }
            let store = try TrustStore(systemRoots: true, extraAnchors: extraAnchors)
            let now = UnixTime(seconds: Int64(Date().timeIntervalSince1970))
            var output = ""
            var failed = false
            for (index, server) in servers.enumerated() {
                let authority = Authority.parse(server, defaultPort: 443)!
                let address = hostsFile?.lookup(authority.host).first ?? authority.host
                let isIP = IPAddressText.parse(authority.host) != nil
                let fetched: FetchedChain
                do {
                    fetched = try ChainFetcher.fetch(host: address, port: authority.port, serverName: isIP ? nil : authority.host,
                                                     timeoutMilliseconds: Int(timeout * 1000))
                } catch {
                    FileHandle.standardError.write(Data("chainwatch pin: \(authority): \(error)\n".utf8))
                    failed = true
                    continue
                }
                let validation = PathValidator.validate(chain: fetched.chain, store: store, at: now)
                if let error = validation.error {
                    FileHandle.standardError.write(Data("chainwatch pin: \(authority): the chain does not validate (\(error.message) at depth \(error.depth)); pass its root CA with --ca if it is a private one\n".utf8))
                    failed = true
                    continue
                }
                let name = authority.host.replacingOccurrences(of: ".", with: "-") + (authority.port == 443 ? "" : "-\(authority.port)")
                let port: UInt16? = authority.port == 443 ? nil : authority.port
                let act = Action(rawValue: action)!
                output += output.isEmpty
                    ? PolicyWriter.pinPolicy(name: name, host: authority.host, port: port, action: act, path: validation.path, anchors: anchors)
                    : "\n" + PolicyWriter.pinRule(name: name, host: authority.host, port: port, action: act, path: validation.path, anchors: anchors)
                FileHandle.standardError.write(Data("pinned \(authority) (\(fetched.version), \(validation.path.count) certificate(s), server \(index + 1) of \(servers.count))\n".utf8))
            }
            print(output, terminator: "")
            if failed { throw ExitCode(1) }
        }
    }
}
