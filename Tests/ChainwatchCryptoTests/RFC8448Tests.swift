import ChainwatchCore
import ChainwatchCrypto
import Testing

/// RFC 8448 §3 "Simple 1-RTT Handshake" (TLS_AES_128_GCM_SHA256, x25519), every value as the RFC prints it: the key
/// schedule and record protection of Core with the real provider must reproduce the trace byte for byte.
@Suite struct RFC8448Tests {
    static let clientHello = hex("""
        010000c00303cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7000006130113031302010000910000000b
        0009000006736572766572ff01000100000a00140012001d0017001800190100010101020103010400230000003300260024001d0020
        99381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae4d5413691e529aaf2c002b0003020304000d0020001e04030503060302030804
        0805080604010501060102010402050206020202002d00020101001c00024001
        """)
    static let serverHello = hex("""
        020000560303a6af06a4121860dc5e6e60249cd34c95930c8ac5cb1434dac155772ed3e2692800130100002e00330024001d0020c98288
        76112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f002b00020304
        """)
    static let encryptedExtensions = hex("080000240022000a00140012001d00170018001901000101010201030104001c0002400100000000")
    static let certificate = hex("""
        0b0001b9000001b50001b0308201ac30820115a003020102020102300d06092a864886f70d01010b0500300e310c300a060355040313
        03727361301e170d3136303733303031323335395a170d3236303733303031323335395a300e310c300a06035504031303727361308
        19f300d06092a864886f70d010101050003818d0030818902818100b4bb498f8279303d980836399b36c6988c0c68de55e1bdb826d390
        1a2461eafd2de49a91d015abbc9a95137ace6c1af19eaa6af98c7ced43120998e187a80ee0ccb0524b1b018c3e0b63264d449a6d38e2
        2a5fda430846748030530ef0461c8ca9d9efbfae8ea6d1d03e2bd193eff0ab9a8002c47428a6d35a8d88d79f7f1e3f0203010001a31a
        301830090603551d1304023000300b0603551d0f0404030205a0300d06092a864886f70d01010b05000381810085aad2a0e5b9276b90
        8c65f73a7267170618a54c5f8a7b337d2df7a594365417f2eae8f8a58c8f8172f9319cf36b7fd6c55b80f21a03015156726096fd335e
        5e67f2dbf102702e608ccae6bec1fc63a42a99be5c3eb7107c3c54e9b9eb2bd5203b1c3b84e0a8b2f759409ba3eac9d91d402dcc0cc8f8
        961229ac9187b42b4de10000
        """)
    static let certificateVerify = hex("""
        0f000084080400805a747c5d88fa9bd2e55ab085a61015b7211f824cd484145ab3ff52f1fda8477b0b7abc90db78e2d33a5c141a0786
        53fa6bef780c5ea248eeaaa785c4f394cab6d30bbe8d4859ee511f602957b15411ac027671459e46445c9ea58c181e818e95b8c3fb0b
        f3278409d3be152a3da5043e063dda65cdf5aea20d53dfacd42f74f3
        """)
    static let serverFinished = hex("140000209b9b141d906337fbd2cbdce71df4deda4ab42c309572cb7fffee5454b78f0718")
    /// {server} send handshake record: EncryptedExtensions..Finished under the server handshake key (679 octets).
    static let serverFlightRecord = hex("""
        17030302a2d1ff334a56f5bff6594a07cc87b580233f500f45e489e7f33af35edf7869fcf40aa40aa2b8ea73f848a7ca07612ef9f945
        cb960b4068905123ea78b111b429ba9191cd05d2a389280f526134aadc7fc78c4b729df828b5ecf7b13bd9aefb0e57f271585b8ea9bb
        355c7c79020716cfb9b1183ef3ab20e37d57a6b9d7477609aee6e122a4cf51427325250c7d0e509289444c9b3a648f1d71035d2ed65b0e
        3cdd0cbae8bf2d0b227812cbb360987255cc744110c453baa4fcd610928d809810e4b7ed1a8fd991f06aa6248204797e36a6a73b70a2
        559c09ead686945ba246ab66e5edd8044b4c6de3fcf2a89441ac66272fd8fb330ef8190579b3684596c960bd596eea520a56a8d650f5
        63aad27409960dca63d3e688611ea5e22f4415cf9538d51a200c27034272968a264ed6540c84838d89f72c24461aad6d26f59ecaba9a
        cbbb317b66d902f4f292a36ac1b639c637ce343117b659622245317b49eeda0c6258f100d7d961ffb138647e92ea330faeea6dfa31c7
        a84dc3bd7e1b7a6c7178af36879018e3f252107f243d243dc7339d5684c8b0378bf30244da8c87c843f5e56eb4c5e8280a2b48052cf9
        3b16499a66db7cca71e4599426f7d461e66f99882bd89fc50800becca62d6c74116dbd2972fda1fa80f85df881edbe5a37668936b335
        583b599186dc5c6918a396fa48a181d6b6fa4f9d62d513afbb992f2b992f67f8afe67f76913fa388cb5630c8ca01e0c65d11c66a1e2a
        c4c85977b7c7a6999bbf10dc35ae69f5515614636c0b9b68c19ed2e31c0b3b66763038ebba42f3b38edc0399f3a9f23faa63978c317f
        c9fa66a73f60f0504de93b5b845e275592c12335ee340bbc4fddd502784016e4b3be7ef04dda49f4b440a30cb5d2af939828fd4ae379
        4e44f94df5a631ede42c1719bfdabf0253fe5175be898e750edc53370d2b
        """)
    /// {client} send handshake record: the client Finished under the client handshake key (58 octets).
    static let clientFinishedRecord = hex("""
        170303003575ec4dc238cce60b298044a71e219c56cc77b0517fe9b93c7a4bfc44d87f38f80338ac98fc46deb384bd1caeacab6867d7
        26c40546
        """)
    /// {client} send application_data record: the octets 0x00..0x31 (72 octets).
    static let clientApplicationRecord = hex("""
        1703030043a23f7054b62c94d0affafe8228ba55cbefacea42f914aa66bcab3f2b9819a8a5b46b395bd54a9a20441e2b62974e1f5a62
        92a2977014bd1e3deae63aeebb21694915e4
        """)
    /// {server} send application_data record: the same octets back (72 octets).
    static let serverApplicationRecord = hex("""
        17030300432e937e11ef4ac740e538ad36005fc4a46932fc3225d05f82aa1b36e30efaf97d90e6dffc602dcb501a59a8fcc49c4bf2e5
        f0a21c0047c2abf332540dd032e167c2955d
        """)
    /// {server} extract secret "handshake": the x25519 shared secret (IKM).
    static let ecdheSecret = hex("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d")

    /// The traffic keys of `secret`, expected to be the trace's `key` and `iv`.
    func trafficKeys(_ schedule: TLS13KeySchedule, _ secret: [UInt8], key: String, iv: String,
                     sourceLocation: SourceLocation = #_sourceLocation) -> (key: [UInt8], iv: [UInt8]) {
        let keys = schedule.trafficKeys(secret: secret)
        #expect(keys.key == hex(key), sourceLocation: sourceLocation)
        #expect(keys.iv == hex(iv), sourceLocation: sourceLocation)
        return keys
    }

    @Test func simpleOneRTTHandshake() throws {
        let crypto = SwiftCryptoTLS()
        var schedule = TLS13KeySchedule(crypto: crypto, suite: 0x1301)
        #expect(schedule.hash == .sha256)

        var transcript = crypto.transcriptHash(.sha256)
        transcript.update(Self.clientHello)
        transcript.update(Self.serverHello)
        #expect(transcript.current() == hex("860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8"))

        let handshake = schedule.handshakeTrafficSecrets(sharedSecret: Self.ecdheSecret, transcriptHash: transcript.current())
        #expect(handshake.client == hex("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21"))
        #expect(handshake.server == hex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38"))

        let serverKeys = trafficKeys(schedule, handshake.server, key: "3fce516009c21727d0f2e4e86ee403bc", iv: "5d313eb2671276ee13000b30")
        let clientKeys = trafficKeys(schedule, handshake.client, key: "dbfaa693d1762c5b666af5d950258d01", iv: "5bd3c71b836e0b76bb73265f")

        // The client opens the server's flight with the server handshake key.
        var serverRead = TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: serverKeys.key, iv: serverKeys.iv)
        let flight = try serverRead.open(header: Array(Self.serverFlightRecord.prefix(5)),
                                         payload: Array(Self.serverFlightRecord.dropFirst(5)))
        #expect(flight.contentType == 22)
        #expect(flight.content == Self.encryptedExtensions + Self.certificate + Self.certificateVerify + Self.serverFinished)

        transcript.update(Self.encryptedExtensions)
        transcript.update(Self.certificate)
        transcript.update(Self.certificateVerify)
        let serverVerifyData = schedule.finishedVerifyData(baseKey: handshake.server, transcriptHash: transcript.current())
        #expect([0x14, 0, 0, 0x20] + serverVerifyData == Self.serverFinished)

        transcript.update(Self.serverFinished)
        #expect(transcript.current() == hex("9608102a0f1ccc6db6250b7b7e417b1a000eaada3daae4777a7686c9ff83df13"))
        let clientVerifyData = schedule.finishedVerifyData(baseKey: handshake.client, transcriptHash: transcript.current())
        #expect(clientVerifyData == hex("a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61"))

        var clientWrite = TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: clientKeys.key, iv: clientKeys.iv)
        #expect(try clientWrite.seal(contentType: 22, [0x14, 0, 0, 0x20] + clientVerifyData) == Self.clientFinishedRecord)

        let application = schedule.applicationTrafficSecrets(transcriptHash: transcript.current())
        #expect(application.client == hex("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5"))
        #expect(application.server == hex("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643"))
        let serverApplicationKeys = trafficKeys(schedule, application.server, key: "9f02283b6c9c07efc26bb9f2ac92e356", iv: "cf782b88dd83549aadf1e984")
        let clientApplicationKeys = trafficKeys(schedule, application.client, key: "17422dda596ed5d9acd890e3c63f5051", iv: "5b78923dee08579033e523d9")

        // Sequence numbers past 0: the client's application data (0) then its close_notify (1); the server's
        // application data goes out second (1), after the NewSessionTicket (0).
        let fifty = (0..<50).map { UInt8($0) }
        var clientApplication = TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: clientApplicationKeys.key,
                                                      iv: clientApplicationKeys.iv)
        #expect(try clientApplication.seal(contentType: 23, fifty) == Self.clientApplicationRecord)
        #expect(try clientApplication.seal(contentType: 21, [1, 0]) == hex("1703030013c9872760655666b74d7ff1153efd6db6d0b0e3"))
        var serverApplication = TLS13RecordProtection(crypto: crypto, suite: 0x1301, key: serverApplicationKeys.key,
                                                      iv: serverApplicationKeys.iv)
        _ = try serverApplication.seal(contentType: 22, [])  // sequence number 0: the NewSessionTicket's
        #expect(try serverApplication.seal(contentType: 23, fifty) == Self.serverApplicationRecord)
    }

    /// The HKDF steps the trace prints on the way: early secret, the "derived" secret, the handshake secret.
    @Test func intermediateSecrets() {
        let schedule = TLS13KeySchedule(crypto: SwiftCryptoTLS(), suite: 0x1301)
        let zeros = [UInt8](repeating: 0, count: 32)
        let early = schedule.hkdfExtract(salt: zeros, ikm: zeros)
        #expect(early == hex("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a"))
        let emptyHash = SwiftCryptoTLS().transcriptHash(.sha256).current()
        let derived = schedule.deriveSecret(early, label: "derived", transcriptHash: emptyHash)
        #expect(derived == hex("6f2615a108c702c5678f54fc9dbab69716c076189c48250cebeac3576c3611ba"))
        #expect(schedule.hkdfExtract(salt: derived, ikm: Self.ecdheSecret)
                == hex("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac"))
    }
}
