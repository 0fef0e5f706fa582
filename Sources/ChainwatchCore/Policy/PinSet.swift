/// The pins of one level of the validated path: any certificate at that level matching any member passes.
public struct LevelPins: Sendable, Hashable {
    /// SHA-256 of a certificate's DER.
    public var certificates: [Fingerprint]
    /// SHA-256 of a certificate's SubjectPublicKeyInfo (survives re-issuance with the same key).
    public var spki: [Fingerprint]

    public init(certificates: [Fingerprint] = [], spki: [Fingerprint] = []) {
        self.certificates = certificates; self.spki = spki
    }

    /// Number of hash pins in the set; a set of one has no backup.
    public var count: Int { certificates.count + spki.count }
    public var isEmpty: Bool { count == 0 }

    /// Whether `facts` matches a certificate or SPKI pin.
    public func matches(_ facts: CertificateFacts) -> Bool {
        certificates.contains { $0.bytes == facts.sha256 } || spki.contains { $0.bytes == facts.spkiSHA256 }
    }
}

/// A name condition on the leaf: an exact subject DN, or a pattern over its CN and DNS subjectAltNames.
public enum SubjectPattern: Sendable, Hashable, CustomStringConvertible {
    /// The whole subject DN in RFC 2253 form (`CN=api.example.com,O=Example`); compared ignoring case and spaces after commas.
    case distinguishedName(String)
    /// A host name or `*.` pattern (one label) matched against the leaf's CN and DNS SANs, ignoring case.
    case name(String)

    public var description: String {
        switch self {
        case .distinguishedName(let dn): return "subject \(dn)"
        case .name(let n): return "name \(n)"
        }
    }

    public func matches(_ leaf: CertificateFacts) -> Bool {
        switch self {
        case .distinguishedName(let dn):
            return Self.canonicalDN(dn) == Self.canonicalDN(leaf.subject)
        case .name(let pattern):
            let p = HostName.normalize(pattern)
            var names = leaf.dnsNames.map { HostName.normalize($0) }
            if let cn = Self.commonName(of: leaf.subject) { names.append(HostName.normalize(cn)) }
            return names.contains { $0 == p || Self.glob(p, matches: $0) }
        }
    }

    /// `*.example.com` matches `a.example.com` (one label) — including a SAN that is itself `*.example.com` (equal text).
    static func glob(_ pattern: String, matches name: String) -> Bool {
        guard pattern.hasPrefix("*.") else { return false }
        let parent = pattern.dropFirst(2)
        guard name.hasSuffix("." + parent) else { return false }
        let first = name.dropLast(parent.utf8.count + 1)
        return !first.isEmpty && !first.contains(".")
    }

    static func canonicalDN(_ dn: String) -> String {
        HostName.normalize(dn.split(separator: ",").map { rdn in
            rdn.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces }.joined(separator: "=")
        }.joined(separator: ","))
    }

    static func commonName(of dn: String) -> String? {
        for rdn in dn.split(separator: ",") {
            let kv = rdn.split(separator: "=", maxSplits: 1)
            if kv.count == 2, HostName.normalize(kv[0].trimmingSpaces) == "cn" { return String(kv[1].trimmingSpaces) }
        }
        return nil
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}

/// A rule's pins, per level of the validated path, with an optional expiry after which they are reported, not enforced.
public struct PinSet: Sendable, Hashable {
    /// Pins for the path's anchor (its last certificate).
    public var root: LevelPins?
    /// Pins for the certificates between anchor and leaf; any one of them matching passes.
    public var intermediate: LevelPins?
    /// Hash pins for the leaf.
    public var leaf: LevelPins?
    /// Name conditions on the leaf; any one matching passes.
    public var leafSubjects: [SubjectPattern]
    /// From this instant on, the set is no longer enforced and `pin_expired` is reported instead.
    public var expires: UnixTime?

    public init(root: LevelPins? = nil, intermediate: LevelPins? = nil, leaf: LevelPins? = nil,
                leafSubjects: [SubjectPattern] = [], expires: UnixTime? = nil) {
        self.root = root; self.intermediate = intermediate; self.leaf = leaf
        self.leafSubjects = leafSubjects; self.expires = expires
    }

    /// Whether the set has no pin at all (a policy error: it would pin nothing).
    public var isEmpty: Bool {
        (root?.isEmpty ?? true) && (intermediate?.isEmpty ?? true) && (leaf?.isEmpty ?? true) && leafSubjects.isEmpty
    }

    public func isExpired(at now: UnixTime) -> Bool { expires.map { now >= $0 } ?? false }
}
