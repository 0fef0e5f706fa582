internal import COpenSSL

/// The TLS 1.3 key exchanges swift-crypto lacks, with OpenSSL's libcrypto as libssl performs them: X448 (RFC 7748;
/// 56-byte shares) and the RFC 7919 finite-field groups ffdhe2048 to ffdhe8192 (shares and secrets big-endian, padded
/// to the prime's length: RFC 8446 §4.2.8.1 and §7.4.1). OpenSSL clients (curl, Python) offer all of them, and a server
/// that accepts only one of them asks the probe to retry with it: without them that probe failed (`probe_failed`) and
/// a `block` rule refused the server to every client it would have served.
///
/// The peer's share is checked as libssl checks it (`EVP_PKEY_derive_set_peer`: for a finite-field group, 1 < y < p − 1
/// and y^q = 1 mod p), and an all-zero X448 secret is refused (RFC 8446 §7.4.2).
public final class KeyAgreement: @unchecked Sendable {   // immutable after init; OpenSSL's key is only read
    public enum Kind: Sendable, Equatable {
        case x448
        /// ffdhe2048, 3072, 4096, 6144 or 8192.
        case ffdhe(bits: Int)

        var name: String {
            switch self {
            case .x448: "X448"
            case .ffdhe(let bits): "ffdhe\(bits)"
            }
        }
    }

    public let kind: Kind
    /// This side's share as TLS sends it.
    public let publicShare: [UInt8]
    private let key: OpaquePointer   // EVP_PKEY *

    /// A fresh key of `kind`.
    public init(_ kind: Kind) throws(OpenSSLError) {
        if case .ffdhe(let bits) = kind, ![2048, 3072, 4096, 6144, 8192].contains(bits) {
            throw OpenSSLError(call: "KeyAgreement", queue: ["no ffdhe group of \(bits) bits"])
        }
        self.kind = kind
        ERR_clear_error()
        let algorithm = kind == .x448 ? "X448" : "DH"
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw .drainingQueue(call: "EVP_PKEY_CTX_new_from_name(\(algorithm))")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw .drainingQueue(call: "EVP_PKEY_keygen_init") }
        if case .ffdhe = kind, EVP_PKEY_CTX_set_group_name(context, kind.name) != 1 {
            throw .drainingQueue(call: "EVP_PKEY_CTX_set_group_name(\(kind.name))")
        }
        var generated: OpaquePointer?
        guard EVP_PKEY_generate(context, &generated) == 1, let generated else { throw .drainingQueue(call: "EVP_PKEY_generate") }
        key = generated
        var encoded: UnsafeMutablePointer<UInt8>?
        let length = EVP_PKEY_get1_encoded_public_key(generated, &encoded)
        guard length > 0, let encoded else {
            EVP_PKEY_free(generated)
            throw .drainingQueue(call: "EVP_PKEY_get1_encoded_public_key")
        }
        publicShare = Array(UnsafeBufferPointer(start: encoded, count: length))
        c_openssl_OPENSSL_free(encoded)
    }

    deinit { EVP_PKEY_free(key) }

    /// The shared secret with the peer's `share` (as TLS sends it). Throws for a share of the wrong length or one
    /// OpenSSL's check refuses, and for an all-zero secret.
    public func sharedSecret(peerShare share: [UInt8]) throws(OpenSSLError) -> [UInt8] {
        ERR_clear_error()
        guard share.count == publicShare.count else {
            throw OpenSSLError(call: "KeyAgreement", queue: ["\(kind.name) share of \(share.count) bytes, not \(publicShare.count)"])
        }
        guard let peer = EVP_PKEY_new() else { throw .drainingQueue(call: "EVP_PKEY_new") }
        defer { EVP_PKEY_free(peer) }
        guard EVP_PKEY_copy_parameters(peer, key) == 1 || kind == .x448 else { throw .drainingQueue(call: "EVP_PKEY_copy_parameters") }
        let peerKey: OpaquePointer
        if kind == .x448 {
            guard let raw = share.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key_ex(nil, "X448", nil, $0.baseAddress, $0.count) }) else {
                throw .drainingQueue(call: "EVP_PKEY_new_raw_public_key_ex(X448)")
            }
            peerKey = raw
        } else {
            guard share.withUnsafeBufferPointer({ EVP_PKEY_set1_encoded_public_key(peer, $0.baseAddress, $0.count) }) == 1 else {
                throw .drainingQueue(call: "EVP_PKEY_set1_encoded_public_key")
            }
            EVP_PKEY_up_ref(peer)
            peerKey = peer
        }
        defer { EVP_PKEY_free(peerKey) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .drainingQueue(call: "EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1 else { throw .drainingQueue(call: "EVP_PKEY_derive_init") }
        if case .ffdhe = kind, EVP_PKEY_CTX_set_dh_pad(context, 1) != 1 { throw .drainingQueue(call: "EVP_PKEY_CTX_set_dh_pad") }
        guard EVP_PKEY_derive_set_peer(context, peerKey) == 1 else { throw .drainingQueue(call: "EVP_PKEY_derive_set_peer") }
        var length = 0
        guard EVP_PKEY_derive(context, nil, &length) == 1, length > 0 else { throw .drainingQueue(call: "EVP_PKEY_derive") }
        var secret = [UInt8](repeating: 0, count: length)
        guard secret.withUnsafeMutableBufferPointer({ EVP_PKEY_derive(context, $0.baseAddress, &length) }) == 1 else {
            throw .drainingQueue(call: "EVP_PKEY_derive")
        }
        secret.removeLast(secret.count - length)
        guard secret.contains(where: { $0 != 0 }) else {
            throw OpenSSLError(call: "KeyAgreement", queue: ["\(kind.name) share gives an all-zero secret"])
        }
        return secret
    }
}
