/// Watches both directions of one tunnel's handshake and says what evidence the verdict needs.
/// Pure: feed each direction's bytes in order (any chunking); it never assumes one message per read.
///
/// - TLS ≤ 1.2 with a Certificate message: `.chain(ders)`, the passive evidence.
/// - TLS 1.3 (the certificate is encrypted) or a resumed session (no Certificate at all): `.probe(offer)`, with the
///   client's SNI, ALPN and, when the client offered nothing newer, TLS 1.2 as the maximum.
/// - Bytes that are not TLS, in either direction: `.notTLS(detail)`.
public struct HandshakeWatch: Sendable {
    /// What the watcher needs next.
    public enum Need: Equatable, Sendable {
        /// Nothing decided yet: keep feeding bytes.
        case moreBytes
        /// The server's certificates as sent (DER, leaf first), read from the tunnel.
        case chain([[UInt8]])
        /// The chain is not visible in the tunnel: probe the same upstream with these parameters.
        case probe(ClientOffer)
        /// The tunnel does not carry TLS: what was seen.
        case notTLS(String)
        /// The server's stream began as TLS but its handshake cannot be parsed (lying lengths, records out of
        /// place): the chain cannot be judged, which must count as a chain failure, not as "not TLS".
        case malformedHandshake(String)
        /// A server handshake message (the Certificate, in practice) announces more than this watch reads
        /// (`serverMessageLimit`): its own reason, `oversized_handshake`.
        case oversizedHandshake(String)
    }

    private var clientObserver = TLSObserver()
    @usableFromInline private(set) var serverObserver: TLSObserver
    /// After a TLS 1.3 ServerHello the server's record headers are still walked (constant memory): the size of its
    /// encrypted flight, for `FlightAgreement`.
    @usableFromInline private(set) var watchesServerFlight = false
    public private(set) var clientHello: ClientHello? {
        didSet { sawClientHello = clientHello != nil }
    }
    public private(set) var serverHello: ServerHello?
    /// How many of the server's first bytes may reach the client before the verdict: a HelloRetryRequest's.
    public private(set) var passableServerBytes = 0
    /// Whether the server's first message was a TLS 1.3 HelloRetryRequest that may pass (alone in its records): its
    /// client sends a second hello.
    public private(set) var sawHelloRetry = false
    /// Facts the server direction has produced, and how many of them were alerts.
    private var serverFacts = 0
    private var serverAlerts = 0
    private var clientAlerts = 0
    /// The most alerts a server's handshake may carry (and a client may send before its hello).
    public static let maxServerAlerts = 16
    /// The OCSP response a TLS ≤ 1.2 server stapled (its CertificateStatus), read before `.chain` is returned; nil
    /// when it stapled none (or none readable).
    public private(set) var stapledOCSP: [UInt8]?
    /// A Certificate seen while a CertificateStatus is still due (the ServerHello echoed status_request): the chain
    /// is returned with the staple, or without it at the end of the server's flight. Same flight: no wait.
    private var chainAwaitingStatus: [[UInt8]]?
    /// Set once a need other than `.moreBytes` was returned; later bytes are ignored.
    public private(set) var decided: Need?
    /// Whether the server's bytes decided it (`server`), not the client's.
    public private(set) var decidedByServer = false

    /// - Parameter serverMessageLimit: the largest server handshake message body read (`oversizedHandshake` past
    ///   it). Up to `TLSObserver.maxProtocolMessageLength`; a caller that reads past the default bounds the memory
    ///   itself, from `announcedServerMessageLength`, before the message's bytes arrive.
    public init(serverMessageLimit: Int = TLSObserver.maxServerHandshakeMessageLength) {
        self.serverMessageLimit = min(serverMessageLimit, TLSObserver.maxProtocolMessageLength)
        serverObserver = TLSObserver(tracksEncryptedRecords: true, messageLimit: self.serverMessageLimit)
    }

    private let serverMessageLimit: Int

    /// The tunnel's upstream connection was replaced before any of its server's bytes reached the client (a probe
    /// needed a server that serves one connection at a time to itself): what that server sent is forgotten, and the
    /// new connection's server is read from its first byte. The client's hello stays.
    public mutating func restartServer() {
        if decidedByServer {
            decided = nil
            decidedByServer = false
        }
        serverObserver = TLSObserver(tracksEncryptedRecords: true, messageLimit: serverMessageLimit)
        watchesServerFlight = false
        serverHello = nil
        passableServerBytes = 0
        sawHelloRetry = false
        serverFacts = 0
        serverAlerts = 0
        stapledOCSP = nil
        chainAwaitingStatus = nil
    }

    /// The body length the server's handshake message being read announces (nil when none is pending, or once
    /// decided): what the watch will hold when it is whole.
    public var announcedServerMessageLength: Int? { decided == nil ? serverObserver.announcedMessageLength : nil }

    /// Lets go of the bytes both directions buffered (a Certificate message can be megabytes), for a caller done
    /// with the watch: feed it nothing more. What it has read (hellos, staple, decision) stays.
    public mutating func release() {
        clientObserver = TLSObserver()
        serverObserver = TLSObserver()
        chainAwaitingStatus = nil
    }

    /// Whether the client's hello has been seen (the rule by SNI can be picked). Stored, not computed: the executor
    /// asks on every read, and a computed property of a struct held in a class is called on a copy of the whole watch.
    public private(set) var sawClientHello = false
    /// How many of the client's bytes the records carrying its ClientHello took (0 before it is whole): what the
    /// client sent after it starts there.
    public private(set) var clientHelloEnd = 0

    /// Whether the server decided before the client's hello was whole (it spoke first): the hello is still read, for
    /// its server name (which may pick the rule: the caller waits for it, `sawClientHello`, or `clientSentNoHello`),
    /// and what the server decided stays the answer.
    private var decidedBeforeTheHello: Bool { decidedByServer && clientHello == nil }
    /// The client's bytes can no longer begin with a ClientHello (not TLS, data, or only alerts).
    public private(set) var clientSentNoHello = false

    /// Feeds client → server bytes.
    public mutating func client(_ bytes: some Collection<UInt8>) -> Need {
        if let decided, !decidedBeforeTheHello || clientSentNoHello { return decided }
        guard clientHello == nil else { return .moreBytes }
        clientObserver.append(bytes)
        while true {
            let fact: HandshakeFact?
            do { fact = try clientObserver.next() } catch { return noHello(.notTLS("client: \(error)")) }
            guard let fact else { return decided ?? .moreBytes }
            if case .clientHello(var hello) = fact {
                hello.recordVersion = clientObserver.firstRecordVersion ?? hello.recordVersion
                clientHello = hello
                clientHelloEnd = clientObserver.consumedByteCount
                guard decided != nil else { return .moreBytes }
                clientObserver = TLSObserver()
                // A TLS 1.3 ServerHello before the hello was decided with no offer to mirror: the probe repeats this one.
                if case .probe = decided { decided = probeNeed() }
                return decided!
            }
            if case .encrypted = fact { return noHello(.notTLS("client: encrypted data before a ClientHello")) }
            if case .alert = fact {
                clientAlerts += 1
                if clientAlerts > Self.maxServerAlerts { return noHello(.notTLS("client: alert records and no ClientHello")) }
            }
        }
    }

    /// No ClientHello will come: `need`, unless the server decided already.
    private mutating func noHello(_ need: Need) -> Need {
        clientSentNoHello = true
        guard let decided else { return decide(need) }
        clientObserver = TLSObserver()
        return decided
    }

    /// The encrypted records the server sent after its TLS 1.3 ServerHello, as far as seen (at most
    /// `TLSObserver.maxTrackedEncryptedRecords`), and how their walk stands. Empty for TLS 1.2.
    /// Inlinable for the reason `sawClientHello` is stored.
    @inlinable public var serverFlight: [EncryptedRecord] { watchesServerFlight ? serverObserver.encryptedRecords : [] }
    @inlinable public var serverFlightTracking: EncryptedRecordTracking { watchesServerFlight ? serverObserver.encryptedRecordTracking : .off }

    /// Feeds server → client bytes.
    public mutating func server(_ bytes: some Collection<UInt8>) -> Need {
        if let decided {
            if watchesServerFlight { serverObserver.append(bytes) }
            return decided
        }
        serverObserver.append(bytes)
        while true {
            let fact: HandshakeFact?
            do { fact = try serverObserver.next() } catch {
                switch error {
                case .notTLS: return decideByServer(.notTLS("server: \(error)"))
                case .messageTooLong(let type, let length, let limit):
                    return decideByServer(.oversizedHandshake("the server's handshake message (type \(type)) announces \(length) bytes, over the \(limit) chainwatch reads"))
                default: return decideByServer(.malformedHandshake("server: \(error)"))
                }
            }
            guard let fact else { return .moreBytes }
            serverFacts += 1
            switch fact {
            case .serverHello(let hello):
                if hello.isHelloRetryRequest && hello.version >= .tls1_3 {
                    // It carries no certificate, and its client cannot go on without it: held, it deadlocks the
                    // handshake. It may pass when it is all the server sent so far: its first message, alone in its
                    // record(s), and only once, so a forger cannot slip anything else through with it.
                    if serverFacts == 1, !serverObserver.hasPendingHandshakeBytes {
                        passableServerBytes = serverObserver.consumedByteCount
                        sawHelloRetry = true
                    }
                    continue
                }
                serverHello = hello
                if hello.version >= .tls1_3 {
                    _ = try? serverObserver.next()   // `.encrypted`: the record walk starts with the bytes after the hello
                    watchesServerFlight = true
                    return decideByServer(probeNeed())
                }
            case .certificate(let ders):
                if serverHello?.extensionTypes.contains(TLSExtensionType.statusRequest) == true {
                    chainAwaitingStatus = ders
                    continue
                }
                return decideByServer(.chain(ders))
            case .certificateStatus(let response):
                guard let ders = chainAwaitingStatus else { continue }
                stapledOCSP = response.isEmpty ? nil : response
                return decideByServer(.chain(ders))
            case .encrypted, .serverHelloDone:
                if let ders = chainAwaitingStatus { return decideByServer(.chain(ders)) }   // promised, not sent
                // A resumed TLS ≤ 1.2 session switches to encryption with no Certificate; so does anything
                // else that skipped it (an anonymous suite): the chain must come from a probe.
                guard serverHello != nil else { return decideByServer(.notTLS("server: no ServerHello before encryption")) }
                return decideByServer(probeNeed())
            case .clientHello:
                return decideByServer(.notTLS("server: sent a ClientHello"))
            case .alert:
                // A TLS peer sends an alert or two (a warning, then the fatal one that ends the connection); a stream
                // of them is no handshake, and read for as long as a server sends them it would hold a loop.
                serverAlerts += 1
                if serverAlerts > Self.maxServerAlerts {
                    return decideByServer(.malformedHandshake("server: more than \(Self.maxServerAlerts) alert records"))
                }
                // A server that refuses the handshake (protocol_version, handshake_failure) says so before any
                // ServerHello: the alert carries no certificate, and held, it leaves the client waiting. It passes
                // when nothing but a passable HelloRetryRequest came before it.
                if serverHello == nil, serverFacts == 1 || passableServerBytes > 0, !serverObserver.hasPendingHandshakeBytes {
                    passableServerBytes = serverObserver.consumedByteCount
                }
                continue
            }
        }
    }

    /// The server will show nothing more (its stream ended, the tunnel closed, or the verdict deadline passed): a
    /// chain read and waiting for the CertificateStatus its ServerHello promised is all it showed, and is returned
    /// without a staple, as at the end of its flight. Nil when no such chain waits (nothing else is decided by an end).
    public mutating func nothingMoreFromTheServer() -> Need? {
        guard decided == nil, let ders = chainAwaitingStatus else { return nil }
        return decideByServer(.chain(ders))
    }

    /// The probe repeats the client's whole offer, so an interceptor cannot tell it from the client by its
    /// fingerprint, and a server picks the same certificate for both. No ClientHello (cannot happen in a tunnel, whose
    /// server never speaks first): an empty offer, which the probe fills with its defaults.
    private func probeNeed() -> Need {
        .probe(clientHello.map(ClientOffer.init(mirroring:)) ?? ClientOffer(serverName: nil))
    }

    private mutating func decideByServer(_ need: Need) -> Need {
        decidedByServer = true
        return decide(need)
    }

    private mutating func decide(_ need: Need) -> Need {
        decided = need
        if !decidedBeforeTheHello { clientObserver = TLSObserver() }
        if !watchesServerFlight { serverObserver = TLSObserver() }
        return need
    }
}
