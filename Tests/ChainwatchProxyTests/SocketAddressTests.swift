import ChainwatchEventLoop
import Glibc
import Testing

/// `SocketAddress(numeric:port:)`: bare literals take the inet_pton path, everything else the evutil parser.
struct SocketAddressTests {
    @Test(arguments: [("127.0.0.1", AF_INET, "127.0.0.1:443"), ("::1", AF_INET6, "[::1]:443"),
                      ("2001:db8::7", AF_INET6, "[2001:db8::7]:443"), ("10.0.0.255", AF_INET, "10.0.0.255:443")])
    func bareLiteralGetsThePort(_ text: String, _ family: Int32, _ description: String) throws {
        let address = try #require(SocketAddress(numeric: text, port: 443))
        #expect(address.family == family)
        #expect(address.port == 443)
        #expect(address.description == description)
    }

    /// A wildcard listener's own addresses: the host's interfaces, loopback among them, as the kernel lists them
    /// (`ip -o addr` shows the same on this machine).
    @Test func localAddressesHoldLoopback() {
        let local = SocketAddress.localAddresses()
        #expect(local.contains([127, 0, 0, 1]))
        #expect(local.allSatisfy { $0.count == 4 || $0.count == 16 })
    }

    /// A client's shares are counted per IPv4 address and per IPv6 /64: an adversarial try filled the probe line
    /// from ten loopback addresses; one IPv6 host has 2^64 of them.
    @Test func clientsAreCountedByIPv4AddressAndIPv6Slash64() throws {
        func key(_ text: String) throws -> [UInt8] { try #require(SocketAddress(numeric: text, port: 1)).clientKey }
        #expect(try key("192.0.2.7") == [192, 0, 2, 7])
        #expect(try key("192.0.2.7") != key("192.0.2.8"))
        #expect(try key("::ffff:192.0.2.7") == key("192.0.2.7"))
        #expect(try key("2001:db8:1:2::7") == key("2001:db8:1:2:ffff:1:2:3"))
        #expect(try key("2001:db8:1:2::7") == [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2])
        #expect(try key("2001:db8:1:2::7") != key("2001:db8:1:3::7"))
    }

    @Test func addressWithItsOwnPortKeepsIt() throws {
        #expect(try #require(SocketAddress(numeric: "1.2.3.4:80", port: 443)).port == 80)
        #expect(try #require(SocketAddress(numeric: "[::1]:8443")).description == "[::1]:8443")
    }

    @Test(arguments: ["example.com", "256.1.1.1", "1.2.3", "", "::g"])
    func namesAndNonsenseAreNotLiterals(_ text: String) {
        #expect(SocketAddress(numeric: text, port: 443) == nil)
    }

    @Test func literalEqualsTheSameAddressParsedWithItsPort() throws {
        let fast = try #require(SocketAddress(numeric: "192.0.2.1", port: 8080))
        let parsed = try #require(SocketAddress(numeric: "192.0.2.1:8080"))
        #expect(fast == parsed)
    }

    /// Equal exactly when family, port and address are (bytes of `sockaddr_storage` past them do not count), with equal
    /// hashes: addresses key the probe cache.
    @Test func equalityAndHashReadFamilyPortAndAddress() throws {
        let texts = ["192.0.2.1:443", "192.0.2.1:444", "192.0.2.2:443", "[::ffff:192.0.2.1]:443", "[2001:db8::1]:443",
                     "[2001:db8::2]:443", "[2001:db8::1]:80"]
        let addresses = try texts.map { try #require(SocketAddress(numeric: $0)) }
        #expect(Set(addresses).count == texts.count)
        for (index, text) in texts.enumerated() {
            let again = try #require(SocketAddress(numeric: text))
            #expect(again == addresses[index] && again.hashValue == addresses[index].hashValue)
            #expect(addresses.filter { $0 == again }.count == 1)
        }
    }
}
