internal import COpenSSL
import ChainwatchCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Certificate {
    /// Reads every fact from `raw` (borrowed). Throws only when an encoding (SPKI) cannot be produced;
    /// a field OpenSSL cannot read becomes empty/zero rather than failing the certificate.
    static func extractFacts(_ raw: OpaquePointer, der: [UInt8]) throws(OpenSSLError) -> CertificateFacts {
        defer { ERR_clear_error() }  // field readers below may leave notes on the queue; none is an error here
        let (dnsNames, ipAddresses) = subjectAltNames(raw)
        let (keyType, keyBits) = publicKey(raw)
        let (signatureAlgorithm, signatureDigest) = signature(raw)
        return CertificateFacts(
            sha256: sha256(der),
            spkiSHA256: sha256(try spkiDER(raw)),
            subject: rfc2253(X509_get_subject_name(raw)),
            issuer: rfc2253(X509_get_issuer_name(raw)),
            serialHex: serialHex(raw),
            notBefore: unixTime(X509_get0_notBefore(raw)),
            notAfter: unixTime(X509_get0_notAfter(raw)),
            dnsNames: dnsNames,
            ipAddresses: ipAddresses,
            keyType: keyType,
            keyBits: keyBits,
            signatureAlgorithm: signatureAlgorithm,
            signatureDigest: signatureDigest,
            isCA: X509_get_extension_flags(raw) & UInt32(EXFLAG_CA) != 0,
            isSelfSigned: X509_self_signed(raw, 1) == 1)
    }

    /// SHA-256 of `bytes` (EVP_Digest).
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return Array(digest.prefix(Int(length)))
    }

    /// DER SubjectPublicKeyInfo: `i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x))`.
    static func spkiDER(_ raw: OpaquePointer) throws(OpenSSLError) -> [UInt8] {
        guard let key = X509_get_X509_PUBKEY(raw) else { throw .drainingQueue(call: "X509_get_X509_PUBKEY") }
        let length = i2d_X509_PUBKEY(key, nil)
        guard length > 0 else { throw .drainingQueue(call: "i2d_X509_PUBKEY") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509_PUBKEY(key, &cursor)
        }
        guard written == length else { throw .drainingQueue(call: "i2d_X509_PUBKEY") }
        return bytes
    }

    /// `X509_NAME_print_ex` with `XN_FLAG_RFC2253` minus `ASN1_STRFLGS_ESC_MSB`: RFC 2253 order and
    /// escaping, but non-ASCII characters stay UTF-8 (the openssl CLI would print `\C3\A9`).
    static func rfc2253(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        let flags = c_openssl_XN_FLAG_RFC2253() & ~UInt(ASN1_STRFLGS_ESC_MSB)
        guard X509_NAME_print_ex(bio, name, 0, flags) >= 0 else { return "" }
        return string(from: bio)
    }

    /// The bytes written to a memory BIO (borrowed), as UTF-8 text.
    static func string(from bio: OpaquePointer) -> String {
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = c_openssl_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        let bytes = UnsafeRawBufferPointer(start: data, count: length)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Serial number as uppercase hex, whole bytes (`BN_bn2hex`), as `openssl x509 -serial` prints it.
    static func serialHex(_ raw: OpaquePointer) -> String {
        guard let serial = X509_get0_serialNumber(raw), let bn = ASN1_INTEGER_to_BN(serial, nil) else { return "" }
        defer { BN_free(bn) }
        guard let hex = BN_bn2hex(bn) else { return "" }
        defer { c_openssl_OPENSSL_free(hex) }
        return String(cString: hex)
    }

    /// `ASN1_TIME_to_tm` then `timegm`; the epoch when the field is unreadable.
    static func unixTime(_ time: UnsafePointer<ASN1_TIME>?) -> UnixTime {
        guard let time else { return UnixTime(seconds: 0) }
        var fields = tm()
        guard ASN1_TIME_to_tm(time, &fields) == 1 else { return UnixTime(seconds: 0) }
        return UnixTime(seconds: Int64(timegm(&fields)))
    }

    /// DNS and IP subjectAltNames in certificate order.
    static func subjectAltNames(_ raw: OpaquePointer) -> (dns: [String], ip: [String]) {
        guard let extensionValue = X509_get_ext_d2i(raw, NID_subject_alt_name, nil, nil) else { return ([], []) }
        let names = OpaquePointer(extensionValue)  // GENERAL_NAMES * (a STACK_OF(GENERAL_NAME))
        defer { c_openssl_GENERAL_NAMES_free(names) }
        var dns: [String] = [], ip: [String] = []
        for index in 0..<c_openssl_sk_GENERAL_NAME_num(names) {
            guard let name = c_openssl_sk_GENERAL_NAME_value(names, index) else { continue }
            switch name.pointee.type {
            case GEN_DNS:
                if let value = name.pointee.d.dNSName { dns.append(String(decoding: bytes(of: value), as: UTF8.self)) }
            case GEN_IPADD:
                if let value = name.pointee.d.iPAddress, let text = printIP(bytes(of: value)) { ip.append(text) }
            default:
                continue
            }
        }
        return (dns, ip)
    }

    /// The content bytes of an ASN1_STRING (borrowed).
    static func bytes(of string: UnsafeMutablePointer<ASN1_STRING>) -> [UInt8] {
        let length = Int(ASN1_STRING_length(string))
        guard length > 0, let data = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: length))
    }

    /// `inet_ntop` of a 4- or 16-byte address; nil for other lengths (name constraints use 8 and 32).
    static func printIP(_ address: [UInt8]) -> String? {
        let family: Int32
        switch address.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return nil
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let ok = address.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        guard ok != nil else { return nil }
        return cString(text)
    }

    /// The text before the first NUL of a C buffer.
    static func cString(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Key family (`EVP_PKEY_get_base_id`) and size (`EVP_PKEY_get_bits`: RSA modulus, EC group order).
    static func publicKey(_ raw: OpaquePointer) -> (CertificateFacts.KeyType, Int) {
        guard let key = X509_get0_pubkey(raw) else { return (.other, 0) }
        let type: CertificateFacts.KeyType
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA, EVP_PKEY_RSA_PSS: type = .rsa
        // An SM2 key has EC's base id through OpenSSL's built-in EC method (BuiltinECKeys) and none through the
        // provider decoders: "other" either way.
        case EVP_PKEY_EC: type = EVP_PKEY_get_id(key) == EVP_PKEY_SM2 ? .other : .ec
        case EVP_PKEY_ED25519: type = .ed25519
        case EVP_PKEY_ED448: type = .ed448
        case EVP_PKEY_DSA: type = .dsa
        default: type = .other
        }
        return (type, Int(EVP_PKEY_get_bits(key)))
    }

    /// Signature algorithm long name (`sha256WithRSAEncryption`, `ecdsa-with-SHA256`, `rsassaPss`; the dotted
    /// OID when OpenSSL does not know it) and its digest's short name (`SHA256`; empty for Ed25519/Ed448),
    /// from `X509_get_signature_info` (reads RSA-PSS parameters), else `OBJ_find_sigid_algs`.
    static func signature(_ raw: OpaquePointer) -> (String, String) {
        let nid = X509_get_signature_nid(raw)
        var name = ""
        if nid != NID_undef, let longName = OBJ_nid2ln(nid) {
            name = String(cString: longName)
        } else {
            var algorithm: UnsafePointer<X509_ALGOR>? = nil
            X509_get0_signature(nil, &algorithm, raw)
            var object: OpaquePointer? = nil
            if let algorithm {
                X509_ALGOR_get0(&object, nil, nil, algorithm)
            }
            if let object {
                var text = [CChar](repeating: 0, count: 128)
                if OBJ_obj2txt(&text, Int32(text.count), object, 1) > 0 { name = cString(text) }
            }
        }
        var digestNID: Int32 = NID_undef, keyNID: Int32 = NID_undef, securityBits: Int32 = 0
        var flags: UInt32 = 0
        if X509_get_signature_info(raw, &digestNID, &keyNID, &securityBits, &flags) != 1 {
            digestNID = NID_undef
            if OBJ_find_sigid_algs(nid, &digestNID, &keyNID) != 1 { digestNID = NID_undef }
        }
        var digest = ""
        if digestNID != NID_undef, let shortName = OBJ_nid2sn(digestNID) { digest = String(cString: shortName) }
        return (name, digest)
    }
}
