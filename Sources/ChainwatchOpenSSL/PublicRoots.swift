public import ChainwatchCore

/// The public root program set (Mozilla's, as Debian's ca-certificates ships it under
/// `/usr/share/ca-certificates/mozilla`): what tells a public root from one added to this machine's OS trust store.
/// Matched by the SHA-256 of the whole certificate, so a local root that copies a public root's subject or key is
/// still local.
public struct PublicRoots: Sendable {
    /// Where the set was read from, for logs.
    public let source: String
    /// SHA-256 of each certificate of the set.
    public let digests: Set<[UInt8]>

    public init(certificates: [Certificate], source: String) {
        self.source = source
        digests = Set(certificates.map(\.facts.sha256))
    }

    public var count: Int { digests.count }

    public func contains(_ anchor: CertificateFacts) -> Bool { digests.contains(anchor.sha256) }

    /// Debian's copy of the Mozilla set.
    public static let debianDirectory = "/usr/share/ca-certificates/mozilla"
}
