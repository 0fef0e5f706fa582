internal import COpenSSL

/// One-shot AEAD through OpenSSL's libcrypto: AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305 with a 12-byte nonce and
/// a 16-byte tag, each call a cipher context of its own (thread-safe, nothing kept between calls). The ciphers are
/// fetched once per process: OpenSSL 3.0 would otherwise look each up in its provider store on every call.
///
/// Why not swift-crypto's, which the probe used before: its one-shot API carried each record through Foundation `Data`
/// and generic code; through this a cold first contact's record layer takes 37 646 instructions to open and 17 533 to
/// seal instead of 79 817 and 43 574 (bench/RESULTS.md, 2026-11-27).
public enum AEADCipher: Sendable {
    case aes128GCM, aes256GCM, chaCha20Poly1305

    public static let nonceLength = 12
    public static let tagLength = 16
    /// The most bytes of plaintext, ciphertext or additional data one call takes (OpenSSL counts in `Int32`; a TLS
    /// record is at most 2^14 + 256).
    static let maxInput = 1 << 30

    /// The key length the cipher takes.
    public var keyLength: Int { self == .aes128GCM ? 16 : 32 }

    public enum Failure: Error, Equatable, Sendable {
        /// The tag did not verify (open only).
        case authentication
        /// A key, nonce or ciphertext of the wrong length, or OpenSSL refused a step (the call it refused).
        case refused(String)
    }

    private nonisolated(unsafe) static let aes128 = fetch("AES-128-GCM")
    private nonisolated(unsafe) static let aes256 = fetch("AES-256-GCM")
    private nonisolated(unsafe) static let chaCha = fetch("ChaCha20-Poly1305")

    /// The cipher from OpenSSL's providers; nil when none offers it (a FIPS-only configuration has no ChaCha20), with
    /// nothing left on the thread's error queue.
    private static func fetch(_ name: String) -> OpaquePointer? {
        defer { ERR_clear_error() }
        return EVP_CIPHER_fetch(nil, name, nil)
    }

    /// Whether OpenSSL's providers offer this cipher here.
    public var isAvailable: Bool { fetched != nil }

    private var fetched: OpaquePointer? {
        switch self {
        case .aes128GCM: Self.aes128
        case .aes256GCM: Self.aes256
        case .chaCha20Poly1305: Self.chaCha
        }
    }

    /// `plaintext` sealed under `key` and `nonce`, authenticating `additionalData`: the ciphertext, then the tag.
    public func seal(key: [UInt8], nonce: [UInt8], additionalData: [UInt8], plaintext: [UInt8]) throws(Failure) -> [UInt8] {
        guard plaintext.count <= Self.maxInput, additionalData.count <= Self.maxInput else { throw .refused("an input over 1 GiB") }
        let context = try start(encrypt: true, key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(context); ERR_clear_error() }
        var output = [UInt8](repeating: 0, count: plaintext.count + Self.tagLength)
        let sealed = output.withUnsafeMutableBufferPointer { out -> String? in
            var written: Int32 = 0
            guard Self.update(context, encrypt: true, nil, &written, additionalData) else { return "EVP_EncryptUpdate (AAD)" }
            guard Self.update(context, encrypt: true, out.baseAddress, &written, plaintext),
                  Int(written) == plaintext.count else { return "EVP_EncryptUpdate" }
            var tail: Int32 = 0
            guard EVP_EncryptFinal_ex(context, out.baseAddress! + Int(written), &tail) == 1, tail == 0 else {
                return "EVP_EncryptFinal_ex"
            }
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagLength),
                                      out.baseAddress! + plaintext.count) == 1 else { return "EVP_CTRL_AEAD_GET_TAG" }
            return nil
        }
        if let sealed { throw .refused(sealed) }
        return output
    }

    /// `ciphertext` (the sealed bytes, then the 16-byte tag) opened: the plaintext, or `.authentication` when the tag
    /// does not verify under `key`, `nonce` and `additionalData`.
    public func open(key: [UInt8], nonce: [UInt8], additionalData: [UInt8], ciphertext: [UInt8]) throws(Failure) -> [UInt8] {
        guard ciphertext.count >= Self.tagLength else { throw .refused("a ciphertext shorter than its tag") }
        guard ciphertext.count <= Self.maxInput, additionalData.count <= Self.maxInput else { throw .refused("an input over 1 GiB") }
        let bodyLength = ciphertext.count - Self.tagLength
        let context = try start(encrypt: false, key: key, nonce: nonce)
        defer { EVP_CIPHER_CTX_free(context); ERR_clear_error() }
        // One spare byte: the buffer is never empty, so its address is never nil, even for an empty plaintext.
        var output = [UInt8](repeating: 0, count: bodyLength + 1)
        let opened = output.withUnsafeMutableBufferPointer { out -> Failure? in
            var written: Int32 = 0
            let started = ciphertext.withUnsafeBufferPointer { all -> Failure? in
                // OpenSSL copies the tag; it takes a mutable pointer but does not write through it.
                let tag = UnsafeMutableRawPointer(mutating: all.baseAddress! + bodyLength)
                guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagLength), tag) == 1 else {
                    return .refused("EVP_CTRL_AEAD_SET_TAG")
                }
                guard Self.update(context, encrypt: false, nil, &written, additionalData) else {
                    return .refused("EVP_DecryptUpdate (AAD)")
                }
                guard EVP_DecryptUpdate(context, out.baseAddress, &written, all.baseAddress, Int32(bodyLength)) == 1,
                      Int(written) == bodyLength else { return .refused("EVP_DecryptUpdate") }
                return nil
            }
            if let started { return started }
            var tail: Int32 = 0
            guard EVP_DecryptFinal_ex(context, out.baseAddress! + Int(written), &tail) == 1 else { return .authentication }
            return nil
        }
        if let opened { throw opened }
        output.removeLast()
        return output
    }

    /// A cipher context set up with `key` and `nonce` (the cipher's default 12-byte IV), for the caller to free.
    private func start(encrypt: Bool, key: [UInt8], nonce: [UInt8]) throws(Failure) -> OpaquePointer {
        guard key.count == keyLength else { throw .refused("a \(key.count)-byte key") }
        guard nonce.count == Self.nonceLength else { throw .refused("a \(nonce.count)-byte nonce") }
        guard let cipher = fetched else { throw .refused("EVP_CIPHER_fetch: not offered by OpenSSL's providers") }
        guard let context = EVP_CIPHER_CTX_new() else {
            ERR_clear_error()
            throw .refused("EVP_CIPHER_CTX_new")
        }
        let started = key.withUnsafeBufferPointer { k in
            nonce.withUnsafeBufferPointer { n in
                encrypt ? EVP_EncryptInit_ex2(context, cipher, k.baseAddress, n.baseAddress, nil)
                        : EVP_DecryptInit_ex2(context, cipher, k.baseAddress, n.baseAddress, nil)
            }
        }
        guard started == 1 else {
            EVP_CIPHER_CTX_free(context)
            ERR_clear_error()
            throw .refused(encrypt ? "EVP_EncryptInit_ex2" : "EVP_DecryptInit_ex2")
        }
        return context
    }

    /// One update with `input` (none is a no-op that succeeds): into `out`, or as additional data when `out` is nil.
    private static func update(_ context: OpaquePointer, encrypt: Bool, _ out: UnsafeMutablePointer<UInt8>?,
                               _ written: UnsafeMutablePointer<Int32>, _ input: [UInt8]) -> Bool {
        guard !input.isEmpty else {
            written.pointee = 0
            return true
        }
        return input.withUnsafeBufferPointer { bytes in
            encrypt ? EVP_EncryptUpdate(context, out, written, bytes.baseAddress, Int32(bytes.count)) == 1
                    : EVP_DecryptUpdate(context, out, written, bytes.baseAddress, Int32(bytes.count)) == 1
        }
    }
}
