/// Check 1: the rule's protocol profile — TLS version floor, and under ATS-style profiles signature hashes,
/// key sizes and forward secrecy. Unknown values (nil version, nil forward secrecy, unknown digest) pass.
public struct ProtocolCheck: Check {
    public init() {}
    public var name: String { "protocol" }

    public func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult {
        guard let profile = rule.profile else { return .passes }
        if let floor = profile.minVersion, let got = evidence.protocolVersion, got < floor {
            return .fails(.tlsVersion, level: nil, detail: "negotiated \(got), profile \(profile.name) needs \(floor) or newer")
        }
        let path = evidence.validation.path.isEmpty ? evidence.validation.presented : evidence.validation.path
        if let minBits = profile.minSignatureHashBits {
            // The anchor's own signature is never verified, so it is not judged (SHA-1 self-signed roots are fine).
            let judged = evidence.validation.path.isEmpty ? path : Array(path.dropLast())
            for (depth, cert) in judged.enumerated() {
                if let bits = ProtocolProfile.digestBits(cert.signatureDigest), bits < minBits {
                    return .fails(.weakSignature, level: .of(depth: depth, count: path.count),
                                  detail: "\(cert.subject) is signed with \(cert.signatureAlgorithm); profile \(profile.name) needs \(ProtocolProfile.digestName(bits: minBits)) or stronger")
                }
            }
        }
        for (depth, cert) in path.enumerated() {
            let weak: Bool
            var need = ""
            switch cert.keyType {
            case .rsa: weak = profile.minRSABits.map { cert.keyBits < $0 } ?? false; need = "RSA ≥ \(profile.minRSABits ?? 0)"
            case .ec: weak = profile.minECBits.map { cert.keyBits < $0 } ?? false; need = "EC ≥ \(profile.minECBits ?? 0)"
            case .dsa: weak = profile.minRSABits != nil; need = "RSA or EC keys"
            case .ed25519, .ed448, .other: weak = false
            }
            if weak {
                return .fails(.weakKey, level: .of(depth: depth, count: path.count),
                              detail: "\(cert.subject) has a \(cert.keyBits)-bit \(cert.keyType.rawValue.uppercased()) key; profile \(profile.name) needs \(need)")
            }
        }
        if profile.requireForwardSecrecy, let cipher = evidence.cipher, cipher.forwardSecret == false,
           evidence.protocolVersion.map({ $0 < .tls1_3 }) ?? true {
            return .fails(.noForwardSecrecy, level: nil, detail: "cipher \(cipher.name) has no forward-secret key exchange")
        }
        return .passes
    }
}
