import ChainwatchCore
import ChainwatchEventLoop
@testable import ChainwatchProxy
import Testing

/// A spot check beside a tunnel waits for a tunnel to the same name and address, of the same client stack (the
/// `CONNECT`'s User-Agent): checks are drawn per hello shape, and one carried by another stack's tunnel would be made
/// with that tunnel's hello, so a forger of one browser's connections beside busy traffic of another client would meet
/// only a share of its checks.
struct SpotCheckerDueTests {
    let address = SocketAddress(numeric: "192.0.2.7", port: 443)!
    let chrome = SpareLedger.stack(userAgent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/131.0.0.0")
    let curl = SpareLedger.stack(userAgent: "curl/7.88.1")

    @Test func aCheckWaitsForATunnelOfItsOwnStack() {
        let checker = SpotChecker()
        checker.giveBack(address, host: "site.test", stack: chrome, now: 1_000)
        #expect(!checker.takeDue(address, host: "site.test", stack: curl, now: 1_100))
        #expect(!checker.takeDue(address, host: "site.test", stack: SpareLedger.stack(userAgent: nil), now: 1_200))
        #expect(checker.takeDue(address, host: "site.test", stack: chrome, now: 1_300))
        #expect(!checker.takeDue(address, host: "site.test", stack: chrome, now: 1_400), "taken once")
    }

    /// After waiting a while for its own stack (which may not come back: one of several apps with one TLS stack and
    /// their own User-Agents), any tunnel to the place takes the check.
    @Test func aCheckNoTunnelOfItsStackTookGoesToTheNextTunnel() {
        let checker = SpotChecker()
        checker.giveBack(address, host: "site.test", stack: chrome, now: 1_000)
        #expect(!checker.takeDue(address, host: "site.test", stack: curl, now: 5_000))
        #expect(checker.takeDue(address, host: "site.test", stack: curl, now: 11_000))
    }

    @Test func aCheckWaitsForItsNameAndAddress() {
        let checker = SpotChecker()
        checker.giveBack(address, host: "site.test", stack: curl, now: 1_000)
        #expect(!checker.takeDue(address, host: "other.test", stack: curl, now: 1_100))
        #expect(!checker.takeDue(SocketAddress(numeric: "192.0.2.8", port: 443)!, host: "site.test", stack: curl, now: 1_100))
        #expect(checker.takeDue(address, host: "site.test", stack: curl, now: 1_200))
    }

    @Test func checksOfTwoStacksWaitSideBySide() {
        let checker = SpotChecker()
        checker.giveBack(address, host: "site.test", stack: chrome, now: 1_000)
        checker.giveBack(address, host: "site.test", stack: curl, now: 1_000)
        #expect(checker.takeDue(address, host: "site.test", stack: curl, now: 1_100))
        #expect(checker.takeDue(address, host: "site.test", stack: chrome, now: 1_100))
        #expect(checker.totals.givenBack == 2)
    }
}
