/// A SHA-256 value used as a pin: 32 bytes, of a certificate's DER or of its SubjectPublicKeyInfo.
public struct Fingerprint: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Takes exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// Why a fingerprint text was refused.
    public enum ParseError: Error, Sendable, Hashable {
        /// Decoded fine but is not 32 bytes (a SHA-1 fingerprint has 20).
        case wrongLength(bytes: Int)
        /// `sha256/` followed by something that is not base64.
        case badBase64
        /// Not hex, or colons in the wrong places.
        case badHex
        /// Neither `sha256/BASE64` nor hex.
        case unknownForm
    }

    /// Parses `sha256/BASE64=` (HPKP form) or 64 hex digits, optionally colon-separated in pairs (`AB:CD:…`).
    public init(parsing text: String) throws(ParseError) {
        let t = Substring(text)
        if t.hasPrefix("sha256/") {
            guard let decoded = Base64Text.decode(t.dropFirst(7)) else { throw .badBase64 }
            guard decoded.count == 32 else { throw .wrongLength(bytes: decoded.count) }
            self.bytes = decoded
            return
        }
        if t.contains("/") || t.hasSuffix("=") { throw .unknownForm }
        let digits: [UInt8]
        if t.contains(":") {
            let parts = t.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.allSatisfy({ $0.utf8.count == 2 }) else { throw .badHex }
            digits = parts.flatMap { Array($0.utf8) }
        } else {
            digits = Array(t.utf8)
        }
        guard digits.count % 2 == 0, digits.allSatisfy({ Self.nibble($0) != nil }) else {
            if digits.allSatisfy({ Self.nibble($0) != nil }) { throw .wrongLength(bytes: digits.count / 2) }
            throw digits.count == 44 || digits.count == 43 ? .unknownForm : .badHex
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            out.append(Self.nibble(digits[i])! << 4 | Self.nibble(digits[i + 1])!)
            i += 2
        }
        guard out.count == 32 else { throw .wrongLength(bytes: out.count) }
        self.bytes = out
    }

    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }

    /// `sha256/BASE64=`, the form the pin writer emits.
    public var pinText: String { "sha256/" + Base64Text.encode(bytes) }

    /// Uppercase hex with colons, as `openssl x509 -fingerprint -sha256` prints it.
    public var colonHex: String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for (i, b) in bytes.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ":")) }
            out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { pinText }
}

/// Standard base64 (RFC 4648 §4) with padding, for `sha256/` pins. Internal to the core.
enum Base64Text {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x3) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0xF) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded or unpadded base64; nil on any other character or a malformed tail.
    static func decode(_ text: Substring) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for c in text.utf8 {
            if c == UInt8(ascii: "=") { padding += 1; continue }
            guard padding == 0, let v = value(c) else { return nil }
            values.append(v)
        }
        guard padding <= 2, values.count % 4 != 1 else { return nil }
        if padding > 0, (values.count + padding) % 4 != 0 { return nil }
        var out: [UInt8] = []
        var i = 0
        while i + 1 < values.count {
            out.append(values[i] << 2 | values[i + 1] >> 4)
            if i + 2 < values.count { out.append(values[i + 1] << 4 | values[i + 2] >> 2) }
            if i + 3 < values.count { out.append(values[i + 2] << 6 | values[i + 3]) }
            i += 4
        }
        return out
    }

    static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 65...90: return c - 65
        case 97...122: return c - 71
        case 48...57: return c + 4
        case 43: return 62
        case 47: return 63
        default: return nil
        }
    }
}
