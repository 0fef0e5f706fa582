internal import COpenSSL

/// A failed OpenSSL call, named, with the error queue drained into text.
public struct OpenSSLError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The C call that failed, e.g. `SSL_connect`.
    public var call: String
    /// The error queue as `ERR_error_string_n` prints it, oldest first.
    public var queue: [String]

    public init(call: String, queue: [String]) {
        self.call = call
        self.queue = queue
    }

    public var description: String { queue.isEmpty ? "\(call) failed" : "\(call) failed: \(queue.joined(separator: "; "))" }

    /// The reason part of each queue entry (`tlsv1 alert protocol version`), for messages read by people.
    public var reasons: [String] {
        queue.map { line in
            // error:0A00042E:SSL routines::tlsv1 alert protocol version → the fifth field.
            let fields = line.split(separator: ":", maxSplits: 4, omittingEmptySubsequences: false)
            return fields.count == 5 ? String(fields[4]) : line
        }
    }

    /// Whether a handshake failed on a message larger than its limit (`SSL_R_EXCESSIVE_MESSAGE_SIZE`: for a client,
    /// the server's Certificate over `TLSClient`'s `maxCertificateList`).
    public var isExcessiveMessageSize: Bool { reasons.contains("excessive message size") }

    /// Reads and clears this thread's OpenSSL error queue; call on the line after the failing call. The one place
    /// the queue is drained into text.
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
