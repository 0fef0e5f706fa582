/// What a TLS client offers in its ClientHello, as chainwatch's probe repeats it: the parts a server chooses by
/// (versions, suites, groups, signature algorithms, ALPN, SNI) and the extension set a fingerprint (JA4) reads.
/// Pure values, GREASE left out of every list. Equal offers share one probe and one cached result.
public struct ClientOffer: Hashable, Sendable, CustomStringConvertible {
    /// The SNI host name as sent; nil when the client sent none (an IP literal client).
    public var serverName: String?
    /// ALPN protocol names, in the client's order; empty when the client sent no ALPN extension.
    public var alpn: [String]
    /// The supported_versions list in the client's order; empty when the extension is absent (TLS 1.2 and older:
    /// `legacyVersion` is then the highest version offered).
    public var versions: [TLSVersion]
    /// The hello's own version field.
    public var legacyVersion: TLSVersion
    /// Every offered cipher suite code point, TLS 1.3 and older suites together, in the client's order.
    public var cipherSuites: [UInt16]
    /// supported_groups, in order.
    public var supportedGroups: [UInt16]
    /// The groups the client sent a key share for, in order (a subset of `supportedGroups`).
    public var keyShareGroups: [UInt16]
    /// signature_algorithms, in order.
    public var signatureAlgorithms: [UInt16]
    /// The extension types, sorted: the probe cannot repeat their order (OpenSSL sends its own), and clients such as
    /// Chrome shuffle it on every connection, which would otherwise give every tunnel an offer, and a probe, of its own.
    public var extensionTypes: [UInt16]
    /// The client's hello with its per-connection parts blanked (`ClientHelloShape`): two clients share a probe only
    /// when their hellos have the same shape, every extension body included. nil for an offer not made from a hello.
    public var shape: ClientHelloShape?
    /// The client's own hello, which the probe mirrors (`HelloMirror`); nil for an offer not made from a hello (`pin`,
    /// `selftest`), which OpenSSL's client sends as far as it can. Not part of equality: any hello of that shape serves.
    public var template: HelloTemplate?

    public init(serverName: String?, alpn: [String] = [], versions: [TLSVersion] = [], legacyVersion: TLSVersion = .tls1_2,
                cipherSuites: [UInt16] = [], supportedGroups: [UInt16] = [], keyShareGroups: [UInt16] = [],
                signatureAlgorithms: [UInt16] = [], extensionTypes: [UInt16] = []) {
        self.serverName = serverName; self.alpn = alpn; self.versions = versions; self.legacyVersion = legacyVersion
        self.cipherSuites = cipherSuites; self.supportedGroups = supportedGroups; self.keyShareGroups = keyShareGroups
        self.signatureAlgorithms = signatureAlgorithms; self.extensionTypes = extensionTypes.sorted()
    }

    /// Whether the hello offered a session to resume (pre_shared_key).
    public var offersPSK: Bool { extensionTypes.contains(TLSExtensionType.preSharedKey) }

    /// The newest version offered: the highest of `versions`, else the legacy version.
    public var maximumVersion: TLSVersion { versions.max() ?? legacyVersion }

    /// Offers made from hellos are equal when their shapes are and both or neither offered a PSK: every other field
    /// is a reading of the hello's parts that the shape keeps (GREASE left out of the fields, blanked alike in the
    /// shape), but for the extensions the shape drops as a fresh connection would (pre_shared_key, early_data,
    /// padding). A resumed hello stays an offer of its own: the probe mirrors the first hello of its offer, and one
    /// mirrored from a resumed hello lacks the padding the stack adds to the fresh one (BoringSSL pads fresh hellos of
    /// 256 to 511 bytes; the resumed one is longer and has none), which would let an interceptor tell that probe from
    /// the client's fresh connections. Comparing the lists one by one as well cost about 4 000 instructions a
    /// comparison, twice per probe-cache lookup. An offer with a shape never equals one without.
    /// The version of the record that carried the hello counts too: the probe frames its hello in a record of that
    /// version (`ProbeClient`), so offers that differed only there would share a probe that carried one client's
    /// version to every other (0x0303 where curl and Chrome send 0x0301: a mark an interceptor could spare).
    public static func == (lhs: Self, rhs: Self) -> Bool {
        if let left = lhs.shape, let right = rhs.shape {
            return left == right && lhs.offersPSK == rhs.offersPSK
                && lhs.template?.recordVersion == rhs.template?.recordVersion
        }
        guard lhs.shape == nil, rhs.shape == nil else { return false }
        return lhs.serverName == rhs.serverName && lhs.alpn == rhs.alpn && lhs.versions == rhs.versions
            && lhs.legacyVersion == rhs.legacyVersion && lhs.cipherSuites == rhs.cipherSuites
            && lhs.supportedGroups == rhs.supportedGroups && lhs.keyShareGroups == rhs.keyShareGroups
            && lhs.signatureAlgorithms == rhs.signatureAlgorithms && lhs.extensionTypes == rhs.extensionTypes
            && lhs.template == rhs.template
    }

    /// An offer made from a hello hashes as its shape (one 64-bit digest: the probe cache and the spot-check schedule
    /// look an offer up several times per TLS 1.3 tunnel, and hashing each list element by element cost about 15 000
    /// instructions a lookup).
    public func hash(into hasher: inout Hasher) {
        if let shape { return hasher.combine(shape) }
        hasher.combine(serverName); hasher.combine(alpn); hasher.combine(versions); hasher.combine(legacyVersion)
        hasher.combine(cipherSuites); hasher.combine(supportedGroups); hasher.combine(keyShareGroups)
        hasher.combine(signatureAlgorithms); hasher.combine(extensionTypes); hasher.combine(template)
    }

    /// `sni=example.com alpn=h2,http/1.1 max=TLSv1.3 suites=17 groups=4 shares=1`, for logs.
    public var description: String {
        var text = "sni=\(serverName ?? "-")"
        if !alpn.isEmpty { text += " alpn=\(alpn.joined(separator: ","))" }
        text += " max=\(maximumVersion) suites=\(cipherSuites.count) groups=\(supportedGroups.count) shares=\(keyShareGroups.count)"
        return text
    }
}

extension ClientOffer {
    /// The offer a client made in `hello`: every list as the client sent it, in order (extension types sorted), GREASE
    /// left out.
    public init(mirroring hello: ClientHello) {
        self.init(serverName: hello.serverName, alpn: hello.alpnProtocols, versions: hello.supportedVersions,
                  legacyVersion: hello.legacyVersion, cipherSuites: hello.cipherSuites.map(\.rawValue),
                  supportedGroups: hello.supportedGroups, keyShareGroups: hello.keyShareGroups,
                  signatureAlgorithms: hello.signatureAlgorithms, extensionTypes: hello.extensionTypes)
        guard !hello.message.isEmpty, let shape = try? ClientHelloShape(hello.message) else { return }
        self.shape = shape
        template = HelloTemplate(message: hello.message, recordVersion: hello.recordVersion)
    }
}

/// The hello a probe mirrors: a client's ClientHello message and the version of the record that carried it. Every
/// template compares equal (and hashes alike): offers are told apart by their shape and record version, and any hello
/// of one shape makes the same probe (`ClientHelloShape` keeps what the mirror copies).
public struct HelloTemplate: Hashable, Sendable {
    public let message: [UInt8]
    public let recordVersion: UInt16

    public init(message: [UInt8], recordVersion: UInt16) { self.message = message; self.recordVersion = recordVersion }

    public static func == (lhs: Self, rhs: Self) -> Bool { true }
    public func hash(into hasher: inout Hasher) {}
}
