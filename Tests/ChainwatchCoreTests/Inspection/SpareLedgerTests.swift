import Testing
@testable import ChainwatchCore

/// Which tunnels get a spare connection: one open per upstream on a loop, none for a client whose last one to that
/// upstream went unused, for the cooldown only, and never decided by another client.
@Suite struct SpareLedgerTests {
    let a = SpareLedger.Upstream(address: [192, 0, 2, 1], port: 443)
    let b = SpareLedger.Upstream(address: [192, 0, 2, 2], port: 443)
    let alice: [UInt8] = [10, 0, 0, 1], bob: [UInt8] = [10, 0, 0, 2]

    @Test func oneSpareAtATimePerUpstreamAndClient() {
        var ledger = SpareLedger()
        #expect(ledger.mayOpen(a, client: alice, now: 0))
        ledger.opened(a, client: alice)
        #expect(!ledger.mayOpen(a, client: alice, now: 1), "a burst of tunnels to a cold upstream: one spare, not one each")
        #expect(ledger.mayOpen(a, client: bob, now: 1), "alice's open spare (a hello she never finishes) must not deny bob's")
        #expect(ledger.mayOpen(b, client: alice, now: 1))
        ledger.ended(a, client: alice, now: 2)
        #expect(!ledger.mayOpen(a, client: alice, now: 3), "alice's first contact there has had its spare")
        #expect(ledger.mayOpen(a, client: bob, now: 3), "bob's first contact is his own: alice's probe does not decide it")
    }

    @Test func aSpareCoolsThatClientOnly() {
        var ledger = SpareLedger(cooldownMilliseconds: 1_000)
        ledger.opened(a, client: alice)
        ledger.ended(a, client: alice, now: 100)   // alice sent no TLS 1.3 to a, or her probe took it
        #expect(!ledger.mayOpen(a, client: alice, now: 200))
        #expect(ledger.mayOpen(a, client: bob, now: 200), "one client's traffic must not take the random order from others")
        #expect(ledger.mayOpen(b, client: alice, now: 200))
        #expect(ledger.mayOpen(a, client: alice, now: 1_100), "the cooldown ends")
    }

    @Test func theCoolingRecordIsBounded() {
        var ledger = SpareLedger(cooldownMilliseconds: 1_000, maxEntries: 4)
        for i in 0..<10 {
            ledger.ended(a, client: [10, 0, 0, UInt8(i)], now: Int64(i))
            #expect(ledger.counts.cooling <= 4)
        }
        #expect(ledger.counts.open == 0)
    }

    /// A second browser on the same machine (another User-Agent in its CONNECT, and a hello of another shape) gets a
    /// spare of its own at an address where the first has had one; the same stack does not; a client that makes up a
    /// User-Agent per CONNECT gets `maxStacks` at most per address and cooldown.
    @Test func eachStackOfAClientGetsItsOwnSpareUpToABound() {
        var ledger = SpareLedger(cooldownMilliseconds: 1_000, maxStacks: 3)
        let chrome = SpareLedger.stack(userAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/152.0")
        let firefox = SpareLedger.stack(userAgent: "Mozilla/5.0 (X11; Linux x86_64; rv:155.0) Gecko/20100101 Firefox/155.0")
        #expect(chrome != firefox && chrome != 0 && SpareLedger.stack(userAgent: nil) == 0 && SpareLedger.stack(userAgent: "") == 0)
        ledger.opened(a, client: alice, stack: chrome)
        ledger.ended(a, client: alice, stack: chrome, now: 10)
        #expect(!ledger.mayOpen(a, client: alice, stack: chrome, now: 20))
        #expect(ledger.mayOpen(a, client: alice, stack: firefox, now: 20), "another stack's first contact")
        ledger.opened(a, client: alice, stack: firefox)
        #expect(!ledger.mayOpen(a, client: alice, stack: firefox, now: 21), "one open per stack")
        #expect(ledger.mayOpen(a, client: alice, stack: 7, now: 21), "a third stack: 2 of 3 taken")
        ledger.opened(a, client: alice, stack: 7)
        #expect(!ledger.mayOpen(a, client: alice, stack: 8, now: 22), "a fourth: past maxStacks (one cooling, two open)")
        #expect(ledger.mayOpen(a, client: bob, stack: 8, now: 22), "bob's count is his own")
        ledger.ended(a, client: alice, stack: firefox, now: 30)
        ledger.ended(a, client: alice, stack: 7, now: 30)
        #expect(!ledger.mayOpen(a, client: alice, stack: 8, now: 500))
        #expect(ledger.mayOpen(a, client: alice, stack: 8, now: 1_010), "chrome's cooldown ended: room for one more")
        #expect(ledger.mayOpen(a, client: alice, stack: chrome, now: 1_010))
        #expect(ledger.counts == (open: 0, cooling: 3))
    }
}
