import COpenSSL

/// `--fresh-certificates`: the builtin upstream answers each fresh server name with a leaf certificate of its own (its
/// own serial number, subject and SAN; one key for all, signed by the generated intermediate), minted when the name
/// is first asked for. A proxy then meets a chain it has never seen on every first contact, as in front of real
/// users, instead of one wildcard leaf whose checks it may remember. Used on the upstream's thread only.
final class LeafMinter {
    private let issuer: OpaquePointer      // X509 *: the intermediate
    private let issuerKey: OpaquePointer   // EVP_PKEY *
    private let leafKey: OpaquePointer     // EVP_PKEY *
    private let chain: OpaquePointer       // STACK_OF(X509) *: the intermediate, sent after each leaf
    private var minted: [String: OpaquePointer] = [:]   // name -> X509 *
    private var serial = 1_000

    /// How many leaves it has minted.
    var count: Int { minted.count }

    init(chain generated: GeneratedChain) throws(BenchError) {
        issuer = try Self.read(generated.intermediateFile) { PEM_read_bio_X509($0, nil, nil, nil) }
        issuerKey = try Self.read(generated.intermediateKeyFile) { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
        leafKey = try Self.read(generated.keyFile) { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
        guard let stack = c_openssl_sk_X509_new_null() else { throw BenchError("sk_X509_new_null failed") }
        X509_up_ref(issuer)
        _ = c_openssl_sk_X509_push(stack, issuer)
        chain = stack
    }

    deinit {
        for certificate in minted.values { X509_free(certificate) }
        c_openssl_sk_X509_pop_free(chain)
        X509_free(issuer)
        EVP_PKEY_free(issuerKey)
        EVP_PKEY_free(leafKey)
    }

    /// Makes `ssl` present the leaf for `name` (minting it the first time). False when minting failed.
    func present(_ name: String, on ssl: OpaquePointer) -> Bool {
        let certificate: OpaquePointer
        if let known = minted[name] {
            certificate = known
        } else {
            guard let made = mint(name) else { return false }
            minted[name] = made
            certificate = made
        }
        return SSL_use_cert_and_key(ssl, certificate, leafKey, chain, 1) == 1
    }

    private func mint(_ name: String) -> OpaquePointer? {
        guard let x509 = X509_new() else { return nil }
        serial += 1
        var ok = X509_set_version(x509, 2) == 1
            && ASN1_INTEGER_set(X509_get_serialNumber(x509), serial) == 1
            && X509_gmtime_adj(X509_getm_notBefore(x509), -3600) != nil
            && X509_gmtime_adj(X509_getm_notAfter(x509), 3 * 86_400) != nil
            && X509_set_pubkey(x509, leafKey) == 1
            && X509_set_issuer_name(x509, X509_get_subject_name(issuer)) == 1
        if ok, let subject = X509_NAME_new() {
            ok = X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, "chainwatch-bench", -1, -1, 0) == 1
                && X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, name, -1, -1, 0) == 1
                && X509_set_subject_name(x509, subject) == 1
            X509_NAME_free(subject)
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer, x509, nil, nil, 0)
        let extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth"), (NID_subject_alt_name, "DNS:\(name)"),
            (NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid"),
        ]
        for (nid, value) in extensions where ok {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else { ok = false; break }
            ok = X509_add_ext(x509, ext, -1) == 1
            X509_EXTENSION_free(ext)
        }
        if ok { ok = X509_sign(x509, issuerKey, EVP_sha256()) > 0 }
        guard ok else { X509_free(x509); return nil }
        return x509
    }

    private static func read(_ path: String, _ parse: (OpaquePointer) -> OpaquePointer?) throws(BenchError) -> OpaquePointer {
        guard let bio = BIO_new_file(path, "r") else { throw BenchError("cannot open \(path): \(drainOpenSSLErrors())") }
        defer { BIO_free(bio) }
        guard let value = parse(bio) else { throw BenchError("cannot read \(path): \(drainOpenSSLErrors())") }
        return value
    }

    /// The host name a ClientHello offers (its server_name extension), if any.
    static func serverName(of ssl: OpaquePointer) -> String? {
        var data: UnsafePointer<UInt8>?
        var length = 0
        guard SSL_client_hello_get0_ext(ssl, UInt32(TLSEXT_TYPE_server_name), &data, &length) == 1, let data, length > 5 else { return nil }
        // ServerNameList: u16 length, then entries of u8 type (0 = host_name), u16 length, name.
        let bytes = UnsafeBufferPointer(start: data, count: length)
        guard bytes[2] == 0 else { return nil }
        let nameLength = Int(bytes[3]) << 8 | Int(bytes[4])
        guard 5 + nameLength <= length else { return nil }
        return String(decoding: bytes[5..<(5 + nameLength)], as: UTF8.self)
    }
}
