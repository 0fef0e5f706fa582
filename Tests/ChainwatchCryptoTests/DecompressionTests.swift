import ChainwatchCore
import ChainwatchCrypto
import Testing

/// RFC 8879 decompression with exact, short, long, corrupt and bomb inputs.
///
/// Fixtures: `plain` is "chainwatch certificate " eight times (184 bytes), compressed with
/// `python3 -c 'import zlib; print(zlib.compress(plain, 9).hex())'`, `brotli -q 11 -c plain` and `zstd -19 -c plain`
/// (Debian 12's brotli 1.0.9 and zstd 1.5.4). The bombs are 1 MiB of zeros through the same three commands.
@Suite struct DecompressionTests {
    let crypto = SwiftCryptoTLS()
    static let plain = Array(String(repeating: "chainwatch certificate ", count: 8).utf8)
    static let fixtures: [(algorithm: UInt16, data: [UInt8])] = [
        (1, hex("78da4bce48cccc2b4f2c49ce50484e2d2ac94ccb4c4e2c4955481eecc200b6e346e9")),
        (2, hex("a1b805c06fa474f3a665d8185aa5b9e52ac00896265c818e66ddf206")),
        (3, hex("28b52ffd24b8f50000b8636861696e77617463682063657274696669636174652001003d4acd2657d69226")),
    ]
    static let bombs: [(algorithm: UInt16, data: [UInt8])] = [
        // zlib's 1039 bytes are mostly zeros: 17 bytes, 1016 zeros, 6 bytes.
        (1, hex("78daedc13101000000c2a0f54f6d085fa0") + [UInt8](repeating: 0, count: 1016) + hex("3e0300f00001")),
        (2, hex("59ffff8f7f02201e0b0472ef1f00")),
        (3, hex("28b52ffda4000010004c000008000100fcff39100202001000020010000200100002001000020010000200100003001000f13e16e1")),
    ]

    @Test func exactLength() throws {
        for fixture in Self.fixtures {
            #expect(try crypto.decompress(algorithm: fixture.algorithm, fixture.data, uncompressedLength: 184) == Self.plain)
        }
    }

    @Test func declaredLengthOffByOne() {
        for fixture in Self.fixtures {
            for length in [183, 185] {
                #expect(throws: TLSCryptoError.self, "algorithm \(fixture.algorithm), \(length)") {
                    try crypto.decompress(algorithm: fixture.algorithm, fixture.data, uncompressedLength: length)
                }
            }
        }
    }

    /// A flipped byte inside the stream is caught by zlib's Adler-32 and zstd's XXH64 checksum; brotli has no
    /// checksum (a flipped literal decodes to other bytes of the same length), so it gets bytes that are no stream.
    @Test func truncatedCorruptOrTrailing() {
        for fixture in Self.fixtures {
            var corrupt = fixture.data
            if fixture.algorithm == 2 {
                corrupt = [UInt8](repeating: 0xFF, count: 24)
            } else {
                corrupt[corrupt.count / 2] ^= 0x55
            }
            for data in [Array(fixture.data.dropLast(3)), corrupt, fixture.data + [0]] {
                #expect(throws: TLSCryptoError.self, "algorithm \(fixture.algorithm)") {
                    try crypto.decompress(algorithm: fixture.algorithm, data, uncompressedLength: 184)
                }
            }
        }
    }

    @Test func bombsAreRefused() throws {
        for bomb in Self.bombs {
            let elapsed = ContinuousClock().measure {
                #expect(throws: TLSCryptoError.self, "algorithm \(bomb.algorithm)") {
                    try crypto.decompress(algorithm: bomb.algorithm, bomb.data, uncompressedLength: 1000)
                }
            }
            #expect(elapsed < .milliseconds(100), "algorithm \(bomb.algorithm)")
            // The whole megabyte passes when it is declared.
            #expect(try crypto.decompress(algorithm: bomb.algorithm, bomb.data, uncompressedLength: 1 << 20)
                    == [UInt8](repeating: 0, count: 1 << 20))
        }
    }

    @Test func limitsAndUnknownAlgorithms() {
        let zlib = Self.fixtures[0].data
        #expect(throws: TLSCryptoError.self) { try crypto.decompress(algorithm: 1, zlib, uncompressedLength: (1 << 24) + 1) }
        #expect(throws: TLSCryptoError.self) { try crypto.decompress(algorithm: 1, zlib, uncompressedLength: 0) }
        #expect(throws: TLSCryptoError.self) { try crypto.decompress(algorithm: 1, [], uncompressedLength: 184) }
        #expect(throws: TLSCryptoError.unsupported("certificate compression algorithm 4")) {
            try crypto.decompress(algorithm: 4, zlib, uncompressedLength: 184)
        }
    }
}
