internal import CLibevent
import Glibc

/// An IPv4 or IPv6 socket address (a copy of a `sockaddr_storage`).
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    var storage: sockaddr_storage
    var length: socklen_t

    init(_ pointer: UnsafePointer<sockaddr>, length: socklen_t) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: Int(min(length, socklen_t(MemoryLayout<sockaddr_storage>.size)))))
        }
        self.storage = storage
        self.length = length
    }

    /// Parses a numeric `ADDR:PORT`, `[V6]:PORT`, or a bare address (`127.0.0.1`, `::1`) with `port`.
    public init?(numeric text: String, port: UInt16? = nil) {
        if let port, let address = Self.literal(text, port: port) {   // a bare address and a port
            self = address
            return
        }
        var storage = sockaddr_storage()   // ADDR:PORT, [V6]:PORT, or a bare address whose port is `port` (or 0)
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let parsed = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { evutil_parse_sockaddr_port(text, $0, &length) }
        }
        guard parsed == 0 else { return nil }
        self.storage = storage
        self.length = socklen_t(length)
        if let port, self.port == 0 { self.port = port }
    }

    /// `text` as a bare IPv4 or IPv6 address (inet_pton) with `port`, or nil.
    private static func literal(_ text: String, port: UInt16) -> SocketAddress? {
        var storage = sockaddr_storage()
        let length: Int
        if withUnsafeMutablePointer(to: &storage, { p in
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet_pton(AF_INET, text, &$0.pointee.sin_addr) }
        }) == 1 {
            storage.ss_family = sa_family_t(AF_INET)
            length = MemoryLayout<sockaddr_in>.size
        } else if withUnsafeMutablePointer(to: &storage, { p in
            p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { inet_pton(AF_INET6, text, &$0.pointee.sin6_addr) }
        }) == 1 {
            storage.ss_family = sa_family_t(AF_INET6)
            length = MemoryLayout<sockaddr_in6>.size
        } else {
            return nil
        }
        var address = SocketAddress(storage: storage, length: socklen_t(length))
        address.port = port
        return address
    }

    private init(storage: sockaddr_storage, length: socklen_t) {
        self.storage = storage
        self.length = length
    }

    public var family: Int32 { Int32(storage.ss_family) }

    public var port: UInt16 {
        get {
            withUnsafeBytes(of: storage) { raw in
                family == AF_INET6 ? UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
                                   : UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
            }
        }
        set {
            withUnsafeMutableBytes(of: &storage) { raw in raw.storeBytes(of: newValue.bigEndian, toByteOffset: 2, as: UInt16.self) }
        }
    }

    /// The address as text, without the port (`127.0.0.1`, `::1`).
    public var ip: String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        var copy = storage
        return withUnsafePointer(to: &copy) { p in
            p.withMemoryRebound(to: UInt8.self, capacity: MemoryLayout<sockaddr_storage>.size) { bytes in
                let src = UnsafeRawPointer(bytes + (family == AF_INET6 ? 8 : 4))
                return inet_ntop(family, src, &buf, socklen_t(buf.count)) != nil ? String(cString: buf) : "?"
            }
        }
    }

    /// The addresses (4 or 16 bytes) of the host's interfaces, from getifaddrs(3); empty when it fails.
    public static func localAddresses() -> [[UInt8]] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var found: [[UInt8]] = []
        var entry = list
        while let current = entry {
            if let sa = current.pointee.ifa_addr {
                switch Int32(sa.pointee.sa_family) {
                case AF_INET:
                    sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        found.append(withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) })
                    }
                case AF_INET6:
                    sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        found.append(withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) })
                    }
                default:
                    break
                }
            }
            entry = current.pointee.ifa_next
        }
        return found
    }

    /// The raw address bytes (4 or 16), for CIDR matching.
    public var addressBytes: [UInt8] {
        withUnsafeBytes(of: storage) { raw in Array(raw[addressRange]) }
    }

    /// What a client's shares (held bytes, probes in flight, spare connections) are counted by: an IPv4 address
    /// whole, an IPv4-mapped IPv6 address as that IPv4 address, any other IPv6 address by its /64, the prefix one host
    /// or one customer holds (a host that takes a new address from its /64 for each connection is one client).
    public var clientKey: [UInt8] {
        let bytes = addressBytes
        guard bytes.count == 16 else { return bytes }
        if bytes[..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12...]) }
        return Array(bytes[..<8])
    }

    public var description: String { family == AF_INET6 ? "[\(ip)]:\(port)" : "\(ip):\(port)" }

    /// connect(2)s a blocking socket to this address; false with errno set when it fails.
    public func connect(_ fd: Int32) -> Bool {
        withSockaddr { sa, len in Glibc.connect(fd, sa, len) } == 0
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var copy = storage
        return withUnsafePointer(to: &copy) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }

    /// Family, port and address bytes, read in place (a probe-cache key is an address: looked up several times per
    /// tunnel, and `addressBytes` allocates).
    public static func == (a: SocketAddress, b: SocketAddress) -> Bool {
        guard a.family == b.family, a.port == b.port else { return false }
        let range = a.addressRange
        return withUnsafeBytes(of: a.storage) { x in
            withUnsafeBytes(of: b.storage) { y in memcmp(x.baseAddress! + range.lowerBound, y.baseAddress! + range.lowerBound, range.count) == 0 }
        }
    }
    public func hash(into h: inout Hasher) {
        h.combine(family)
        h.combine(port)
        let range = addressRange
        withUnsafeBytes(of: storage) { raw in h.combine(bytes: UnsafeRawBufferPointer(rebasing: raw[range])) }
    }

    /// Where `addressBytes` lie in `storage`.
    private var addressRange: Range<Int> { family == AF_INET6 ? 8..<24 : 4..<8 }
}

extension SocketAddress {
    /// Where a connection that a firewall redirected to this socket was going (netfilter's `SO_ORIGINAL_DST`, IPv4, or
    /// `IP6T_SO_ORIGINAL_DST`, IPv6: both option 80), or, for a connection a `tproxy` rule delivered, the socket's own
    /// local address, which then is the original destination. nil when neither is known.
    public static func originalDestination(of fd: Int32) -> SocketAddress? {
        let SO_ORIGINAL_DST: Int32 = 80
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        for level in [SOL_IP, SOL_IPV6] {
            length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let found = withUnsafeMutablePointer(to: &storage) { getsockopt(fd, level, SO_ORIGINAL_DST, $0, &length) } == 0
            if found, length > 0, storage.ss_family == sa_family_t(AF_INET) || storage.ss_family == sa_family_t(AF_INET6) {
                return SocketAddress(storage: storage, length: length)
            }
        }
        return localAddress(of: fd)
    }

    /// The socket's local address (getsockname(2)); nil when it fails.
    public static func localAddress(of fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        } == 0
        return ok ? SocketAddress(storage: storage, length: length) : nil
    }
}
