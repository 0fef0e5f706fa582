/// FoxIO's JA4 TLS client fingerprint (github.com/FoxIO-LLC/ja4, technical_details/JA4.md), as a probe that mirrors
/// a client must reproduce it and as alerts can report it.
extension ClientHello {
    /// The JA4 fingerprint of this hello sent over TCP, e.g. `t13d1516h2_8daaf6152771_e5627efa2ab1`:
    /// `t`, the version (highest supported_versions, else the legacy version), `d`/`i` (server_name extension
    /// present or not), the cipher and extension counts (each capped at 99), the first and last character of the
    /// first ALPN name (`00` without one; the hex rule for a non-alphanumeric end byte); then the first 12 hex digits
    /// of SHA-256 of the sorted suites, and of the sorted extensions without SNI and ALPN followed by `_` and the
    /// signature algorithms in the client's order (no `_` part without them). An empty list hashes to `000000000000`.
    /// GREASE is left out everywhere (the parser already dropped it).
    public var ja4: String { ja4Input.fingerprint }

    /// What the fingerprint is made of, as a key: a proxy that reports many connections of one client remembers the
    /// fingerprint by it (hashing these few lists costs a fraction of the two SHA-256 a fingerprint takes).
    public var ja4Input: JA4Input {
        JA4Input(maximumVersion: maximumVersion, cipherSuites: cipherSuites, extensionTypes: extensionTypes,
                 firstALPNBytes: firstALPNBytes, signatureAlgorithms: signatureAlgorithms)
    }
}

/// The fields of a ClientHello that its JA4 depends on.
public struct JA4Input: Hashable, Sendable {
    var maximumVersion: TLSVersion
    var cipherSuites: [CipherSuite]
    var extensionTypes: [UInt16]
    var firstALPNBytes: [UInt8]
    var signatureAlgorithms: [UInt16]

    /// See `ClientHello.ja4`.
    public var fingerprint: String {
        let sni = extensionTypes.contains(TLSExtensionType.serverName) ? "d" : "i"
        let prefix = "t" + JA4.versionCode(maximumVersion) + sni + JA4.count(cipherSuites.count)
            + JA4.count(extensionTypes.count) + JA4.alpnCode(firstALPNBytes)

        let suites = cipherSuites.map(\.rawValue).sorted()
        let suiteHash = suites.isEmpty ? JA4.emptyHash : JA4.truncatedHash(JA4.hexList(suites))

        let kept = extensionTypes.filter { $0 != TLSExtensionType.serverName && $0 != TLSExtensionType.alpn }.sorted()
        var extensionText = JA4.hexList(kept)
        if !signatureAlgorithms.isEmpty { extensionText += "_" + JA4.hexList(signatureAlgorithms) }
        let extensionHash = kept.isEmpty ? JA4.emptyHash : JA4.truncatedHash(extensionText)
        return prefix + "_" + suiteHash + "_" + extensionHash
    }
}

/// The pieces of a JA4 fingerprint.
enum JA4 {
    /// A hash part of an empty list: 12 zeros rather than the hash of nothing.
    static let emptyHash = "000000000000"
    /// Hash parts keep this many hex digits of the SHA-256.
    static let hashDigits = 12
    /// Counts are two digits: larger ones are written as this.
    static let maximumCount = 99

    static func versionCode(_ version: TLSVersion) -> String {
        switch version.rawValue {
        case 0x0304: "13"
        case 0x0303: "12"
        case 0x0302: "11"
        case 0x0301: "10"
        case 0x0300: "s3"
        case 0x0002: "s2"
        case 0xFEFF: "d1"
        case 0xFEFD: "d2"
        case 0xFEFC: "d3"
        default: "00"
        }
    }

    static func count(_ value: Int) -> String {
        let capped = min(value, maximumCount)
        return capped < 10 ? "0\(capped)" : "\(capped)"
    }

    /// First and last byte of the first ALPN name when both are ASCII alphanumerics, else the first and last hex
    /// digit of the name's bytes; `00` for no name.
    static func alpnCode(_ name: [UInt8]) -> String {
        guard let first = name.first, let last = name.last else { return "00" }
        if isAlphanumeric(first), isAlphanumeric(last) {
            return String(decoding: [first, last], as: UTF8.self)
        }
        let digits = HashText.hex(name, uppercase: false)
        return String(digits.prefix(1) + digits.suffix(1))
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    /// `002f,0035,1301`: lowercase 4-digit hex, comma-separated.
    static func hexList(_ values: [UInt16]) -> String {
        let digits: StaticString = "0123456789abcdef"
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 5)
        for (i, value) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            for shift in [12, 8, 4, 0] as [UInt16] { out.append(digits.utf8Start[Int(value >> shift & 0xF)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func truncatedHash(_ text: String) -> String {
        String(HashText.hex(SHA256.hash(Array(text.utf8)), uppercase: false).prefix(hashDigits))
    }
}
