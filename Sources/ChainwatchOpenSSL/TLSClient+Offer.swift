import ChainwatchCore
internal import COpenSSL

/// How a `ClientOffer` becomes settings on one client `SSL`: as much of the client's ClientHello as OpenSSL 3.0
/// lets a client repeat.
///
/// Reproduced: SNI (never for an IP literal), ALPN list and order, the version range (lowest to highest of
/// `versions`; without supported_versions, TLS 1.0 up to the legacy version), TLS 1.3 suites and older suites
/// each in the client's order (suites OpenSSL lacks are left out, as are SCSVs and anonymous suites),
/// supported_groups and signature_algorithms in the client's order (entries OpenSSL lacks left out), and which
/// optional extensions are present: encrypt_then_mac (22), extended_master_secret (23), padding (21),
/// session_ticket (35, sent empty; the session is never reused), status_request (5, OCSP), post_handshake_auth
/// (49), and, sent empty through the custom-extension API, extension types OpenSSL does not implement
/// (signed_certificate_timestamp 18 and any unknown type).
///
/// What still differs from the client's ClientHello:
/// - Extension order: OpenSSL's fixed order, with the custom (empty) extensions first; GREASE is never sent.
/// - Key shares: one, for the first key-share group of the client (moved to the front of supported_groups so
///   OpenSSL picks it); a client's second share (x25519 + P-256, or a hybrid group) is not sent, and the group
///   order differs when the client's first key-share group was not its first group.
/// - Groups OpenSSL 3.0 lacks (X25519MLKEM768 4588, X25519Kyber768 25497, brainpool TLS 1.3 groups) are left out.
/// - Always sent by OpenSSL whatever the client did: supported_groups, signature_algorithms, ec_point_formats
///   (when an ECC suite up to TLS 1.2 is offered), supported_versions, key_share and psk_key_exchange_modes
///   (when TLS 1.3 is offered); and the suite TLS_EMPTY_RENEGOTIATION_INFO_SCSV (0x00FF) last when TLS 1.2 or
///   older is offered. The renegotiation_info extension (65281) is never sent in a first handshake (OpenSSL
///   implements it, so it cannot be a custom extension either).
/// - Never sent, even when the client did: extensions whose empty form is malformed or whose answer OpenSSL 3.0
///   cannot handle: record_size_limit (28), compress_certificate (27), delegated_credentials (34),
///   application_settings (17513, 17613), encrypted_client_hello (65037); also pre_shared_key (41) and early_data
///   (42) (no session to resume), signature_algorithms_cert (50), certificate_authorities (47), NPN (13172),
///   heartbeat (15) and any extension a client sends with content (bodies are never repeated, only types).
/// - Field values: the random, session id (OpenSSL's 32 bytes in TLS 1.3 compatibility mode), compression
///   methods, the legacy version (OpenSSL writes min(highest version, TLS 1.2)), padding length.
/// An offer with no cipher suites is not from a parsed hello: its empty parts take OpenSSL's full defaults
/// (TLS 1.0 to 1.3 unless `versions` says otherwise), which is what `chainwatch pin` asks for.
extension TLSClient {
    /// Extension types OpenSSL would refuse or mishandle as empty custom extensions; see the type's comment.
    static let neverMirrored: Set<UInt16> = [27, 28, 34, 15, 17513, 17613, 65037, 13172]

    /// The offered extension types to send empty through the custom-extension API, in the offer's (sorted) order.
    static func customExtensions(for offer: ClientOffer) -> [UInt16] {
        var seen = Set<UInt16>()
        return offer.extensionTypes.filter { type in
            guard !neverMirrored.contains(type), seen.insert(type).inserted else { return false }
            // signed_certificate_timestamp is implemented by OpenSSL only with CT enabled, which this context is not.
            return type == 18 || SSL_extension_supported(UInt32(type)) == 0
        }
    }

    /// The version range to enable, as OpenSSL version numbers.
    static func versionRange(for offer: ClientOffer) -> ClosedRange<TLSVersion> {
        let known = offer.versions.filter { $0 >= .tls1_0 && $0 <= .tls1_3 }
        if let low = known.min(), let high = known.max() { return low...high }
        if offer.versions.isEmpty, !offer.cipherSuites.isEmpty {
            return .tls1_0...max(.tls1_0, min(offer.legacyVersion, .tls1_2))
        }
        return .tls1_0...(.tls1_3)
    }

    /// Applies `offer` to `ssl` (borrowed, not yet started).
    static func apply(_ offer: ClientOffer, to ssl: OpaquePointer, catalogue: TLSCatalogue) throws(OpenSSLError) {
        var range = versionRange(for: offer)
        if !offer.cipherSuites.isEmpty {
            let usable = offer.cipherSuites.filter { !catalogue.anonymousSuites.contains($0) }
            let tls13 = usable.filter { $0 >> 8 == 0x13 }.compactMap { catalogue.cipherNames[$0] }
            let older = usable.filter { $0 >> 8 != 0x13 }.compactMap { catalogue.cipherNames[$0] }
            if !tls13.isEmpty, SSL_set_ciphersuites(ssl, tls13.joined(separator: ":")) != 1 {
                throw .drainingQueue(call: "SSL_set_ciphersuites")
            }
            if !older.isEmpty, SSL_set_cipher_list(ssl, older.joined(separator: ":")) != 1 {
                throw .drainingQueue(call: "SSL_set_cipher_list")
            }
            // A client with TLS 1.3 suites only: nothing to offer below 1.3.
            if older.isEmpty, !tls13.isEmpty, range.upperBound == .tls1_3 { range = .tls1_3...(.tls1_3) }
        }
        guard c_openssl_SSL_set_min_proto_version(ssl, Int32(range.lowerBound.rawValue)) == 1 else {
            throw .drainingQueue(call: "SSL_set_min_proto_version")
        }
        guard c_openssl_SSL_set_max_proto_version(ssl, Int32(range.upperBound.rawValue)) == 1 else {
            throw .drainingQueue(call: "SSL_set_max_proto_version")
        }
        // OpenSSL refuses a list that names an entry twice; clients send such lists (Safari's signature_algorithms
        // carries rsa_pss_rsae_sha384 twice): each entry once, at its first place. A server reads them as a set.
        let groups = firstOfEach(orderedGroups(offer)).compactMap { catalogue.groupNames[$0] }
        if !groups.isEmpty, c_openssl_SSL_set1_groups_list(ssl, groups.joined(separator: ":")) != 1 {
            throw .drainingQueue(call: "SSL_set1_groups_list")
        }
        let schemes = firstOfEach(offer.signatureAlgorithms).compactMap { catalogue.signatureNames[$0] }
        if !schemes.isEmpty, c_openssl_SSL_set1_sigalgs_list(ssl, schemes.joined(separator: ":")) != 1 {
            throw .drainingQueue(call: "SSL_set1_sigalgs_list")
        }
        let alpn = alpnWire(offer.alpn)
        // SSL_set_alpn_protos returns 0 on success (unlike most of OpenSSL).
        if !alpn.isEmpty, SSL_set_alpn_protos(ssl, alpn, UInt32(alpn.count)) != 0 { throw .drainingQueue(call: "SSL_set_alpn_protos") }
        // SNI carries host names only (RFC 6066 §3).
        if let name = offer.serverName, !name.isEmpty, !Certificate.isIPLiteral(name) {
            guard c_openssl_SSL_set_tlsext_host_name(ssl, name) == 1 else { throw .drainingQueue(call: "SSL_set_tlsext_host_name") }
        }
        if !offer.extensionTypes.isEmpty { try applyExtensionSet(Set(offer.extensionTypes), to: ssl) }
    }

    /// `values` with each value at its first place only.
    static func firstOfEach(_ values: [UInt16]) -> [UInt16] {
        var seen = Set<UInt16>()
        return values.filter { seen.insert($0).inserted }
    }

    /// supported_groups in the client's order, except that the first key-share group OpenSSL can use in TLS 1.3
    /// comes first: OpenSSL 3.0 sends one key share, for the first TLS 1.3 group of the list.
    static func orderedGroups(_ offer: ClientOffer) -> [UInt16] {
        var groups = offer.supportedGroups
        if let share = offer.keyShareGroups.first(where: { TLSCodePoints.tls13Groups.contains($0) }),
           let index = groups.firstIndex(of: share) {
            groups.remove(at: index)
            groups.insert(share, at: 0)
        }
        return groups
    }

    /// Turns off the optional extensions OpenSSL sends by default that the client did not, and on the ones it did.
    private static func applyExtensionSet(_ types: Set<UInt16>, to ssl: OpaquePointer) throws(OpenSSLError) {
        var options: UInt64 = 0
        if !types.contains(22) { options |= c_openssl_SSL_OP_NO_ENCRYPT_THEN_MAC() }
        if !types.contains(23) { options |= c_openssl_SSL_OP_NO_EXTENDED_MASTER_SECRET() }
        if types.contains(21) { options |= c_openssl_SSL_OP_TLSEXT_PADDING() }
        _ = SSL_set_options(ssl, options)
        if types.contains(35) { _ = SSL_clear_options(ssl, UInt64(c_openssl_SSL_OP_NO_TICKET())) }
        if types.contains(5), c_openssl_SSL_set_tlsext_status_type(ssl, TLSEXT_STATUSTYPE_ocsp) != 1 {
            throw .drainingQueue(call: "SSL_set_tlsext_status_type")
        }
        if types.contains(49) { SSL_set_post_handshake_auth(ssl, 1) }
    }

    /// ALPN protocol names in wire form (each with a one-byte length); names empty or over 255 bytes are skipped.
    static func alpnWire(_ names: [String]) -> [UInt8] {
        var wire: [UInt8] = []
        for name in names where (1...255).contains(name.utf8.count) {
            wire.append(UInt8(name.utf8.count))
            wire += Array(name.utf8)
        }
        return wire
    }
}

extension ClientOffer {
    /// An offer that names only SNI, ALPN and the highest version (nil: TLS 1.3); every other part takes
    /// `TLSClient`'s full defaults. A cap lists the versions up to it, so the offer says "at most TLS 1.2".
    public static func minimal(serverName: String?, alpn: [String] = [], maxVersion: TLSVersion? = nil) -> ClientOffer {
        let versions = maxVersion.map { max in [TLSVersion.tls1_3, .tls1_2, .tls1_1, .tls1_0].filter { $0 <= max } } ?? []
        return ClientOffer(serverName: serverName, alpn: alpn, versions: versions)
    }
}
