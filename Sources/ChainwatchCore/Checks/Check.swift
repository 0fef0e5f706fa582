/// One check of the evidence for a connection against a rule. Pure: same inputs, same result.
public protocol Check: Sendable {
    /// Short stable name, for explanations and logs (`protocol`, `path`, `hostname`, …).
    var name: String { get }
    func evaluate(_ evidence: Evidence, rule: Rule, at now: UnixTime) -> CheckResult
}

/// The outcome of one check. A failure is a value ("evaluated: no"), not an error.
public enum CheckResult: Equatable, Sendable {
    case passes
    case fails(Reason, level: ChainLevel?, detail: String)
}

/// What chainwatch observed about one connection, as plain values.
/// `Evidence`'s chain facts as alert-line bytes (`AlertRecord.render`).
public struct RenderedEvidence: Sendable, Hashable {
    /// `tls.server`'s member, as `JSONWriter.members` renders it (empty without a leaf).
    public var server: [UInt8]
    /// `chainwatch.chain`'s member.
    public var chain: [UInt8]

    public init(server: [UInt8], chain: [UInt8]) { self.server = server; self.chain = chain }
}

/// Holds `Evidence.rendered`. Derived from the evidence's other fields, so it takes no part in equality or hashing:
/// evidence with and without it rendered is the same evidence.
public struct EvidenceRendering: Sendable, Hashable {
    public var value: RenderedEvidence?
    public init() {}
    public static func == (_: EvidenceRendering, _: EvidenceRendering) -> Bool { true }
    public func hash(into hasher: inout Hasher) {}
}

public struct Evidence: Sendable, Hashable {
    /// The connection the chain was judged for (its handshake facts as far as known then).
    public var connection: ConnectionFacts
    public var validation: PathValidation
    public var source: EvidenceSource
    /// The server's stapled OCSP response, checked; nil when it stapled none (or the client did not ask for one).
    public var stapled: StapledStatus?
    /// The alert line's members that depend on the chain alone, rendered once when a verdict with a finding is
    /// cached (`AlertRecord.render`): a line for a cached verdict then renders no certificate fact again.
    public var rendered: RenderedEvidence? {
        get { rendering.value }
        set { rendering.value = newValue }
    }
    public var rendering = EvidenceRendering()

    public init(connection: ConnectionFacts, validation: PathValidation, source: EvidenceSource, stapled: StapledStatus? = nil) {
        self.connection = connection; self.validation = validation; self.source = source; self.stapled = stapled
    }

    public init(connectHost: String, serverName: String?, port: UInt16, protocolVersion: TLSVersion?,
                cipher: NegotiatedCipher?, validation: PathValidation, source: EvidenceSource) {
        self.init(connection: ConnectionFacts(connectHost: connectHost, port: port, serverName: serverName,
                                              protocolVersion: protocolVersion, cipher: cipher),
                  validation: validation, source: source)
    }

    /// The host from the CONNECT request (or the absolute-form URL).
    public var connectHost: String { connection.connectHost }
    /// The ClientHello's server_name, when there was one.
    public var serverName: String? { connection.serverName }
    public var port: UInt16 { connection.port }
    /// The negotiated version; nil when unknown (the protocol floor then passes).
    public var protocolVersion: TLSVersion? {
        get { connection.protocolVersion }
        set { connection.protocolVersion = newValue }
    }
    /// The negotiated cipher suite; nil when unknown.
    public var cipher: NegotiatedCipher? {
        get { connection.cipher }
        set { connection.cipher = newValue }
    }

    /// The name checked against the leaf and used to pick the rule: the SNI, else the CONNECT host.
    public var hostChecked: String { connection.hostChecked }

    /// The leaf: first of the validated path, else first presented.
    public var leaf: CertificateFacts? { validation.path.first ?? validation.presented.first }
}

extension ChainLevel {
    /// The level of position `depth` (0 = leaf) in a path of `count` certificates: the last is the root.
    public static func of(depth: Int, count: Int) -> ChainLevel {
        if depth == 0 { return .leaf }
        return depth >= count - 1 ? .root : .intermediate
    }
}
