/// An encrypted_client_hello extension (0xFE0D) of type outer (draft-ietf-tls-esni §5): what a client sends as ECH
/// GREASE when it has no ECH config for the server (RFC 8701-style: cipher suite, random config_id, a random `enc`
/// of the KEM's share length, a random payload). Chrome draws the payload length per connection (144, 176, 208 or
/// 240 bytes); Firefox sends one length.
struct OuterECH: Sendable, Equatable {
    /// The extension type.
    static let type: UInt16 = 0xFE0D

    /// The HPKE KDF and AEAD identifiers, 4 bytes, as sent.
    var cipherSuite: [UInt8]
    var configID: UInt8
    var enc: [UInt8]
    var payload: [UInt8]

    /// Parses an ECH extension body; nil for a body of another ECH type (inner), which is kept as sent.
    static func parse(_ body: [UInt8]) throws(HelloMirrorError) -> OuterECH? {
        guard body.first == 0 else { return nil }
        do {
            var reader = ByteReader(body.dropFirst())
            let suite = Array(try reader.readBytes(4, "ech.cipher_suite"))
            let configID = try reader.readUInt8("ech.config_id")
            var enc = try reader.readVector(lengthBytes: 2, "ech.enc")
            var payload = try reader.readVector(lengthBytes: 2, "ech.payload")
            try reader.expectEnd("ech")
            return OuterECH(cipherSuite: suite, configID: configID, enc: Array(enc.readRest()),
                            payload: Array(payload.readRest()))
        } catch {
            throw .malformedExtension(type)
        }
    }

    /// The extension body.
    func encoded() -> [UInt8] {
        var body: [UInt8] = [0] + cipherSuite + [configID]
        body.appendUInt16(UInt16(enc.count))
        body += enc
        body.appendUInt16(UInt16(payload.count))
        return body + payload
    }

    /// A fresh KEM public key of `length` bytes: X25519 (32) or P-256 uncompressed (65), the DHKEMs ECH GREASE uses;
    /// random bytes for another length, or when the crypto cannot make the key.
    static func freshEnc(length: Int, _ random: HelloMirrorRandom) -> [UInt8] {
        let group: UInt16? = length == 32 ? 0x001D : length == 65 ? 0x0017 : nil
        if let group, let share = try? random.crypto.keyExchange(group: group, x25519: nil).publicShare, share.count == length {
            return share
        }
        return random.bytes(length)
    }

    /// The payload lengths BoringSSL draws for its ECH GREASE, one per connection: 32 × (4 to 7) bytes and the
    /// AEAD's 16-byte tag (`ssl_setup_ech_grease`). NSS (Firefox) sizes its payload from the hello instead, one length
    /// per build and host.
    static let boringSSLPayloadLengths = [144, 176, 208, 240]

    /// The shape's payload for a length drawn per connection: one byte, where a kept length blanks to zeros.
    static let drawnPayloadMark: [UInt8] = [0xFF]

    /// Whether the stack draws this payload's length per connection: a BoringSSL-shaped hello with one of BoringSSL's
    /// lengths. `ClientHelloShape` then keeps no length, and the mirror draws one; any other length is kept by both.
    func drawsPayloadLength(_ stack: HelloStack) -> Bool {
        stack.boringSSLMiddle != nil && Self.boringSSLPayloadLengths.contains(payload.count)
    }

    /// Fresh per-connection parts, drawn from nothing of this extension's own: a uniform config_id (BoringSSL's is a
    /// random byte), an `enc` as the stack makes it (a BoringSSL-shaped hello's: a public key of the KEM its length
    /// names, as BoringSSL makes an X25519 key for the GREASE, `X25519_keypair`, where random bytes are a valid key
    /// one time in 32, a tell; any other's: random bytes, as NSS's HKDF output is, where a key would be the tell;
    /// curl_cffi's Firefox target, BoringSSL shaped as NSS, sends a key and is told apart by it), and a random payload
    /// of the same length, or of a length drawn as BoringSSL draws it (`drawsPayloadLength`).
    func redrawn(_ random: HelloMirrorRandom, stack: HelloStack) -> OuterECH {
        var fresh = self
        fresh.configID = UInt8(random.below(256))
        // BoringSSL makes a key (X25519_keypair); NSS fills enc with HKDF output, random bytes (tls13_MaybeGreaseEch).
        fresh.enc = stack.boringSSLMiddle != nil ? Self.freshEnc(length: enc.count, random) : random.bytes(enc.count)
        let length = drawsPayloadLength(stack)
            ? Self.boringSSLPayloadLengths[random.below(Self.boringSSLPayloadLengths.count)] : payload.count
        fresh.payload = random.bytes(length)
        return fresh
    }
}
