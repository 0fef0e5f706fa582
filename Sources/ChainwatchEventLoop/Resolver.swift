internal import CLibevent
import Glibc

/// Why a name did not resolve.
public struct ResolveError: Error, Sendable, CustomStringConvertible {
    public var host: String
    public var message: String
    public var description: String { "cannot resolve \(host): \(message)" }
}

extension EventLoop {
    /// Resolves `host` (a name or an IP literal) to TCP addresses with `port`: the hosts files first, then DNS,
    /// asynchronously on this loop (evdns). `completion` runs on the loop's thread, possibly before this returns.
    public func resolve(host: String, port: UInt16, completion: @escaping (Result<[SocketAddress], ResolveError>) -> Void) {
        if let literal = SocketAddress(numeric: host, port: port) {
            completion(.success([literal]))
            return
        }
        guard let dns else {
            completion(.failure(ResolveError(host: host, message: "no resolver")))
            return
        }
        final class Request {
            let host: String, completion: (Result<[SocketAddress], ResolveError>) -> Void
            init(host: String, completion: @escaping (Result<[SocketAddress], ResolveError>) -> Void) { self.host = host; self.completion = completion }
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = EVUTIL_AI_ADDRCONFIG
        let request = Unmanaged.passRetained(Request(host: host, completion: completion))
        _ = evdns_getaddrinfo(dns, host, String(port), &hints, { result, list, ctx in
            let request = Unmanaged<Request>.fromOpaque(ctx!).takeRetainedValue()
            guard result == 0, let list else {
                let message = result == EVUTIL_EAI_CANCEL ? "cancelled" : String(cString: evutil_gai_strerror(result))
                request.completion(.failure(ResolveError(host: request.host, message: message)))
                return
            }
            var addresses: [SocketAddress] = []
            var node: UnsafeMutablePointer<addrinfo>? = list
            while let n = node {
                if let sa = n.pointee.ai_addr { addresses.append(SocketAddress(sa, length: socklen_t(n.pointee.ai_addrlen))) }
                node = n.pointee.ai_next
            }
            evutil_freeaddrinfo(list)
            // IPv4 first: loopback test setups and most upstreams answer there; IPv6 is still tried next.
            addresses.sort { $0.family == AF_INET && $1.family != AF_INET }
            request.completion(addresses.isEmpty ? .failure(ResolveError(host: request.host, message: "no addresses")) : .success(addresses))
        }, request.toOpaque())
    }
}
