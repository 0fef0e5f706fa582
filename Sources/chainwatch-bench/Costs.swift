import ArgumentParser
import ChainwatchCore
import ChainwatchCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `chainwatch-bench costs`: the probe's own cryptography, timed alone with the implementation the proxy runs
/// (`SwiftCryptoTLS`): an X25519 key share made (the mirrored hello's), an X25519 agreement (the server's share), and
/// a CertificateVerify checked (ecdsa_secp256r1_sha256 on a leaf's key, as the probe reads it from the DER). For
/// `bench/floor-costs.sh`, which adds what OpenSSL does for the validator.
struct Costs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Time the probe's own cryptography per operation (CPU microseconds): X25519 key share, agreement, a P-256 CertificateVerify.",
        discussion: """
            The CertificateVerify is checked on --certificate (a P-256 leaf, DER), --signed (the signed bytes) and \
            --signature (an ECDSA signature, DER, by the leaf's key, over SHA-256): bench/floor-costs.sh makes them \
            with the openssl command. Prints one line per operation, its name and microseconds; exits 1 if the \
            signature does not verify (a timing of a failing check would be of another path).
            """)
    @Option(help: "A P-256 leaf certificate, DER.")
    var certificate: String
    @Option(help: "The bytes the signature signs.")
    var signed: String
    @Option(help: "An ECDSA P-256 signature over SHA-256 of --signed by the leaf's key, DER.")
    var signature: String
    @Option(help: "Operations timed per kind.")
    var count = 2000

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        let read = { (path: String) throws -> [UInt8] in [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }
        let (leaf, content, signatureDER) = (try read(certificate), try read(signed), try read(signature))
        let crypto = SwiftCryptoTLS()
        guard crypto.verify(scheme: 0x0403, certificateDER: leaf, content: content, signature: signatureDER) else {
            FileHandle.standardError.write(Data("chainwatch-bench: error: the signature does not verify\n".utf8))
            throw ExitCode(1)
        }
        let server = try crypto.keyExchange(group: 0x001D, x25519: nil).publicShare
        let client = try crypto.keyExchange(group: 0x001D, x25519: nil)
        var sink = 0
        let keyShare = try Self.microseconds(count) {
            sink &+= Int(try crypto.keyExchange(group: 0x001D, x25519: nil).publicShare[0])
        }
        let agreement = try Self.microseconds(count) { sink &+= Int(try client.sharedSecret(serverShare: server)[0]) }
        var verified = 0
        let verify = Self.microseconds(count) {
            if crypto.verify(scheme: 0x0403, certificateDER: leaf, content: content, signature: signatureDER) { verified += 1 }
        }
        guard verified == count else { throw ExitCode(1) }
        print(String(format: "x25519-key-share %.2f", keyShare))
        print(String(format: "x25519-agreement %.2f", agreement))
        print(String(format: "p256-certificate-verify %.2f", verify))
        if sink == -1 { print("") }   // keeps the results used
    }

    /// CPU microseconds of this process per call of `body`, over `count` calls.
    static func microseconds(_ count: Int, _ body: () throws -> Void) rethrows -> Double {
        func now() -> Double {
            var t = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
            return Double(t.tv_sec) * 1e6 + Double(t.tv_nsec) / 1e3
        }
        let start = now()
        for _ in 0..<count { try body() }
        return (now() - start) / Double(count)
    }
}
