import COpenSSL

/// Why a bench run could not be set up or did not pass. The message is shown to the user as is.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Drains the calling thread's OpenSSL error queue into one line (empty when the queue is empty).
func drainOpenSSLErrors() -> String {
    var parts: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        parts.append(openSSLErrorString(code))
    }
    return parts.joined(separator: "; ")
}

/// One OpenSSL error code as text.
func openSSLErrorString(_ code: UInt) -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
