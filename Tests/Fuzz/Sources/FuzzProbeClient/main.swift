// Fuzzes ProbeClient (chainwatch's own TLS client) on what a server sends: records, ServerHello and
// HelloRetryRequest, the TLS 1.3 encrypted flight (EncryptedExtensions, CertificateRequest, Certificate,
// CompressedCertificate, CertificateVerify, Finished) and the TLS 1.2 plaintext flight. The cryptography is a
// deterministic stand-in that authenticates nothing (StandInCrypto.swift), so the fuzzer reaches the parsers.
//
// Input: [options] [max chunk] [seed: 2 bytes] [prefix length: 2 bytes] then the server's bytes.
//   options bit 0: the client hello (0 curl.bin, 1 chrome-1.bin; ProbeHellos.swift);
//           bit 1: the stand-in's verify() answer (1: signatures verify);
//           bits 2 and 3 both set: amplify: the server's bytes after the prefix repeated up to 512 KiB (buffering
//           under load), cut into chunks 64 times as long (two bits: an amplified input costs about 50 others).
// Invariants: the server's bytes fed whole and in input-chosen chunks give the same outcome (result, error, or still
// needing bytes) and the same bytes to send (after a failure: a prefix, see below); with verify() false, no TLS 1.3
// result and no (EC)DHE result at TLS 1.2 is accepted (a TLS 1.2 result is RSA key exchange, or TLS 1.0/1.1 (EC)DHE
// with proofVerified false); a result has a chain, and a TLS 1.3 one ends in Finished and lists its records; the
// engine's heap use while reading stays under a bound set by its limits (not by the bytes fed); it never asks to
// decompress more than maxCertificateList.
import ChainwatchCore
import FuzzSupport
#if canImport(Glibc)
import Glibc
#endif

/// The largest Certificate read: below the engine's own 64 KiB limit for the other messages, so the bound on
/// buffering is the engine's, not this choice.
let maxCertificateList = 16 * 1024
let amplifiedLength = 512 * 1024
/// Heap the engine may hold while reading (beyond the chunk just fed): a partial handshake message of the largest
/// kind (64 KiB) and a partial record (2^14 + 256), each in an array that may have twice the capacity, the chain and
/// its decompressed copy, and 64 KiB for the rest (transcript, keys, the hellos, the step's bytes). Beyond it, three
/// times the chunk just fed: the engine copies a chunk into its input buffer and the records' handshake bytes into
/// its handshake buffer, compacting both only between calls (so a 512 KiB chunk is held twice, in arrays that may
/// have grown to twice that); the caller chose that chunk.
let heapBound = 2 * (4 + 64 * 1024) + 2 * (5 + (1 << 14) + 256) + 4 * maxCertificateList + 64 * 1024

@_silgen_name("__sanitizer_get_current_allocated_bytes")
func allocatedBytes() -> Int

enum Outcome: Equatable {
    case needsMoreBytes
    case done(ProbeClientResult)
    case failed(ProbeClientError)
}

struct Run: Equatable {
    var outcome = Outcome.needsMoreBytes
    var sent: [UInt8] = []
}

/// A client right after mirroring one of the hellos, with its stand-in (whose random stream the mirroring advanced),
/// built once per hello and `verify()` answer: mirroring is deterministic, so each input starts from a copy of the
/// same state instead of mirroring again (that was about a tenth of the time per input).
struct Start {
    let client: ProbeClient
    let crypto: StandInCrypto
    let position: Int

    init(_ hello: [UInt8], verifies: Bool) {
        crypto = StandInCrypto(verifies: verifies, maxCertificateList: maxCertificateList)
        do {
            client = try ProbeClient(clientHello: hello, recordVersion: 0x0301, crypto: crypto,
                                     maxCertificateList: maxCertificateList)
        } catch {
            fatalError("invariant: the fixture hello is refused: \(error)")
        }
        position = crypto.position
    }

    /// A fresh copy of the client, its stand-in's random stream back where the mirroring left it.
    func fresh() -> ProbeClient {
        crypto.position = position
        return client
    }
}

/// Indexed by options bits 0 and 1: the hello, and the `verify()` answer. libFuzzer runs one input at a time.
nonisolated(unsafe) let starts = (0..<4).map { Start(ProbeHellos.all[$0 & 1], verifies: $0 & 2 != 0) }

func run(_ start: Start, _ chunks: [ArraySlice<UInt8>]) -> Run {
    var client = start.fresh()
    var result = Run()
    result.sent = client.start()
    let baseline = allocatedBytes()
    for chunk in chunks {
        do {
            let step = try client.receive(chunk)
            let held = allocatedBytes() - baseline
            check(held <= heapBound + 3 * chunk.count, "the engine holds \(held) bytes after a chunk of \(chunk.count)")
            switch step {
            case .needsMoreBytes(let send):
                result.sent += send
            case .done(let done, let send):
                result.sent += send
                result.outcome = .done(done)
                return result
            }
        } catch {
            result.outcome = .failed(error)
            return result
        }
    }
    return result
}

func checkResult(_ result: ProbeClientResult, verifies: Bool) {
    check(!result.chainDER.isEmpty, "a result without a chain")
    if result.version == .tls1_3 {
        check(result.serverMessages.last?.type == 20, "a TLS 1.3 result not ending in Finished: \(result.serverMessages)")
        check(!result.serverRecordLengths.isEmpty, "a TLS 1.3 result without records")
        check(result.proofVerified, "a TLS 1.3 result without proof")
    }
    guard !verifies else { return }
    check(result.version != .tls1_3, "a TLS 1.3 flight accepted although its CertificateVerify does not verify")
    let name = result.cipher.name ?? ""
    if name.contains("_ECDHE_") || name.contains("_DHE_") {
        check(result.version < .tls1_2 && !result.proofVerified,
              "a \(result.version) \(name) flight accepted although its ServerKeyExchange does not verify")
    } else {
        check(name.hasPrefix("TLS_RSA_WITH_"),
              "a \(result.version) flight with suite \(result.cipher) (no RSA or (EC)DHE key exchange) accepted, "
                + "proofVerified \(result.proofVerified)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProbeClient(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let options = input.byte()
    var sizes = ChunkSizes(header: input.byte(), seed: input.uint16())
    let prefixLength = Int(input.uint16())
    var server = Array(input.rest)
    let start = starts[Int(options & 3)]
    let verifies = options & 2 != 0
    let amplified = options & 0x0C == 0x0C && server.count > prefixLength
    var chunks: [ArraySlice<UInt8>] = []
    if amplified {
        server = repeatingTail(of: server, after: prefixLength, toAtLeast: amplifiedLength)
        // Chunks 64 times as long (up to 16 KiB), so 512 KiB take tens of calls, not thousands.
        var rest = server[...]
        while !rest.isEmpty {
            chunks.append(rest.prefix(sizes.next() * 64))
            rest = rest.dropFirst(chunks[chunks.count - 1].count)
        }
    } else {
        chunks = sizes.split(server[...])
    }
    let whole = run(start, server.isEmpty ? [] : [server[...]])
    let chunked = run(start, chunks)
    check(whole.outcome == chunked.outcome, "whole \(whole.outcome) != chunked \(chunked.outcome)")
    // The bytes to send: the same, but for a failure, which drops what the failing call would have sent (the second
    // hello after a HelloRetryRequest in the same call): a probe that fails sends nothing more. So fed whole, the
    // bytes sent are a prefix of those sent fed in chunks.
    if case .failed = whole.outcome {
        check(chunked.sent.starts(with: whole.sent),
              "sent \(whole.sent.count) bytes whole, \(chunked.sent.count) chunked, not a prefix")
    } else {
        check(whole.sent == chunked.sent, "sent \(whole.sent.count) bytes whole, \(chunked.sent.count) chunked")
    }
    if case .done(let result) = whole.outcome { checkResult(result, verifies: verifies) }
    if traceOutcomes { print("FuzzProbeClient: \(whole.outcome)") }
    return 0
}

/// `bytes` with what follows `prefix` repeated until the whole is at least `length` long (whole repetitions; at least
/// one, as given). Copied with memcpy, doubling: appending slice by slice ran the fuzzer's comparison hooks on every
/// byte, which made building an amplified input cost more than reading it.
func repeatingTail(of bytes: [UInt8], after prefix: Int, toAtLeast length: Int) -> [UInt8] {
    let tail = bytes.count - prefix
    precondition(tail > 0)
    let total = prefix + tail * max(1, (length - prefix + tail - 1) / tail)
    return [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
        let base = buffer.baseAddress!
        bytes.withUnsafeBufferPointer { _ = memcpy(base, $0.baseAddress!, bytes.count) }
        var filled = bytes.count
        while filled < total {
            // [prefix, filled) is whole tails, so copying its start keeps the period.
            let n = min(filled - prefix, total - filled)
            _ = memcpy(base + filled, base + prefix, n)
            filled += n
        }
        count = total
    }
}

/// FUZZ_PROBE_TRACE=1: print each input's outcome, for checking seeds:
/// `FUZZ_PROBE_TRACE=1 .build/release/FuzzProbeClient corpus/FuzzProbeClient/*`.
let traceOutcomes = getenv("FUZZ_PROBE_TRACE") != nil
