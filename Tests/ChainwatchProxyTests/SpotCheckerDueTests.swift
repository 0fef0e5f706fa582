import ChainwatchCore
import ChainwatchEventLoop
@testable import ChainwatchProxy
import Testing

/// A spot check beside a tunnel waits for a tunnel to the same name and address, of the client and stack it was drawn
/// for (the client's address, the `CONNECT`'s User-Agent): checks are drawn per hello shape, and one carried by another
/// stack's tunnel would be made with that tunnel's hello, so a forger of one browser's connections beside busy traffic
/// of another client would meet only a share of its checks; and one carried by another client's tunnel would ride at
/// a moment that client chose.
struct SpotCheckerDueTests {
    let address = SocketAddress(numeric: "192.0.2.7", port: 443)!
    let chromeStack = SpareLedger.stack(userAgent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/131.0.0.0")
    let curlStack = SpareLedger.stack(userAgent: "curl/7.88.1")

    /// A check made due at `now` for `party` (given back by a tunnel that took it, as the tests mark one).
    static func due(_ party: SpotChecker.Party, _ now: Int64) -> SpotChecker.Due {
        SpotChecker.Due(stack: party, marked: now, expires: now + 300_000)
    }

    func takes(_ checker: SpotChecker, _ address: SocketAddress, host: String, party: SpotChecker.Party, now: Int64) -> Bool {
        checker.takeDue(address, host: host, party: party, now: now) != nil
    }
    let here: [UInt8] = [10, 0, 0, 5]
    var chrome: SpotChecker.Party { SpotChecker.Party(client: here, stack: chromeStack) }
    var curl: SpotChecker.Party { SpotChecker.Party(client: here, stack: curlStack) }

    @Test func aCheckWaitsForATunnelOfItsOwnStack() {
        let checker = SpotChecker()
        checker.giveBack(Self.due(chrome, 1_000), address: address, host: "site.test", now: 1_000)
        #expect(!takes(checker, address, host: "site.test", party: curl, now: 1_100))
        #expect(!takes(checker, address, host: "site.test", party: SpotChecker.Party(client: here, stack: SpareLedger.stack(userAgent: nil)), now: 1_200))
        #expect(takes(checker, address, host: "site.test", party: chrome, now: 1_300))
        #expect(!takes(checker, address, host: "site.test", party: chrome, now: 1_400), "taken once")
    }

    /// After waiting a while for its own stack (which may not come back: one of several apps with one TLS stack and
    /// their own User-Agents), any tunnel to the place takes the check.
    @Test func aCheckNoTunnelOfItsStackTookGoesToTheNextTunnel() {
        let checker = SpotChecker()
        checker.giveBack(Self.due(chrome, 1_000), address: address, host: "site.test", now: 1_000)
        #expect(!takes(checker, address, host: "site.test", party: curl, now: 5_000))
        #expect(takes(checker, address, host: "site.test", party: curl, now: 11_000))
    }

    @Test func aCheckWaitsForItsNameAndAddress() {
        let checker = SpotChecker()
        checker.giveBack(Self.due(curl, 1_000), address: address, host: "site.test", now: 1_000)
        #expect(!takes(checker, address, host: "other.test", party: curl, now: 1_100))
        #expect(!takes(checker, SocketAddress(numeric: "192.0.2.8", port: 443)!, host: "site.test", party: curl, now: 1_100))
        #expect(takes(checker, address, host: "site.test", party: curl, now: 1_200))
    }

    @Test func checksOfTwoStacksWaitSideBySide() {
        let checker = SpotChecker()
        checker.giveBack(Self.due(chrome, 1_000), address: address, host: "site.test", now: 1_000)
        checker.giveBack(Self.due(curl, 1_000), address: address, host: "site.test", now: 1_000)
        #expect(takes(checker, address, host: "site.test", party: curl, now: 1_100))
        #expect(takes(checker, address, host: "site.test", party: chrome, now: 1_100))
        #expect(checker.totals.givenBack == 2)
    }

    /// A User-Agent is the client's to choose: another client sending the same one (a forger's own, behind the same
    /// proxy) does not take a check drawn for this client, until the check has waited for it as for any stack.
    @Test func aCheckWaitsForItsOwnClientNotItsUserAgentAlone() {
        let checker = SpotChecker()
        let victim = SpotChecker.Party(client: [10, 0, 0, 5], stack: curlStack)
        let lookalike = SpotChecker.Party(client: [10, 0, 0, 6], stack: curlStack)
        let sameSlash64 = SpotChecker.Party(client: SocketAddress(numeric: "2001:db8:1:2::99", port: 1)!.clientKey, stack: curlStack)
        let otherSlash64 = SpotChecker.Party(client: SocketAddress(numeric: "2001:db8:1:3::99", port: 1)!.clientKey, stack: curlStack)
        checker.giveBack(Self.due(victim, 1_000), address: address, host: "site.test", now: 1_000)
        #expect(!takes(checker, address, host: "site.test", party: lookalike, now: 1_100))
        #expect(takes(checker, address, host: "site.test", party: victim, now: 1_200))
        checker.giveBack(Self.due(SpotChecker.Party(client: SocketAddress(numeric: "2001:db8:1:2::1", port: 1)!.clientKey, stack: curlStack), 2_000), address: address, host: "site.test", now: 2_000)
        #expect(!takes(checker, address, host: "site.test", party: otherSlash64, now: 2_100))
        #expect(takes(checker, address, host: "site.test", party: sameSlash64, now: 2_200), "one client: its /64")
        checker.giveBack(Self.due(victim, 3_000), address: address, host: "site.test", now: 3_000)
        #expect(takes(checker, address, host: "site.test", party: lookalike, now: 13_000), "after 10 s, any tunnel")
    }
}
