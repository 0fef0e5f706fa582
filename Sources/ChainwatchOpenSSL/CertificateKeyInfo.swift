/// The SubjectPublicKeyInfo of a DER certificate, found by walking its DER (RFC 5280 §4.1): what the probe needs to
/// check a CertificateVerify without decoding the whole certificate (OpenSSL 3.0 decodes the key through its provider
/// framework, about 1.5 million instructions, and the path validator decodes the certificate once anyway), and what
/// `CertificateSignatureCheck` needs to check a certificate's signature.
package enum CertificateKeyInfo {
    /// The SubjectPublicKeyInfo element (tag and length included); nil for bytes that are not one certificate's DER
    /// (trailing bytes included: as `SignatureVerifier` and the validator refuse them).
    package static func subjectPublicKeyInfo(_ der: [UInt8]) -> ArraySlice<UInt8>? {
        guard let certificate = element(der[...]), certificate.tag == 0x30, certificate.after.isEmpty,
              let tbs = element(certificate.content), tbs.tag == 0x30 else { return nil }
        var rest = tbs.content
        if let version = element(rest), version.tag == 0xA0 { rest = version.after }   // [0] version, optional
        // serialNumber, signature, issuer, validity, subject, then subjectPublicKeyInfo.
        for expected: UInt8 in [0x02, 0x30, 0x30, 0x30, 0x30] {
            guard let field = element(rest), field.tag == expected else { return nil }
            rest = field.after
        }
        guard let info = element(rest), info.tag == 0x30 else { return nil }
        return rest[rest.startIndex..<info.after.startIndex]
    }

    /// The signed parts of a DER certificate (RFC 5280 §4.1): the TBSCertificate element as it was signed (tag and
    /// length included), the outer signatureAlgorithm element, the TBSCertificate's own `signature` algorithm element
    /// (which must match the outer one), and the signature's bytes (the BIT STRING's content after its unused-bits
    /// octet, which must be 0). Nil for bytes that are not one certificate's DER or have a signature with unused bits.
    package static func signedParts(_ der: [UInt8])
        -> (tbs: ArraySlice<UInt8>, algorithm: ArraySlice<UInt8>, innerAlgorithm: ArraySlice<UInt8>, signature: ArraySlice<UInt8>)?
    {
        guard let certificate = element(der[...]), certificate.tag == 0x30, certificate.after.isEmpty,
              let tbs = element(certificate.content), tbs.tag == 0x30,
              let algorithm = element(tbs.after), algorithm.tag == 0x30,
              let signature = element(algorithm.after), signature.tag == 0x03, signature.after.isEmpty,
              signature.content.first == 0 else { return nil }
        var rest = tbs.content
        if let version = element(rest), version.tag == 0xA0 { rest = version.after }   // [0] version, optional
        guard let serial = element(rest), serial.tag == 0x02,
              let inner = element(serial.after), inner.tag == 0x30 else { return nil }
        let body = certificate.content
        return (body[body.startIndex..<tbs.after.startIndex],
                tbs.after[tbs.after.startIndex..<algorithm.after.startIndex],
                serial.after[serial.after.startIndex..<inner.after.startIndex],
                signature.content.dropFirst())
    }

    /// One DER element at the start of `bytes`: its tag, its content, and what follows it. Definite lengths only.
    private static func element(_ bytes: ArraySlice<UInt8>) -> (tag: UInt8, content: ArraySlice<UInt8>, after: ArraySlice<UInt8>)? {
        var index = bytes.startIndex
        guard index < bytes.endIndex else { return nil }
        let tag = bytes[index]
        index += 1
        guard index < bytes.endIndex else { return nil }
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...3).contains(count), bytes.endIndex - index >= count else { return nil }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard bytes.endIndex - index >= length else { return nil }
        return (tag, bytes[index..<(index + length)], bytes[(index + length)...])
    }
}
