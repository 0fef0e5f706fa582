internal import COpenSSL

/// TLS signature verification with OpenSSL's libcrypto: the public key of a DER certificate, checked against the
/// SignatureScheme (RFC 8446 §4.2.3, and the TLS 1.2 rsa_pkcs1_sha1 and ecdsa_sha1) before it is used, so a key can
/// only pass the schemes it can make: an RSA key no ECDSA scheme, a P-384 key no P-256 scheme, an rsaEncryption key
/// no rsa_pss_pss scheme.
///
/// The certificate comes from `DecodedCertificates`: the probe checks its server's CertificateVerify with the leaf,
/// and the path validator then finds that leaf decoded (OpenSSL 3.0's decoding costs about as much as a signature
/// check).
public enum SignatureVerifier {
    /// What a scheme asks of the key and of the verification.
    private struct Scheme {
        /// The hash signed over (EdDSA: none, the key hashes the whole content itself).
        enum Digest { case sha1, sha256, sha384, sha512, none }
        /// `EVP_PKEY_get_base_id` of the key the scheme needs.
        let keyType: Int32
        /// The EC group (`EVP_PKEY_get_group_name`) the scheme needs; nil for any (and for non-EC keys).
        let curve: String?
        let digest: Digest
        let pss: Bool

        init?(_ code: UInt16) {
            switch code {
            case 0x0804: self.init(EVP_PKEY_RSA, .sha256, pss: true)
            case 0x0805: self.init(EVP_PKEY_RSA, .sha384, pss: true)
            case 0x0806: self.init(EVP_PKEY_RSA, .sha512, pss: true)
            case 0x0809: self.init(EVP_PKEY_RSA_PSS, .sha256, pss: true)
            case 0x080A: self.init(EVP_PKEY_RSA_PSS, .sha384, pss: true)
            case 0x080B: self.init(EVP_PKEY_RSA_PSS, .sha512, pss: true)
            case 0x0401: self.init(EVP_PKEY_RSA, .sha256)
            case 0x0501: self.init(EVP_PKEY_RSA, .sha384)
            case 0x0601: self.init(EVP_PKEY_RSA, .sha512)
            case 0x0201: self.init(EVP_PKEY_RSA, .sha1)
            case 0x0403: self.init(EVP_PKEY_EC, .sha256, curve: "prime256v1")
            case 0x0503: self.init(EVP_PKEY_EC, .sha384, curve: "secp384r1")
            case 0x0603: self.init(EVP_PKEY_EC, .sha512, curve: "secp521r1")
            case 0x0203: self.init(EVP_PKEY_EC, .sha1)
            case 0x0807: self.init(EVP_PKEY_ED25519, .none)
            case 0x0808: self.init(EVP_PKEY_ED448, .none)
            default: return nil
            }
        }

        private init(_ keyType: Int32, _ digest: Digest, curve: String? = nil, pss: Bool = false) {
            (self.keyType, self.digest, self.curve, self.pss) = (keyType, digest, curve, pss)
        }

        /// Borrowed from OpenSSL (static); nil for the schemes that hash internally (EdDSA).
        var md: OpaquePointer? {
            switch digest {
            case .sha1: EVP_sha1()
            case .sha256: EVP_sha256()
            case .sha384: EVP_sha384()
            case .sha512: EVP_sha512()
            case .none: nil
            }
        }
    }

    /// Whether `signature` over `content` verifies under the key of `certificateDER` with `scheme`. False for an
    /// unknown scheme, a key the scheme does not fit, an unreadable certificate. Leaves OpenSSL's error queue empty.
    public static func verify(scheme code: UInt16, certificateDER: [UInt8], content: [UInt8], signature: [UInt8],
                              certificates: DecodedCertificates = .shared) -> Bool {
        defer { ERR_clear_error() }
        guard let scheme = Scheme(code), let certificate = try? certificates.certificate(der: certificateDER),
              let key = X509_get0_pubkey(certificate.raw),  // borrowed from the certificate
              keyFits(key, scheme) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?  // borrowed from `context`
        guard EVP_DigestVerifyInit(context, &keyContext, scheme.md, nil, key) == 1 else { return false }
        if scheme.pss {
            guard EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                  EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1 else { return false }
        }
        return signature.withUnsafeBufferPointer { signature in
            content.withUnsafeBufferPointer { content in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, content.baseAddress, content.count) == 1
            }
        }
    }

    /// Whether `key` (borrowed) is of the scheme's type and, where the scheme names one, on its curve.
    private static func keyFits(_ key: OpaquePointer, _ scheme: Scheme) -> Bool {
        guard EVP_PKEY_get_base_id(key) == scheme.keyType else { return false }
        guard let curve = scheme.curve else { return true }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return false }
        return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == curve
    }
}
