/// Whether a request to the admin listener comes from its operator, not from a web page in a browser on the same
/// host. Pure.
///
/// - DNS rebinding: a page whose name rebinds to 127.0.0.1 reaches the listener with its own name in `Host`. From a
///   loopback peer, only an address literal, `localhost` or `*.localhost`, or no `Host` at all, is answered (a remote
///   scraper that `--allow-client` admits may use a name).
/// - Cross-site requests: a page can send a "simple" POST without a preflight, but not one with a header of its own
///   choosing. A state-changing request (POST) must carry `X-Chainwatch-Admin: 1` (`chainwatch ctl` sends it), and a
///   request with an `Origin` (only browsers send one) is refused.
public enum AdminRequestCheck {
    /// The header a state-changing request must carry, and its value.
    public static let headerName = "X-Chainwatch-Admin"
    public static let headerValue = "1"

    /// Why the request is refused (403 with this text); nil: answer it.
    public static func refusal(method: String, host: String?, origin: String?, adminHeader: String?,
                               peerIsLoopback: Bool) -> String? {
        if peerIsLoopback, let host, !hostIsAnAddress(host) {
            return "Host \(host.prefix(100)) is not this listener's address: use an IP address or localhost"
        }
        if origin != nil { return "requests from web pages (with an Origin) are not answered" }
        if method == "POST", adminHeader != headerValue {
            return "a state-changing request needs the header \(headerName): \(headerValue) (chainwatch ctl sends it)"
        }
        return nil
    }

    /// Whether a `Host` value names an address, not a name a page could rebind: an IP literal or localhost, with an
    /// optional port.
    static func hostIsAnAddress(_ value: String) -> Bool {
        var host = Substring(value)
        if host.first == "[" {   // [v6]:port
            guard let close = host.firstIndex(of: "]") else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && rest.dropFirst().allSatisfy(\.isNumber)) else { return false }
            return HostName.ipAddressBytes(host[...close]) != nil
        }
        if let colon = host.lastIndex(of: ":"), host.firstIndex(of: ":") == colon {   // name-or-v4:port
            guard host[host.index(after: colon)...].allSatisfy(\.isNumber) else { return false }
            host = host[..<colon]
        }
        var name = host.lowercased()
        while name.hasSuffix(".") { name.removeLast() }
        return HostName.ipAddressBytes(name) != nil || name == "localhost" || name.hasSuffix(".localhost")
    }
}
