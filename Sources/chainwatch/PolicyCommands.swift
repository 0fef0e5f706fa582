import ArgumentParser
import ChainwatchCore
import ChainwatchPolicyFile
import Foundation

// `chainwatch policy check` and `chainwatch policy explain`. Nested in `Chainwatch` so that `Policy` means this
// command only inside `Chainwatch`; everywhere else in this module `Policy` is still `ChainwatchCore.Policy`.
// Output: the command's result (the check report, the explanation) on stdout; anything that stops it (an unreadable
// file, a policy with errors given to `explain`) on stderr.

extension Chainwatch {
    struct Policy: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "policy",
            abstract: "Check policy files and explain what a policy does for a host.",
            discussion: """
                A policy is one YAML file: `defaults` (for hosts no rule matches) and `rules` (match patterns, action, \
                anchors, pins, profile). The schema and every reason code: policies/REFERENCE.md.

                Examples:
                  chainwatch policy check policy.yaml
                  chainwatch policy explain policy.yaml www.shop.example.com
                  chainwatch policy explain api.example.com:8443   # built-in default
                """,
            subcommands: [Check.self, Explain.self])

        struct Check: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "check",
                abstract: "Report every error and warning in policy files, as file:line:col: severity: message.",
                discussion: """
                    Each FILE is loaded exactly as `chainwatch run --policy FILE` loads it, including the anchor PEM \
                    files it names (paths relative to the policy file). Every problem is printed, in file order, on \
                    stdout:

                      FILE:LINE:COL: error: MESSAGE (hint: WHAT TO DO)
                      FILE:LINE:COL: warning: MESSAGE (hint: WHAT TO DO)

                    then one summary line. An error means the proxy would refuse the file. A warning means it loads \
                    but may protect less than intended (a blocking pin set without a backup pin, pins that expired or \
                    expire within 30 days, the hostname check off while trusting the system roots, no `defaults`). \
                    A FILE that cannot be read is reported on stderr and counts as an error.

                    Exit status: 0 when no FILE has an error (warnings alone pass), 1 when any has one; with --strict, \
                    warnings also give 1.

                    Examples:
                      chainwatch policy check /etc/chainwatch/policy.yaml
                      chainwatch policy check policies/*.yaml policies/examples/*.yaml
                      chainwatch policy check --strict policy.yaml     # CI: warnings fail
                    """)

            @Argument(help: ArgumentHelp("Policy files to check.", valueName: "file"))
            var files: [String]

            @Flag(help: "Exit 1 on warnings too (for CI).")
            var strict = false

            func run() throws {
                var errors = 0, warnings = 0, unreadable = 0
                for file in files {
                    if let why = PolicyFileAccess.problem(file) {
                        PolicyFileAccess.printError("\(file): cannot read policy file: \(why)")
                        unreadable += 1
                        continue
                    }
                    for d in Linter.lint(path: file) {
                        print(d.description)
                        if d.severity == .error { errors += 1 } else { warnings += 1 }
                    }
                }
                print(Self.summary(files: files.count, errors: errors, warnings: warnings, unreadable: unreadable, strict: strict))
                if errors + unreadable > 0 || (strict && warnings > 0) { throw ExitCode(1) }
            }

            static func summary(files: Int, errors: Int, warnings: Int, unreadable: Int, strict: Bool) -> String {
                func count(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }
                var text = "\(count(files, "file")) checked: \(count(errors, "error")), \(count(warnings, "warning"))"
                if unreadable > 0 { text += ", \(unreadable) unreadable" }
                if strict, warnings > 0, errors + unreadable == 0 { text += " (--strict: warnings fail)" }
                return text
            }
        }

        struct Explain: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "explain",
                abstract: "Say which rule applies to a host and every check it runs, in plain words.",
                usage: """
                    chainwatch policy explain FILE HOST[:PORT]
                    chainwatch policy explain [--builtin] HOST[:PORT]
                    """,
                discussion: """
                    Prints the rule that HOST on PORT (default 443) gets under the policy in FILE and why (the \
                    matching pattern: exact host, *. wildcard or domain with subdomains; the most specific wins), \
                    or says that no rule matches and the defaults apply. Then, in order, every check with the reason \
                    code it reports: protocol profile, path validation and its anchors, hostname, pins per level, \
                    non-system anchor, SNI mismatch, and what happens to failed probes, non-TLS bytes and plain HTTP.

                    With --builtin, or with no FILE, it explains the built-in default that `chainwatch run` uses \
                    without a policy file (system trust, alert).

                    A FILE with errors is not explained: its diagnostics go to stderr and the exit status is 1 \
                    (run `chainwatch policy check FILE`). Warnings go to stderr; the explanation goes to stdout.

                    Examples:
                      chainwatch policy explain policy.yaml www.shop.example.com
                      chainwatch policy explain policy.yaml git.internal.example.com:8443
                      chainwatch policy explain policy.yaml '[2001:db8::1]:443'
                      chainwatch policy explain --builtin example.com
                    """)

            @Argument(help: ArgumentHelp("The policy file (optional), then the host: FILE HOST[:PORT] or HOST[:PORT].",
                                         valueName: "file-and-host"))
            var words: [String] = []

            @Flag(help: "Explain the built-in default policy (system trust, alert) instead of a file.")
            var builtin = false

            func validate() throws {
                switch (words.count, builtin) {
                case (0, _): throw ValidationError("name a host: explain FILE HOST[:PORT], or explain --builtin HOST[:PORT]")
                case (1, _): break
                case (2, false): break
                case (2, true): throw ValidationError("--builtin explains the built-in default: give a HOST only, not a FILE")
                default: throw ValidationError("too many arguments: explain FILE HOST[:PORT]")
                }
                guard let target = words.last else { return }
                if words.count == 1, !builtin, Self.looksLikeFile(target) {
                    throw ValidationError("'\(target)' looks like a policy file: name the host too, explain FILE HOST[:PORT]")
                }
                _ = try Self.parseTarget(target)
            }

            func run() throws {
                let (host, port) = try Self.parseTarget(words.last!)
                let policy: ChainwatchCore.Policy
                if words.count == 2 {
                    let file = words[0]
                    if let why = PolicyFileAccess.problem(file) {
                        PolicyFileAccess.printError("\(file): cannot read policy file: \(why)")
                        throw ExitCode(1)
                    }
                    do {
                        let loaded = try PolicyLoader.loadWithWarnings(path: file)
                        loaded.warnings.forEach { PolicyFileAccess.printError($0.description) }
                        policy = loaded.policy
                    } catch {
                        error.diagnostics.forEach { PolicyFileAccess.printError($0.description) }
                        PolicyFileAccess.printError("\(file): not explained: the policy has \(error.errors.count) error(s); chainwatch would refuse it")
                        throw ExitCode(1)
                    }
                    print("Policy: \(file)")
                } else {
                    policy = .builtIn
                    print("Policy: the built-in default (no policy file): system trust, alert")
                }
                print(Explainer.explain(policy, host: host, port: port), terminator: "")
            }

            /// `host`, `host:port`, `[v6]:port` or a bare IPv6 literal; port 443 when none is given.
            static func parseTarget(_ text: String) throws -> (host: String, port: UInt16) {
                let pattern: HostPattern
                do {
                    pattern = try HostPattern(parsing: text)
                } catch {
                    throw ValidationError("'\(text)' is not HOST[:PORT] (e.g. api.example.com, api.example.com:8443, [2001:db8::1]:443)")
                }
                guard case .exact(let host) = pattern.kind else {
                    throw ValidationError("'\(text)' is a pattern; explain takes one host name, e.g. www.example.com")
                }
                return (host, pattern.port ?? 443)
            }

            static func looksLikeFile(_ text: String) -> Bool {
                text.hasSuffix(".yaml") || text.hasSuffix(".yml") || text.contains("/")
                    || FileManager.default.fileExists(atPath: text)
            }
        }
    }
}

/// Checks a policy path before loading, to say precisely why it cannot be read.
enum PolicyFileAccess {
    /// nil when `path` is a readable regular file (or a link to one); else a short reason.
    static func problem(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return "no such file" }
        if isDirectory.boolValue { return "it is a directory" }
        guard FileManager.default.isReadableFile(atPath: path) else { return "permission denied" }
        return nil
    }

    /// One line on stderr.
    static func printError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
