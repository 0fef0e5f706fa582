import ChainwatchCore
import ChainwatchOpenSSL
import Crypto
import Testing

/// `CertificateSignatureCheck`: true only for an ECDSA signature that verifies, false for everything else (which then
/// goes to OpenSSL), on the test PKI's real certificates and on certificates signed here with P-256 and P-384 keys.
@Suite struct CertificateSignatureCheckTests {
    static let sha256Algorithm: [UInt8] = [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
    static let sha384Algorithm: [UInt8] = [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03]

    /// One DER element: tag, definite length, content.
    static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        let length: [UInt8] = n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        return [tag] + length + content
    }

    /// A TBSCertificate whose `signature` field is `algorithm` (the rest is filler the check does not read).
    static func tbs(algorithm: [UInt8], subjectKey: [UInt8] = element(0x30, [])) -> [UInt8] {
        element(0x30, element(0xA0, element(0x02, [2])) + element(0x02, [0x01, 0x23]) + algorithm
                      + element(0x30, []) + element(0x30, []) + element(0x30, []) + subjectKey)
    }

    static func certificate(tbs: [UInt8], algorithm: [UInt8], signature: [UInt8], unusedBits: UInt8 = 0) -> [UInt8] {
        element(0x30, tbs + algorithm + element(0x03, [unusedBits] + signature))
    }

    /// An issuer certificate carrying `spki` (its own signature is not read).
    static func issuer(spki: [UInt8]) -> [UInt8] {
        certificate(tbs: tbs(algorithm: sha256Algorithm, subjectKey: spki), algorithm: sha256Algorithm, signature: [0x30, 0x00])
    }

    @Test func theTestPKIsSignaturesAgreeWithOpenSSL() throws {
        let pairs = [("genuine", "genuine-intermediate", true), ("genuine-intermediate", "genuine-root", true),
                     ("attacker", "attacker-intermediate", true), ("attacker", "genuine-intermediate", false),
                     ("genuine", "attacker-intermediate", false), ("weak-rsa1024", "genuine-intermediate", true)]
        for (subject, issuer, valid) in pairs {
            let s = try PKI.certificate(subject), i = try PKI.certificate(issuer)
            #expect(CertificateSignatureCheck.verifies(subjectDER: s.der, issuerDER: i.der) == valid, "\(subject) by \(issuer)")
        }
        // ecdsa-with-SHA1 is not handled here: OpenSSL checks it.
        let sha1 = try PKI.certificate("weak-sha1"), intermediate = try PKI.certificate("genuine-intermediate")
        #expect(!CertificateSignatureCheck.verifies(subjectDER: sha1.der, issuerDER: intermediate.der))
        // An RSA issuer key is not handled either.
        #expect(!CertificateSignatureCheck.verifies(subjectDER: try PKI.certificate("genuine").der,
                                                    issuerDER: try PKI.certificate("weak-rsa1024").der))
    }

    @Test(arguments: [(false, false), (false, true), (true, false), (true, true)])
    func p256AndP384KeysWithSHA256AndSHA384(p384: Bool, sha384: Bool) throws {
        let algorithm = sha384 ? Self.sha384Algorithm : Self.sha256Algorithm
        let body = Self.tbs(algorithm: algorithm)
        let signature: [UInt8], spki: [UInt8]
        if p384 {
            let key = P384.Signing.PrivateKey()
            spki = Array(key.publicKey.derRepresentation)
            signature = Array(try (sha384 ? key.signature(for: SHA384.hash(data: body)) : key.signature(for: SHA256.hash(data: body)))
                .derRepresentation)
        } else {
            let key = P256.Signing.PrivateKey()
            spki = Array(key.publicKey.derRepresentation)
            signature = Array(try (sha384 ? key.signature(for: SHA384.hash(data: body)) : key.signature(for: SHA256.hash(data: body)))
                .derRepresentation)
        }
        let issuer = Self.issuer(spki: spki)
        let good = Self.certificate(tbs: body, algorithm: algorithm, signature: signature)
        #expect(CertificateSignatureCheck.verifies(subjectDER: good, issuerDER: issuer))

        // The same signature under the other digest's identifier, outer and inner alike: not verified.
        let other = sha384 ? Self.sha256Algorithm : Self.sha384Algorithm
        #expect(!CertificateSignatureCheck.verifies(
            subjectDER: Self.certificate(tbs: Self.tbs(algorithm: other), algorithm: other, signature: signature), issuerDER: issuer))
        // One TBS byte changed (the serial): not verified.
        var tampered = body
        tampered[tampered.count - 12] ^= 0x01
        #expect(!CertificateSignatureCheck.verifies(
            subjectDER: Self.certificate(tbs: tampered, algorithm: algorithm, signature: signature), issuerDER: issuer))
        // Another key of the same curve: not verified.
        let stranger = p384 ? Array(P384.Signing.PrivateKey().publicKey.derRepresentation)
                            : Array(P256.Signing.PrivateKey().publicKey.derRepresentation)
        #expect(!CertificateSignatureCheck.verifies(subjectDER: good, issuerDER: Self.issuer(spki: stranger)))
    }

    @Test func whatOpenSSLWouldRefuseIsNotVerifiedHere() throws {
        let key = P256.Signing.PrivateKey()
        let issuer = Self.issuer(spki: Array(key.publicKey.derRepresentation))
        let body = Self.tbs(algorithm: Self.sha256Algorithm)
        let signature = Array(try key.signature(for: SHA256.hash(data: body)).derRepresentation)
        #expect(CertificateSignatureCheck.verifies(subjectDER: Self.certificate(tbs: body, algorithm: Self.sha256Algorithm,
                                                                                 signature: signature), issuerDER: issuer))
        // The outer algorithm differs from the TBS's own (X509_verify refuses: X509_ALGOR_cmp), the signature good
        // for the outer one.
        let otherBody = Self.tbs(algorithm: Self.sha384Algorithm)
        let mismatched = Self.certificate(tbs: otherBody, algorithm: Self.sha256Algorithm,
                                          signature: Array(try key.signature(for: SHA256.hash(data: otherBody)).derRepresentation))
        #expect(!CertificateSignatureCheck.verifies(subjectDER: mismatched, issuerDER: issuer))
        // A BIT STRING with unused bits (OpenSSL: "invalid bit string bits left").
        #expect(!CertificateSignatureCheck.verifies(
            subjectDER: Self.certificate(tbs: body, algorithm: Self.sha256Algorithm, signature: signature, unusedBits: 1),
            issuerDER: issuer))
        // Bytes after the certificate, and a signature value that is not strict DER (a trailing byte inside it).
        #expect(!CertificateSignatureCheck.verifies(
            subjectDER: Self.certificate(tbs: body, algorithm: Self.sha256Algorithm, signature: signature) + [0], issuerDER: issuer))
        #expect(!CertificateSignatureCheck.verifies(
            subjectDER: Self.certificate(tbs: body, algorithm: Self.sha256Algorithm, signature: signature + [0]), issuerDER: issuer))
        // Truncated input, and an issuer that is not a certificate.
        let whole = Self.certificate(tbs: body, algorithm: Self.sha256Algorithm, signature: signature)
        for cut in [0, 1, 5, whole.count / 2, whole.count - 1] {
            #expect(!CertificateSignatureCheck.verifies(subjectDER: Array(whole.prefix(cut)), issuerDER: issuer))
        }
        #expect(!CertificateSignatureCheck.verifies(subjectDER: whole, issuerDER: Array(key.publicKey.derRepresentation)))
    }
}
