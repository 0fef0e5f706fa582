import Testing
@testable import ChainwatchCore

/// `ClientHelloShape` on the fixtures, and what the mirror drops from a resumed hello.
@Suite struct HelloMirrorShapeTests {
    static func shape(_ name: String) throws -> ClientHelloShape { try ClientHelloShape(HelloFixture.bytes(name)) }

    /// Three Chrome connections (permuted differently, different GREASE, one with another ECH payload length) and
    /// a resumed one share a shape.
    @Test func chromeConnectionsShareAShape() throws {
        let first = try Self.shape("chrome-1")
        #expect(try Self.shape("chrome-2") == first)
        #expect(try Self.shape("chrome-3") == first)
        #expect(try Self.shape("chrome-resumed") == first)
    }

    /// A second connection of Edge and Safari (new GREASE values).
    @Test(arguments: ["edge", "safari"])
    func secondConnectionsShareTheShape(_ name: String) throws {
        #expect(try Self.shape("\(name)-2") == Self.shape(name))
    }

    /// curl_cffi's Firefox target (BoringSSL shaped as NSS: no GREASE extensions) drew another ECH GREASE payload
    /// length on its second connection (144 against 240 bytes). NSS itself sends one length per build, so for a hello
    /// that is not BoringSSL-shaped the shape keeps the length and the probe copies it: the two are two shapes, equal
    /// once the lengths are.
    @Test func firefoxsECHPayloadLengthIsItsShape() throws {
        #expect(try Self.shape("firefox-2") != Self.shape("firefox"))
        var second = try HelloParts(fixture: "firefox-2")
        let index = try #require(second.index(of: OuterECH.type))
        var ech = try #require(try second.ech())
        ech.payload = [UInt8](repeating: 0, count: try #require(try HelloParts(fixture: "firefox").ech()).payload.count)
        second.extensions?[index].body = ech.encoded()
        #expect(try ClientHelloShape(second.encoded()) == Self.shape("firefox"))
    }

    /// Offers made from hellos are equal exactly when their shapes are and both or neither offered a PSK: other fields
    /// do not count (another key share list here), another shape is another offer, and a resumed Chrome hello, whose
    /// shape is the fresh one's, is an offer of its own (a probe mirrored from it would lack the fresh hello's padding).
    @Test func offersFromHellosAreEqualByTheirShape() throws {
        var fresh = ClientOffer(serverName: "example.com", cipherSuites: [0x1301], extensionTypes: [0, 10, 43, 51])
        var resumed = fresh
        resumed.extensionTypes = [0, 10, 41, 43, 51]
        fresh.shape = try Self.shape("chrome-1")
        resumed.shape = try Self.shape("chrome-resumed")
        #expect(fresh.shape == resumed.shape && fresh != resumed)
        var again = fresh
        again.keyShareGroups = [0x1D]
        again.shape = try Self.shape("chrome-2")
        #expect(again == fresh && again.hashValue == fresh.hashValue)
        var other = fresh
        other.shape = try Self.shape("edge")
        #expect(other != fresh)
        var shapeless = fresh
        shapeless.shape = nil
        #expect(shapeless != fresh && fresh != shapeless)
        var shapelessResumed = resumed
        shapelessResumed.shape = nil
        #expect(shapeless != shapelessResumed)   // without shapes every field counts
    }

    /// Equal digests are not enough: the bytes are compared, every one (in words and the odd tail).
    @Test func shapesWithOneDigestAndOtherBytesDiffer() {
        let bytes = (0..<21).map { UInt8($0) }
        #expect(ClientHelloShape(bytes: bytes, digest: 7) == ClientHelloShape(bytes: bytes, digest: 7))
        #expect(ClientHelloShape(bytes: bytes, digest: 7) != ClientHelloShape(bytes: bytes, digest: 8))
        #expect(ClientHelloShape(bytes: bytes, digest: 7) != ClientHelloShape(bytes: Array(bytes.dropLast()), digest: 7))
        for index in bytes.indices {
            var other = bytes
            other[index] ^= 0x40
            #expect(ClientHelloShape(bytes: bytes, digest: 7) != ClientHelloShape(bytes: other, digest: 7), "byte \(index)")
        }
    }

    @Test func differentClientsHaveDifferentShapes() throws {
        let names = ["chrome-1", "edge", "firefox", "safari", "curl", "python-ssl", "openssl", "gnutls"]
        let shapes = try names.map(Self.shape)
        #expect(Set(shapes).count == names.count)
    }

    @Test func aChangedCipherSuiteListChangesTheShape() throws {
        var hello = try HelloParts(fixture: "chrome-1")
        hello.cipherSuites.swapAt(1, 2)
        #expect(try ClientHelloShape(hello.encoded()) != Self.shape("chrome-1"))
        hello.cipherSuites.swapAt(1, 2)
        #expect(try ClientHelloShape(hello.encoded()) == Self.shape("chrome-1"))
    }

    /// GREASE values all 0x0A0A, per-connection parts zeroed, Chrome's permuted extensions sorted.
    @Test func shapeBlanksThePerConnectionParts() throws {
        let shape = try HelloParts(message: Self.shape("chrome-1").bytes)
        #expect(shape.random == [UInt8](repeating: 0, count: 32) && shape.sessionID == [UInt8](repeating: 0, count: 32))
        #expect(shape.cipherSuites.first == 0x0A0A && shape.types.first == 0x0A0A && shape.types.last == 0x1A1A)
        #expect(try shape.keyShares().allSatisfy { $0.value.allSatisfy { $0 == 0 } })
        #expect(try shape.ech()?.payload == OuterECH.drawnPayloadMark)
        #expect(Array(shape.types.dropFirst().dropLast()) == Array(shape.types.dropFirst().dropLast()).sorted())
    }

    /// The resumed hello loses pre_shared_key (binders included): the probe is a fresh connection's hello.
    @Test func resumptionIsDropped() throws {
        let hello = try HelloFixture.bytes("chrome-resumed")
        let client = try HelloParts(message: hello)
        let psk = try #require(client.body(of: TLSExtensionType.preSharedKey))
        let probe = try HelloParts(message: HelloMirror.mirror(hello, crypto: MirrorTestCrypto(seed: 1)).message)
        #expect(probe.index(of: TLSExtensionType.preSharedKey) == nil)
        #expect(probe.body(of: TLSExtensionType.sessionTicket) == [])
        let drawn = (try probe.ech()?.payload.count ?? 0) - (try client.ech()?.payload.count ?? 0)   // Chrome draws it
        #expect(probe.encoded().count - drawn == hello.count - 4 - psk.count)
    }

    /// A hand-made resumed curl hello (a ticket in session_ticket, early_data, padding of one byte, pre_shared_key
    /// last, as OpenSSL lays them out): the probe empties the ticket, drops early_data and pre_shared_key, and pads
    /// to 512 as curl's fresh hello is.
    @Test func handMadeResumedHelloPadsAgain() throws {
        var hello = try HelloParts(fixture: "curl")
        let fresh = hello
        hello.extensions?.removeAll { $0.type == 21 }
        hello.extensions?.insert(.init(type: TLSExtensionType.sessionTicket, body: [UInt8](repeating: 0x5A, count: 20)), at: 3)
        hello.extensions?.append(.init(type: TLSExtensionType.earlyData, body: []))
        let identity: [UInt8] = [0, 100] + [UInt8](repeating: 0x33, count: 100) + [0, 0, 0, 1]
        let binder: [UInt8] = [32] + [UInt8](repeating: 0x44, count: 32)
        hello.extensions?.append(.init(type: TLSExtensionType.preSharedKey,
                                       body: [0, UInt8(identity.count)] + identity + [0, UInt8(binder.count)] + binder))
        // OpenSSL counts pre_shared_key in the length it pads (here to 512 with a 5-byte padding body).
        let unpadded = hello.encoded().count
        #expect(unpadded == 503)
        let beforePSK = hello.types.count - 1
        hello.extensions?.insert(.init(type: 21, body: [UInt8](repeating: 0, count: 0x200 - unpadded - 4)), at: beforePSK)
        let resumed = hello.encoded()
        #expect(resumed.count == 512)
        let probe = try HelloParts(message: HelloMirror.mirror(resumed, crypto: MirrorTestCrypto(seed: 1)).message)
        #expect(probe.encoded().count == 512)
        #expect(probe.body(of: TLSExtensionType.sessionTicket) == [])
        #expect(probe.index(of: TLSExtensionType.earlyData) == nil && probe.index(of: TLSExtensionType.preSharedKey) == nil)
        #expect(probe.types == [0, 11, 10, 35] + fresh.types.dropFirst(3))
        #expect(probe.body(of: 21)?.count == (fresh.body(of: 21)?.count ?? 0) - 4)
    }
}
