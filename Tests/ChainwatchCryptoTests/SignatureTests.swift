import ChainwatchCore
import ChainwatchCrypto
import Foundation
import Testing

/// Keys, certificates and signatures made with the `openssl` CLI in a temporary directory, checked by `verify`.
final class OpenSSLWorkshop {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("chainwatch-sig-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data("the content a TLS server signs".utf8).write(to: directory.appendingPathComponent("content"))
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: ["openssl": arguments]) }
    }

    func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: directory.appendingPathComponent(name))) }

    var content: [UInt8] { get throws { try bytes("content") } }

    /// A self-signed DER certificate for a new key (`newkey` as `openssl req -newkey` takes it), named `name`.
    func certificate(_ name: String, newkey: String, options: [String] = []) throws -> [UInt8] {
        try run(["req", "-x509", "-newkey", newkey] + options.flatMap { ["-pkeyopt", $0] }
                + ["-nodes", "-keyout", "\(name).key", "-subj", "/CN=\(name)", "-days", "1", "-outform", "DER", "-out", "\(name).der"])
        return try bytes("\(name).der")
    }

    /// `openssl dgst -<digest> -sign` over the content, with `-sigopt`s.
    func sign(_ name: String, digest: String, sigopts: [String] = []) throws -> [UInt8] {
        try run(["dgst", "-\(digest)", "-sign", "\(name).key"] + sigopts.flatMap { ["-sigopt", $0] } + ["-out", "\(name).sig", "content"])
        return try bytes("\(name).sig")
    }
}

/// `SwiftCryptoTLS.verify`: each scheme with a key of its kind, and false for a flipped byte, a scheme the key
/// cannot make, and certificates that do not decode.
@Suite struct SignatureTests {
    let crypto = SwiftCryptoTLS()
    static let pss = ["rsa_padding_mode:pss", "rsa_pss_saltlen:digest"]

    func flipped(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        bytes[bytes.count / 2] ^= 0x01
        return bytes
    }

    @Test func rsa() throws {
        let shop = try OpenSSLWorkshop()
        let cert = try shop.certificate("rsa", newkey: "rsa:2048")
        let content = try shop.content
        for (scheme, digest) in [(UInt16(0x0804), "sha256"), (0x0805, "sha384"), (0x0806, "sha512")] {
            let signature = try shop.sign("rsa", digest: digest, sigopts: Self.pss)
            #expect(crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: signature))
            #expect(!crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: flipped(signature)))
            #expect(!crypto.verify(scheme: scheme, certificateDER: cert, content: flipped(content), signature: signature))
        }
        let pssSignature = try shop.sign("rsa", digest: "sha256", sigopts: Self.pss)
        #expect(!crypto.verify(scheme: 0x0809, certificateDER: cert, content: content, signature: pssSignature))  // rsaEncryption key
        #expect(!crypto.verify(scheme: 0x0401, certificateDER: cert, content: content, signature: pssSignature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: cert, content: content, signature: pssSignature))
        for (scheme, digest) in [(UInt16(0x0401), "sha256"), (0x0501, "sha384"), (0x0601, "sha512"), (0x0201, "sha1")] {
            let signature = try shop.sign("rsa", digest: digest)
            #expect(crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: signature))
            #expect(!crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: flipped(signature)))
        }
        #expect(!crypto.verify(scheme: 0x0804, certificateDER: cert, content: content, signature: try shop.sign("rsa", digest: "sha256")))
    }

    @Test func rsaPSSKey() throws {
        let shop = try OpenSSLWorkshop()
        let cert = try shop.certificate("pss", newkey: "rsa-pss", options: ["rsa_keygen_bits:2048"])
        let content = try shop.content
        let signature = try shop.sign("pss", digest: "sha256", sigopts: Self.pss)
        #expect(crypto.verify(scheme: 0x0809, certificateDER: cert, content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0809, certificateDER: cert, content: content, signature: flipped(signature)))
        #expect(!crypto.verify(scheme: 0x0804, certificateDER: cert, content: content, signature: signature))
    }

    @Test func ecdsa() throws {
        let shop = try OpenSSLWorkshop()
        let content = try shop.content
        let p256 = try shop.certificate("p256", newkey: "ec", options: ["ec_paramgen_curve:P-256"])
        let p256Signature = try shop.sign("p256", digest: "sha256")
        #expect(crypto.verify(scheme: 0x0403, certificateDER: p256, content: content, signature: p256Signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: p256, content: content, signature: flipped(p256Signature)))
        #expect(!crypto.verify(scheme: 0x0503, certificateDER: p256, content: content, signature: p256Signature))
        #expect(!crypto.verify(scheme: 0x0804, certificateDER: p256, content: content, signature: p256Signature))
        #expect(crypto.verify(scheme: 0x0203, certificateDER: p256, content: content, signature: try shop.sign("p256", digest: "sha1")))

        let p384 = try shop.certificate("p384", newkey: "ec", options: ["ec_paramgen_curve:P-384"])
        let p384Signature = try shop.sign("p384", digest: "sha384")
        #expect(crypto.verify(scheme: 0x0503, certificateDER: p384, content: content, signature: p384Signature))
        #expect(!crypto.verify(scheme: 0x0503, certificateDER: p384, content: content, signature: flipped(p384Signature)))
        let p384SHA256 = try shop.sign("p384", digest: "sha256")
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: p384, content: content, signature: p384SHA256))  // a P-384 key
    }

    @Test func p521AndEd448() throws {
        let shop = try OpenSSLWorkshop()
        let content = try shop.content
        let p521 = try shop.certificate("p521", newkey: "ec", options: ["ec_paramgen_curve:P-521"])
        let p521Signature = try shop.sign("p521", digest: "sha512")
        #expect(crypto.verify(scheme: 0x0603, certificateDER: p521, content: content, signature: p521Signature))
        #expect(!crypto.verify(scheme: 0x0503, certificateDER: p521, content: content, signature: p521Signature))
        let ed448 = try shop.certificate("ed448", newkey: "ed448")
        try shop.run(["pkeyutl", "-sign", "-inkey", "ed448.key", "-rawin", "-in", "content", "-out", "ed448.sig"])
        let ed448Signature = try shop.bytes("ed448.sig")
        #expect(crypto.verify(scheme: 0x0808, certificateDER: ed448, content: content, signature: ed448Signature))
        #expect(!crypto.verify(scheme: 0x0808, certificateDER: ed448, content: content, signature: flipped(ed448Signature)))
        #expect(!crypto.verify(scheme: 0x0807, certificateDER: ed448, content: content, signature: ed448Signature))
    }

    @Test func ed25519() throws {
        let shop = try OpenSSLWorkshop()
        let cert = try shop.certificate("ed", newkey: "ed25519")
        try shop.run(["pkeyutl", "-sign", "-inkey", "ed.key", "-rawin", "-in", "content", "-out", "ed.sig"])
        let signature = try shop.bytes("ed.sig")
        let content = try shop.content
        #expect(signature.count == 64)
        #expect(crypto.verify(scheme: 0x0807, certificateDER: cert, content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0807, certificateDER: cert, content: content, signature: flipped(signature)))
        #expect(!crypto.verify(scheme: 0x0808, certificateDER: cert, content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: cert, content: content, signature: signature))
    }

    @Test func unreadableCertificatesAndUnknownSchemes() throws {
        let shop = try OpenSSLWorkshop()
        let cert = try shop.certificate("p256", newkey: "ec", options: ["ec_paramgen_curve:P-256"])
        let content = try shop.content
        let signature = try shop.sign("p256", digest: "sha256")
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: [0x30, 0x03, 0x02, 0x01, 0x00], content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: [], content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: Array(cert.dropLast()), content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: cert + [0], content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: cert, content: content, signature: []))
        #expect(!crypto.verify(scheme: 0xFFFF, certificateDER: cert, content: content, signature: signature))
    }
}
