internal import COpenSSL

/// A failed OpenSSL call, named, with the error queue drained into text.
public struct OpenSSLError: Error, Sendable, CustomStringConvertible {
    public var call: String
    public var queue: [String]
    public var description: String { queue.isEmpty ? "\(call) failed" : "\(call) failed: \(queue.joined(separator: "; "))" }

    /// Reads and clears this thread's OpenSSL error queue; call on the line after the failing call.
    public static func drainingQueue(call: String) -> OpenSSLError {
        var lines: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            lines.append(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return OpenSSLError(call: call, queue: lines)
    }
}
