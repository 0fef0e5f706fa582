import ChainwatchCore

/// One problem found in a policy file, at an exact line and column.
public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    /// Errors stop a load (`run` refuses the file); warnings are printed and the file loads.
    public enum Severity: String, Sendable, Hashable, Comparable {
        case warning, error
        public static func < (a: Severity, b: Severity) -> Bool { a == .warning && b == .error }
    }

    public var file: String
    /// 1-based.
    public var line: Int
    /// 1-based, in Unicode scalars (as libyaml counts).
    public var column: Int
    public var severity: Severity
    public var message: String
    /// What to do about it; nil when there is nothing useful to add.
    public var hint: String?

    public init(file: String, line: Int, column: Int, severity: Severity, message: String, hint: String? = nil) {
        self.file = file; self.line = line; self.column = column
        self.severity = severity; self.message = message; self.hint = hint
    }

    /// `file:line:col: error: message (hint: ...)`, the form compilers use so editors can jump to it.
    public var description: String {
        "\(file):\(line):\(column): \(severity.rawValue): \(message)" + (hint.map { " (hint: \($0))" } ?? "")
    }
}

/// A policy file that cannot be used: its error diagnostics (and the warnings found alongside).
public struct PolicyLoadError: Error, Sendable, CustomStringConvertible {
    /// All diagnostics, errors and warnings, in file order. At least one is an error.
    public var diagnostics: [Diagnostic]
    public init(diagnostics: [Diagnostic]) { self.diagnostics = diagnostics }
    public var errors: [Diagnostic] { diagnostics.filter { $0.severity == .error } }
    /// One diagnostic per line.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}
