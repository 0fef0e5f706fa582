import Testing
@testable import ChainwatchCore

@Suite struct ClientOfferTests {
    /// Chrome shuffles its extensions on every connection; the probe cannot repeat an order anyway. Two hellos that
    /// differ only in extension order are one offer, so they share one probe and one cached result.
    @Test func extensionOrderDoesNotMakeAnotherOffer() throws {
        var observer = TLSObserver()
        observer.append(try TLSFixture.bytes("tls13-rsa.c2s.bin"))
        guard case .clientHello(let hello)? = try observer.next() else { Issue.record("no ClientHello"); return }
        var shuffled = hello
        shuffled.extensionTypes.reverse()
        #expect(shuffled.extensionTypes != hello.extensionTypes)
        #expect(ClientOffer(mirroring: shuffled) == ClientOffer(mirroring: hello))
        #expect(ClientOffer(mirroring: hello).extensionTypes == hello.extensionTypes.sorted())
    }
}
