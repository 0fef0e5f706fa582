import Crypto

/// A certificate's ECDSA signature checked with swift-crypto's BoringSSL, read from the two certificates' DER: what
/// nearly every leaf of a cold first contact needs (an ECDSA P-256 or P-384 issuer, ecdsa-with-SHA256 or -SHA384).
///
/// Why: OpenSSL 3.0's `X509_verify` on such a leaf took about 84 µs of a cold TLS 1.3 first contact here (6.5 % of
/// its CPU, `bench/RESULTS.md`), BoringSSL's P-256 verification about 58 µs (`openssl speed ecdsap256`: 90 µs).
///
/// An accelerator, never a judge: `verifies` answers true only for a signature that verified, and false for anything
/// else (another algorithm, an encoding BoringSSL refuses, a signature that did not verify), and then OpenSSL checks
/// as before and its answer stands. So what is accepted is what OpenSSL accepts: it checks the same things over the
/// same bytes (the outer and inner algorithm identical, here byte for byte; no unused bits in the signature; the
/// digest over the TBSCertificate as sent; a strict DER ECDSA-Sig-Value), and an ECDSA verification that succeeds
/// succeeds with either library.
package enum CertificateSignatureCheck {
    /// ecdsa-with-SHA256 and ecdsa-with-SHA384 AlgorithmIdentifiers (RFC 5758 §3.2: no parameters).
    private static let ecdsaSHA256: [UInt8] = [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
    private static let ecdsaSHA384: [UInt8] = [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03]

    /// True when `subjectDER`'s signature is an ECDSA signature that verifies with `issuerDER`'s P-256 or P-384 key;
    /// false otherwise, including every case this does not handle.
    package static func verifies(subjectDER: [UInt8], issuerDER: [UInt8]) -> Bool {
        guard let parts = CertificateKeyInfo.signedParts(subjectDER), parts.algorithm.elementsEqual(parts.innerAlgorithm),
              let key = CertificateKeyInfo.subjectPublicKeyInfo(issuerDER) else { return false }
        let sha384: Bool
        if parts.algorithm.elementsEqual(ecdsaSHA256) { sha384 = false }
        else if parts.algorithm.elementsEqual(ecdsaSHA384) { sha384 = true }
        else { return false }
        if let p256 = try? P256.Signing.PublicKey(derRepresentation: key) {
            guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: parts.signature) else { return false }
            return sha384 ? p256.isValidSignature(signature, for: SHA384.hash(data: parts.tbs))
                          : p256.isValidSignature(signature, for: SHA256.hash(data: parts.tbs))
        }
        if let p384 = try? P384.Signing.PublicKey(derRepresentation: key) {
            guard let signature = try? P384.Signing.ECDSASignature(derRepresentation: parts.signature) else { return false }
            return sha384 ? p384.isValidSignature(signature, for: SHA384.hash(data: parts.tbs))
                          : p384.isValidSignature(signature, for: SHA256.hash(data: parts.tbs))
        }
        return false
    }
}
