internal import COpenSSL

/// SHA-256 with OpenSSL's EVP interface.
public enum Digest {
    /// SHA-256 of several byte strings, each preceded by its length (so `[a, bc]` and `[ab, c]` differ).
    /// Throws, naming the EVP call, when OpenSSL cannot compute it (allocation failure): never a placeholder value.
    public static func sha256(framed parts: [[UInt8]]) throws(OpenSSLError) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw .drainingQueue(call: "EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestInit_ex(ctx, EVP_sha256(), nil) == 1 else { throw .drainingQueue(call: "EVP_DigestInit_ex") }
        for part in parts {
            var length = UInt32(part.count).bigEndian
            let framed = withUnsafeBytes(of: &length) { EVP_DigestUpdate(ctx, $0.baseAddress, 4) }
            let updated = part.withUnsafeBytes { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
            guard framed == 1, updated == 1 else { throw .drainingQueue(call: "EVP_DigestUpdate") }
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        guard EVP_DigestFinal_ex(ctx, &digest, &size) == 1, size == 32 else { throw .drainingQueue(call: "EVP_DigestFinal_ex") }
        return digest
    }

    /// Plain SHA-256 of `bytes` (what `sha256sum` prints for a file).
    public static func sha256(_ bytes: [UInt8]) throws(OpenSSLError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        let done = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &size, EVP_sha256(), nil) }
        guard done == 1, size == 32 else { throw .drainingQueue(call: "EVP_Digest") }
        return digest
    }

    /// What keys a verdict: the certificates as presented and the OCSP response stapled with them, framed so that
    /// no chain with a staple digests like a chain of other certificates (the count comes first).
    public static func sha256(chain: [[UInt8]], stapled: [UInt8]?) throws(OpenSSLError) -> [UInt8] {
        var count = UInt32(chain.count).bigEndian
        let countBytes = withUnsafeBytes(of: &count) { Array($0) }
        return try sha256(framed: [countBytes] + chain + (stapled.map { [$0] } ?? []))
    }
}
