internal import COpenSSL

/// SHA-256 with OpenSSL's EVP interface.
public enum Digest {
    /// SHA-256 of several byte strings, each preceded by its length (so `[a, bc]` and `[ab, c]` differ).
    public static func sha256(framed parts: [[UInt8]]) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { return [] }
        defer { EVP_MD_CTX_free(ctx) }
        EVP_DigestInit_ex(ctx, EVP_sha256(), nil)
        for part in parts {
            var length = UInt32(part.count).bigEndian
            withUnsafeBytes(of: &length) { _ = EVP_DigestUpdate(ctx, $0.baseAddress, 4) }
            part.withUnsafeBytes { _ = EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        EVP_DigestFinal_ex(ctx, &digest, &size)
        return digest
    }
}
