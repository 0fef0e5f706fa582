internal import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Certificate {
    /// Whether this certificate names `host`, by OpenSSL's own matcher: `X509_check_ip_asc` for IP literals
    /// (`127.0.0.1`, `::1`, `[::1]`), else `X509_check_host` on DNS SANs only, the way browsers match:
    /// no fallback to the subject CN (`X509_CHECK_FLAG_NEVER_CHECK_SUBJECT`) and no partial wildcards such as
    /// `f*.example.com` (`X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS`). A trailing dot is ignored.
    ///
    /// A reference implementation to cross-check chainwatch's pure hostname check (which reads
    /// `facts.dnsNames` / `facts.ipAddresses`); the proxy does not call it.
    public func matchesHostname(_ host: String) -> Bool {
        var name = Substring(host)
        if name.hasPrefix("["), name.hasSuffix("]") { name = name.dropFirst().dropLast() }
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty else { return false }
        let text = String(name)
        if Certificate.isIPLiteral(text) {
            return X509_check_ip_asc(raw, text, 0) == 1
        }
        let flags = UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS)
        return X509_check_host(raw, text, text.utf8.count, flags, nil) == 1
    }

    /// Whether `text` is an IPv4 or IPv6 literal (`inet_pton`).
    static func isIPLiteral(_ text: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, text, &buffer) == 1 || inet_pton(AF_INET6, text, &buffer) == 1
    }
}
