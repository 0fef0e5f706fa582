import Testing
@testable import ChainwatchCore

/// FIPS 180-4 example vectors (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf").
@Suite struct SHA256Tests {
    static func hex(_ text: String) -> String { HashText.hex(SHA256.hash(Array(text.utf8)), uppercase: false) }

    @Test func knownVectors() {
        #expect(Self.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func oneMillionAsInUnevenChunksMatchesTheVector() {
        var hasher = SHA256()
        var left = 1_000_000
        var chunk = 1
        while left > 0 {
            let size = min(chunk, left)
            hasher.update([UInt8](repeating: UInt8(ascii: "a"), count: size))
            left -= size
            chunk = chunk % 997 + 63
        }
        #expect(HashText.hex(hasher.finalize(), uppercase: false)
            == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func paddingEdgesMatchOneShot() {
        // 55, 56 and 64 bytes straddle the length field's block boundary.
        for length in [55, 56, 63, 64, 65, 119, 120] {
            let bytes = [UInt8](repeating: 0x61, count: length)
            var split = SHA256()
            split.update(bytes.prefix(length / 2))
            split.update(bytes.dropFirst(length / 2))
            #expect(split.finalize() == SHA256.hash(bytes), "length \(length)")
        }
        #expect(Self.hex(String(repeating: "a", count: 64))
            == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }
}
