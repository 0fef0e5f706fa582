import CBrotli
import ChainwatchCore
import CZlib
import CZstd

/// RFC 8879 certificate decompression with Debian's libraries: 1 zlib, 2 brotli, 3 zstd. Bounded: the output buffer
/// is exactly the declared length and each library streams into it, so a stream that would produce more is stopped
/// at that length (`.malformed`) and a decompression bomb costs at most the declared length (at most 2^24 bytes).
enum CertificateDecompressor {
    /// The largest uncompressed_length accepted, and the largest compressed input (RFC 8879: both are uint24).
    static let maxUncompressedLength = 1 << 24

    static func decompress(algorithm: UInt16, _ data: [UInt8], uncompressedLength: Int) throws(TLSCryptoError) -> [UInt8] {
        guard uncompressedLength > 0, uncompressedLength <= maxUncompressedLength else {
            throw .malformed("uncompressed_length \(uncompressedLength)")
        }
        guard !data.isEmpty, data.count <= maxUncompressedLength else {
            throw .malformed("a compressed certificate of \(data.count) bytes")
        }
        var output = [UInt8](repeating: 0, count: uncompressedLength)
        let produced: Int
        switch algorithm {
        case 1: produced = try inflateZlib(data, into: &output)
        case 2: produced = try decodeBrotli(data, into: &output)
        case 3: produced = try decodeZstd(data, into: &output)
        default: throw .unsupported("certificate compression algorithm \(algorithm)")
        }
        guard produced == uncompressedLength else {
            throw .malformed("the stream gives \(produced) bytes, not the declared \(uncompressedLength)")
        }
        return output
    }

    /// zlib (RFC 1950) with one `inflate(Z_FINISH)` call over all the input into the whole output. Returns how many
    /// bytes the complete stream gave.
    private static func inflateZlib(_ data: [UInt8], into output: inout [UInt8]) throws(TLSCryptoError) -> Int {
        var stream = z_stream()
        guard c_zlib_inflateInit(&stream) == Z_OK else { throw .malformed("zlib: inflateInit failed") }
        defer { inflateEnd(&stream) }
        let result: Int32 = data.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { output in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.avail_in = UInt32(input.count)
                stream.next_out = output.baseAddress
                stream.avail_out = UInt32(output.count)
                return inflate(&stream, Z_FINISH)
            }
        }
        switch result {
        case Z_STREAM_END:
            guard stream.avail_in == 0 else { throw .malformed("zlib: \(stream.avail_in) bytes after the stream") }
            return Int(stream.total_out)
        case Z_BUF_ERROR, Z_OK:
            throw .malformed(stream.avail_out == 0 ? "zlib: more than the declared length" : "zlib: the stream ends short")
        default:
            throw .malformed("zlib: corrupt stream (\(result))")
        }
    }

    /// brotli (RFC 7932) with one `BrotliDecoderDecompressStream` call over all the input into the whole output.
    private static func decodeBrotli(_ data: [UInt8], into output: inout [UInt8]) throws(TLSCryptoError) -> Int {
        guard let decoder = BrotliDecoderCreateInstance(nil, nil, nil) else { throw .malformed("brotli: no decoder") }
        defer { BrotliDecoderDestroyInstance(decoder) }
        var availableIn = data.count
        var availableOut = output.count
        let result = data.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { output in
                var nextIn = input.baseAddress
                var nextOut = output.baseAddress
                return BrotliDecoderDecompressStream(decoder, &availableIn, &nextIn, &availableOut, &nextOut, nil)
            }
        }
        switch result {
        case BROTLI_DECODER_RESULT_SUCCESS:
            guard availableIn == 0 else { throw .malformed("brotli: \(availableIn) bytes after the stream") }
            return output.count - availableOut
        case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT: throw .malformed("brotli: more than the declared length")
        case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT: throw .malformed("brotli: the stream ends short")
        default: throw .malformed("brotli: corrupt stream")
        }
    }

    /// zstd (RFC 8878), one frame, with `ZSTD_decompressStream` until it stops making progress; the window is capped
    /// at the largest certificate (2^24), so a frame cannot ask for more memory than that.
    private static func decodeZstd(_ data: [UInt8], into output: inout [UInt8]) throws(TLSCryptoError) -> Int {
        guard let context = ZSTD_createDCtx() else { throw .malformed("zstd: no decoder") }
        defer { ZSTD_freeDCtx(context) }
        guard ZSTD_isError(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, 24)) == 0 else {
            throw .malformed("zstd: cannot cap the window")
        }
        let outputCount = output.count
        return try data.withUnsafeBufferPointer { (input) throws(TLSCryptoError) -> Int in
            try output.withUnsafeMutableBufferPointer { (output) throws(TLSCryptoError) -> Int in
                var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
                var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: outputCount, pos: 0)
                while true {
                    let before = (inBuffer.pos, outBuffer.pos)
                    let remaining = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
                    if ZSTD_isError(remaining) != 0 {
                        throw .malformed("zstd: \(String(cString: ZSTD_getErrorName(remaining)))")
                    }
                    if remaining == 0 {
                        guard inBuffer.pos == inBuffer.size else {
                            throw .malformed("zstd: \(inBuffer.size - inBuffer.pos) bytes after the frame")
                        }
                        return outBuffer.pos
                    }
                    if before == (inBuffer.pos, outBuffer.pos) {
                        throw .malformed(outBuffer.pos == outBuffer.size ? "zstd: more than the declared length"
                                                                         : "zstd: the stream ends short")
                    }
                }
            }
        }
    }
}
