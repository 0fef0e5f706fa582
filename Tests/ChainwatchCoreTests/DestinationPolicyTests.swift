import Testing
@testable import ChainwatchCore

private func bytes(_ text: String) -> [UInt8] { IPAddressText.parse(text)! }

@Suite struct DestinationPolicyTests {
    let onLoopback = DestinationPolicy(listenAddress: bytes("127.0.0.1"), listenPort: 3128)
    let serving = DestinationPolicy(listenAddress: bytes("0.0.0.0"), listenPort: 3128)

    @Test func metadataLinkLocalAndSpecialAddressesAreRefused() {
        #expect(onLoopback.refusal(address: bytes("169.254.169.254"), port: 80)?.contains("metadata") == true)
        #expect(onLoopback.refusal(address: bytes("::ffff:169.254.169.254"), port: 80) != nil)   // mapped: as IPv4
        #expect(onLoopback.refusal(address: bytes("fe80::1"), port: 443) == "link-local")
        #expect(onLoopback.refusal(address: bytes("0.0.0.0"), port: 443) == "unspecified")
        #expect(onLoopback.refusal(address: bytes("224.0.0.1"), port: 443) == "multicast")
        #expect(onLoopback.refusal(address: bytes("93.184.216.34"), port: 443) == nil)
        #expect(onLoopback.refusal(address: bytes("10.1.2.3"), port: 443) == nil)
    }

    @Test func loopbackIsRefusedOnlyWhenTheProxyServesOtherMachines() {
        #expect(onLoopback.refusal(address: bytes("127.0.0.1"), port: 8443) == nil)
        #expect(serving.refusal(address: bytes("127.0.0.1"), port: 8443) == "loopback")
        #expect(serving.refusal(address: bytes("::ffff:127.0.0.1"), port: 8443) == "loopback")
        #expect(serving.refusal(address: bytes("::1"), port: 8443) == "loopback")
    }

    /// The admin listener is the proxy too: a page could otherwise clear the known-bad marks or read /state through
    /// the proxy (CONNECT to the admin port, by its address or by a name for it).
    @Test func theAdminListenerIsNeverADestination() {
        let withAdmin = DestinationPolicy(listenAddress: bytes("127.0.0.1"), listenPort: 3128,
                                          otherOwn: [(bytes("127.0.0.1"), 9128, "admin"), (bytes("127.0.0.1"), 1080, "SOCKS")], operatorNames: ["admin.test"])
        #expect(withAdmin.refusal(address: bytes("127.0.0.1"), port: 9128) == "the proxy's admin listener")
        #expect(withAdmin.refusal(address: bytes("::ffff:127.0.0.1"), port: 9128) == "the proxy's admin listener")
        #expect(withAdmin.refusal(address: bytes("127.0.0.1"), port: 9128, name: "admin.test") == "the proxy's admin listener")
        #expect(withAdmin.refusal(address: bytes("127.0.0.1"), port: 1080) == "the proxy's SOCKS listener")
        #expect(withAdmin.refusal(address: bytes("127.0.0.1"), port: 9129) == nil)
        let wildcardAdmin = DestinationPolicy(listenAddress: bytes("127.0.0.1"), listenPort: 3128, otherOwn: [(bytes("0.0.0.0"), 9128, "admin")])
        #expect(wildcardAdmin.refusal(address: bytes("127.0.0.9"), port: 9128) == "the proxy's admin listener")
    }

    /// A name the resolver maps to loopback is refused even on a loopback listener (squid's `to_localhost`): a page
    /// that rebinds its name to 127.0.0.1 would reach the host's loopback-only services. Literals, `localhost`, the
    /// operator's `--hosts` names and `--allow-destination` networks stay allowed.
    @Test func aNameResolvedToLoopbackIsRefusedUnlessTheOperatorMappedIt() {
        let hosts = HostsFile(text: "127.0.0.1 genuine.test Other.Test.\n::1 v6.test\n")
        let policy = DestinationPolicy(listenAddress: bytes("127.0.0.1"), listenPort: 3128, operatorNames: hosts.names)
        #expect(policy.refusal(address: bytes("127.0.0.1"), port: 8443, name: "rebound.example")?.contains("DNS rebinding") == true)
        #expect(policy.refusal(address: bytes("::1"), port: 8443, name: "rebound.example") != nil)
        #expect(policy.refusal(address: bytes("::ffff:127.0.0.1"), port: 8443, name: "rebound.example") != nil)
        #expect(policy.refusal(address: bytes("127.0.0.1"), port: 8443, name: "127.0.0.1") == nil)
        #expect(policy.refusal(address: bytes("::1"), port: 8443, name: "[::1]") == nil)
        #expect(policy.refusal(address: bytes("127.0.0.1"), port: 8443, name: "localhost") == nil)
        #expect(policy.refusal(address: bytes("127.0.0.1"), port: 8443, name: "app.localhost.") == nil)
        #expect(policy.refusal(address: bytes("127.0.0.1"), port: 8443, name: "GENUINE.test") == nil)
        #expect(policy.refusal(address: bytes("127.0.0.1"), port: 8443, name: "other.test") == nil)
        #expect(policy.refusal(address: bytes("::1"), port: 8443, name: "v6.test") == nil)
        #expect(policy.refusal(address: bytes("93.184.216.34"), port: 443, name: "example.com") == nil)
        let exempt = DestinationPolicy(listenAddress: bytes("127.0.0.1"), listenPort: 3128, allow: [CIDR("127.0.0.0/8")!])
        #expect(exempt.refusal(address: bytes("127.0.0.1"), port: 8443, name: "rebound.example") == nil)
    }

    @Test func theProxyItselfIsNeverADestination() {
        #expect(onLoopback.refusal(address: bytes("127.0.0.1"), port: 3128) == "the proxy itself")
        #expect(onLoopback.refusal(address: bytes("::ffff:127.0.0.1"), port: 3128) == "the proxy itself")
        #expect(serving.refusal(address: bytes("127.0.0.5"), port: 3128) == "the proxy itself")
        // A wildcard listener answers on the host's other addresses too: a CONNECT to one of them nested a tunnel.
        let wildcard = DestinationPolicy(listenAddress: bytes("::"), listenPort: 3128,
                                         localAddresses: [bytes("192.0.2.2"), bytes("fd00::2")])
        #expect(wildcard.refusal(address: bytes("192.0.2.2"), port: 3128) == "the proxy itself")
        #expect(wildcard.refusal(address: bytes("::ffff:192.0.2.2"), port: 3128) == "the proxy itself")
        #expect(wildcard.refusal(address: bytes("fd00::2"), port: 3128) == "the proxy itself")
        #expect(wildcard.refusal(address: bytes("192.0.2.2"), port: 443) == nil, "other ports of the host stay reachable")
        #expect(wildcard.refusal(address: bytes("192.0.2.3"), port: 3128) == nil)
        #expect(serving.refusal(address: bytes("192.0.2.2"), port: 3128) == nil, "not a local address of this policy")
        let exempt = DestinationPolicy(listenAddress: bytes("127.0.0.1"), listenPort: 3128, allow: [CIDR("127.0.0.0/8")!])
        #expect(exempt.refusal(address: bytes("127.0.0.1"), port: 3128) == "the proxy itself")
    }

    @Test func allowExemptsAndDenyAdds() {
        let p = DestinationPolicy(listenAddress: bytes("0.0.0.0"), listenPort: 3128,
                                  deny: [CIDR("10.0.0.0/8")!], allow: [CIDR("127.0.0.0/8")!, CIDR("169.254.1.0/24")!])
        #expect(p.refusal(address: bytes("127.0.0.1"), port: 8443) == nil)
        #expect(p.refusal(address: bytes("169.254.1.9"), port: 80) == nil)
        #expect(p.refusal(address: bytes("169.254.169.254"), port: 80) != nil)
        #expect(p.refusal(address: bytes("10.9.9.9"), port: 443) == "denied by --deny-destination")
    }
}
