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

/// How the test signs the content with `openssl`: `dgst -<digest>`, the same with PSS padding (salt = digest
/// length), or `pkeyutl -rawin` (EdDSA hashes the content itself).
enum Signing: Sendable, CustomStringConvertible {
    case digest(String), pss(String), raw

    var description: String {
        switch self {
        case .digest(let digest): digest
        case .pss(let digest): "\(digest)+pss"
        case .raw: "raw"
        }
    }
}

/// One kind of key: how its certificate is made, the schemes whose signatures must verify and the schemes that must
/// be refused although the signature was made with the scheme's own digest (so only the key check can refuse it).
struct KeyKind: Sendable, CustomStringConvertible {
    let name: String
    let newkey: String
    var options: [String] = []
    let passes: [(scheme: UInt16, signing: Signing)]
    let refused: [(scheme: UInt16, signing: Signing)]

    var description: String { name }

    static let all: [KeyKind] = [
        KeyKind(name: "rsa", newkey: "rsa:2048",
                passes: [(0x0804, .pss("sha256")), (0x0805, .pss("sha384")), (0x0806, .pss("sha512")),
                         (0x0401, .digest("sha256")), (0x0501, .digest("sha384")), (0x0601, .digest("sha512")),
                         (0x0201, .digest("sha1"))],
                refused: [(0x0809, .pss("sha256")), (0x0403, .digest("sha256")), (0x0804, .digest("sha256")),
                          (0x0401, .pss("sha256"))]),
        KeyKind(name: "rsapss", newkey: "rsa-pss", options: ["rsa_keygen_bits:2048"],
                passes: [(0x0809, .pss("sha256"))], refused: [(0x0804, .pss("sha256"))]),
        KeyKind(name: "p256", newkey: "ec", options: ["ec_paramgen_curve:P-256"],
                passes: [(0x0403, .digest("sha256")), (0x0203, .digest("sha1"))],
                refused: [(0x0503, .digest("sha384")), (0x0804, .digest("sha256")), (0x0401, .digest("sha256"))]),
        KeyKind(name: "p384", newkey: "ec", options: ["ec_paramgen_curve:P-384"],
                passes: [(0x0503, .digest("sha384"))], refused: [(0x0403, .digest("sha256")), (0x0603, .digest("sha512"))]),
        KeyKind(name: "p521", newkey: "ec", options: ["ec_paramgen_curve:P-521"],
                passes: [(0x0603, .digest("sha512"))], refused: [(0x0503, .digest("sha384"))]),
        KeyKind(name: "ed25519", newkey: "ed25519", passes: [(0x0807, .raw)], refused: [(0x0808, .raw)]),
        KeyKind(name: "ed448", newkey: "ed448", passes: [(0x0808, .raw)], refused: [(0x0807, .raw)]),
    ]
}

/// `SwiftCryptoTLS.verify`: each scheme with a key of its kind, and false for a flipped byte, a scheme the key
/// cannot make, and certificates that do not decode.
@Suite struct SignatureTests {
    let crypto = SwiftCryptoTLS()

    func flipped(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        bytes[bytes.count / 2] ^= 0x01
        return bytes
    }

    func sign(_ shop: OpenSSLWorkshop, _ name: String, _ signing: Signing) throws -> [UInt8] {
        switch signing {
        case .digest(let digest): return try shop.sign(name, digest: digest)
        case .pss(let digest): return try shop.sign(name, digest: digest, sigopts: ["rsa_padding_mode:pss", "rsa_pss_saltlen:digest"])
        case .raw:
            try shop.run(["pkeyutl", "-sign", "-inkey", "\(name).key", "-rawin", "-in", "content", "-out", "\(name).sig"])
            return try shop.bytes("\(name).sig")
        }
    }

    @Test(arguments: KeyKind.all)
    func keyKind(_ kind: KeyKind) throws {
        let shop = try OpenSSLWorkshop()
        let cert = try shop.certificate(kind.name, newkey: kind.newkey, options: kind.options)
        let content = try shop.content
        for (scheme, signing) in kind.passes {
            let signature = try sign(shop, kind.name, signing)
            #expect(crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: signature), "\(scheme) \(signing)")
            #expect(!crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: flipped(signature)))
            #expect(!crypto.verify(scheme: scheme, certificateDER: cert, content: flipped(content), signature: signature))
        }
        for (scheme, signing) in kind.refused {
            let signature = try sign(shop, kind.name, signing)
            #expect(!crypto.verify(scheme: scheme, certificateDER: cert, content: content, signature: signature), "\(scheme) \(signing)")
        }
    }

    @Test func unreadableCertificatesAndUnknownSchemes() throws {
        let shop = try OpenSSLWorkshop()
        let cert = try shop.certificate("p256", newkey: "ec", options: ["ec_paramgen_curve:P-256"])
        let content = try shop.content
        let signature = try shop.sign("p256", digest: "sha256")
        #expect(crypto.verify(scheme: 0x0403, certificateDER: cert, content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: [0x30, 0x03, 0x02, 0x01, 0x00], content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: [], content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: Array(cert.dropLast()), content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: cert + [0], content: content, signature: signature))
        #expect(!crypto.verify(scheme: 0x0403, certificateDER: cert, content: content, signature: []))
        #expect(!crypto.verify(scheme: 0xFFFF, certificateDER: cert, content: content, signature: signature))
    }
}
