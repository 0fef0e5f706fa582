import ChainwatchCore
import Foundation

/// Judges a CA certificate named as a trust anchor. The loader calls it for every anchor certificate.
///
/// The built-in one reads basicConstraints from the DER itself (enough for "is this a CA?"); the proxy may pass
/// one backed by ChainwatchOpenSSL (`Certificate(der:)` + `.facts.isCA`) to also catch DER that OpenSSL refuses.
public struct AnchorInspector: Sendable {
    /// What the inspector concluded about one certificate.
    public enum Conclusion: Sendable, Hashable {
        case ca
        case notCA
        /// Not a certificate OpenSSL (or the DER reader) can use; the text says why.
        case unusable(String)
    }

    public var inspect: @Sendable (_ der: [UInt8]) -> Conclusion
    public init(inspect: @escaping @Sendable (_ der: [UInt8]) -> Conclusion) { self.inspect = inspect }

    /// Reads the certificate's basicConstraints extension with a minimal DER walker.
    public static let builtIn = AnchorInspector { der in
        switch DERCertificate.basicConstraintsCA(der) {
        case .some(true): return .ca
        case .some(false): return .notCA
        case .none: return .unusable("not a DER X.509 certificate")
        }
    }
}

/// PEM armor: `-----BEGIN CERTIFICATE-----` blocks to DER.
enum PEM {
    enum Failure: Error, Equatable { case noCertificate, badBase64(block: Int), unterminated(block: Int) }

    /// Every CERTIFICATE block in `text`, decoded; other block types are ignored.
    static func certificates(in text: String) -> Result<[[UInt8]], Failure> {
        var out: [[UInt8]] = []
        var current: String? = nil
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line == "-----BEGIN CERTIFICATE-----" || line == "-----BEGIN TRUSTED CERTIFICATE-----" {
                if current != nil { return .failure(.unterminated(block: out.count + 1)) }
                current = ""
            } else if line == "-----END CERTIFICATE-----" || line == "-----END TRUSTED CERTIFICATE-----" {
                guard let body = current, let data = Data(base64Encoded: body), !data.isEmpty else {
                    return .failure(.badBase64(block: out.count + 1))
                }
                out.append([UInt8](data))
                current = nil
            } else if current != nil {
                current! += line
            }
        }
        if current != nil { return .failure(.unterminated(block: out.count + 1)) }
        return out.isEmpty ? .failure(.noCertificate) : .success(out)
    }
}

/// Just enough DER to find basicConstraints in an X.509 certificate.
enum DERCertificate {
    struct Element { var tag: UInt8; var content: ArraySlice<UInt8>; var end: Int }

    static func element(_ bytes: ArraySlice<UInt8>, at start: Int) -> Element? {
        var i = start
        guard i < bytes.endIndex else { return nil }
        let tag = bytes[i]; i += 1
        guard i < bytes.endIndex else { return nil }
        var length = Int(bytes[i]); i += 1
        if length & 0x80 != 0 {
            let n = length & 0x7F
            guard n >= 1, n <= 4, i + n <= bytes.endIndex else { return nil }
            length = 0
            for _ in 0..<n { length = length << 8 | Int(bytes[i]); i += 1 }
        }
        guard length >= 0, i + length <= bytes.endIndex else { return nil }
        return Element(tag: tag, content: bytes[i..<(i + length)], end: i + length)
    }

    static func children(_ content: ArraySlice<UInt8>) -> [Element]? {
        var out: [Element] = []
        var i = content.startIndex
        while i < content.endIndex {
            guard let e = element(content, at: i) else { return nil }
            out.append(e); i = e.end
        }
        return out
    }

    static let basicConstraintsOID: [UInt8] = [0x55, 0x1D, 0x13]   // 2.5.29.19

    /// true/false: the cA flag; nil: not a parseable certificate.
    static func basicConstraintsCA(_ der: [UInt8]) -> Bool? {
        guard let cert = element(der[...], at: 0), cert.tag == 0x30, cert.end == der.count,
              let parts = children(cert.content), parts.count == 3, parts[0].tag == 0x30,
              let tbs = children(parts[0].content), tbs.count >= 6 else { return nil }
        guard let extensions = tbs.first(where: { $0.tag == 0xA3 }) else { return false }   // v1: no extensions, not a CA
        guard let seq = children(extensions.content).flatMap({ $0.first }), seq.tag == 0x30,
              let exts = children(seq.content) else { return nil }
        for ext in exts {
            guard let fields = children(ext.content), let oid = fields.first, oid.tag == 0x06 else { return nil }
            guard Array(oid.content) == basicConstraintsOID, let value = fields.last, value.tag == 0x04 else { continue }
            guard let bc = element(value.content, at: value.content.startIndex), bc.tag == 0x30,
                  let bcFields = children(bc.content) else { return nil }
            if let flag = bcFields.first, flag.tag == 0x01 { return flag.content.first.map { $0 != 0 } ?? false }
            return false
        }
        return false
    }
}
