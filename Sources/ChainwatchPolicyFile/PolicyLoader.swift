import ChainwatchCore
import Foundation

/// Reads policy files. `run` and reload call `load`; a file with any error is refused whole (the caller keeps
/// the policy it had), so a mistake never silently weakens protection.
public enum PolicyLoader {
    /// Loads and validates the policy at `path`; throws every error (and the warnings) found.
    /// - Parameters:
    ///   - now: for pin-set expiry warnings; defaults to the wall clock.
    ///   - inspector: judges anchor certificates (CA or not); the proxy may pass one backed by OpenSSL.
    public static func load(path: String, now: UnixTime? = nil, inspector: AnchorInspector = .builtIn) throws(PolicyLoadError) -> Policy {
        try loadWithWarnings(path: path, now: now, inspector: inspector).policy
    }

    /// Like `load`, and also returns the warnings so `run` can print them.
    public static func loadWithWarnings(path: String, now: UnixTime? = nil, inspector: AnchorInspector = .builtIn)
        throws(PolicyLoadError) -> (policy: Policy, warnings: [Diagnostic]) {
        try load(contents: read(path: path), path: path, now: now, inspector: inspector)
    }

    /// A policy file's bytes, or the diagnostic that it cannot be read.
    public static func read(path: String) throws(PolicyLoadError) -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PolicyLoadError(diagnostics: [Diagnostic(file: path, line: 1, column: 1, severity: .error,
                                                           message: "cannot read policy file", hint: "check the path and permissions")])
        }
        return data
    }

    /// Loads a policy file's bytes, read once by the caller (the reloader hashes the same bytes it loads).
    public static func load(contents data: Data, path: String, now: UnixTime? = nil, inspector: AnchorInspector = .builtIn)
        throws(PolicyLoadError) -> (policy: Policy, warnings: [Diagnostic]) {
        guard let text = String(data: data, encoding: .utf8) else {
            throw PolicyLoadError(diagnostics: [Diagnostic(file: path, line: 1, column: 1, severity: .error,
                                                           message: "policy file is not UTF-8 text")])
        }
        return try load(yaml: text, path: path, now: now, inspector: inspector)
    }

    /// Loads policy text; `path` names it in diagnostics and anchors PEM paths (its directory).
    public static func load(yaml: String, path: String, now: UnixTime? = nil, inspector: AnchorInspector = .builtIn)
        throws(PolicyLoadError) -> (policy: Policy, warnings: [Diagnostic]) {
        var parser = PolicyParser(file: path, now: now ?? .wallClock(), inspector: inspector)
        let policy = parser.parse(yaml: yaml)
        let diagnostics = sorted(parser.diagnostics)
        guard let policy, !diagnostics.contains(where: { $0.severity == .error }) else {
            throw PolicyLoadError(diagnostics: diagnostics)
        }
        return (policy, diagnostics)
    }

    static func sorted(_ d: [Diagnostic]) -> [Diagnostic] {
        d.enumerated().sorted { a, b in
            (a.element.line, a.element.column, a.offset) < (b.element.line, b.element.column, b.offset)
        }.map(\.element)
    }
}

/// `chainwatch policy check`: every problem in a file, errors and warnings, in file order.
public enum Linter {
    public static func lint(path: String, now: UnixTime? = nil, inspector: AnchorInspector = .builtIn) -> [Diagnostic] {
        do {
            return try PolicyLoader.loadWithWarnings(path: path, now: now, inspector: inspector).warnings
        } catch {
            return error.diagnostics
        }
    }

    public static func lint(yaml: String, path: String, now: UnixTime? = nil, inspector: AnchorInspector = .builtIn) -> [Diagnostic] {
        do {
            return try PolicyLoader.load(yaml: yaml, path: path, now: now, inspector: inspector).warnings
        } catch {
            return error.diagnostics
        }
    }

    /// The exit status for `policy check`: 1 when any diagnostic is an error.
    public static func exitStatus(_ diagnostics: [Diagnostic]) -> Int32 {
        diagnostics.contains { $0.severity == .error } ? 1 : 0
    }
}

extension UnixTime {
    /// The wall clock, read here (the core never reads one).
    static func wallClock() -> UnixTime { UnixTime(seconds: Int64(Date().timeIntervalSince1970)) }
}
