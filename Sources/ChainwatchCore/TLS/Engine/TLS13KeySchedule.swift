/// The TLS 1.3 key schedule of RFC 8446 §7.1 for a full handshake without a PSK: HKDF over the suite's hash, the
/// handshake and application traffic secrets, Finished verify_data and the traffic keys. Pure: the hash and HMAC come
/// from a `TLSCrypto`. Holds one secret between the steps: the handshake secret, once the ServerHello is in.
public struct TLS13KeySchedule: Sendable {
    /// The hash of the suite (and of every HKDF step).
    public let hash: TLSHashAlgorithm

    private let crypto: any TLSCrypto
    private let suite: UInt16
    /// Set by `handshakeTrafficSecrets`; the master secret derives from it.
    private var handshakeSecret: [UInt8]?

    /// A schedule for the TLS 1.3 cipher suite `suite` (its hash from `TLSHashAlgorithm(suite:)`).
    public init(crypto: any TLSCrypto, suite: UInt16) {
        self.crypto = crypto
        self.suite = suite
        self.hash = TLSHashAlgorithm(suite: suite)
    }

    /// HKDF-Extract (RFC 5869 §2.2): HMAC(salt, ikm).
    public func hkdfExtract(salt: [UInt8], ikm: [UInt8]) -> [UInt8] {
        crypto.hmac(hash, key: salt, data: ikm)
    }

    /// HKDF-Expand-Label (RFC 8446 §7.1): HKDF-Expand over the HkdfLabel of `length`, "tls13 " + `label`, `context`.
    /// The label (with its prefix) and the context are at most 255 bytes, `length` at most 255 hash lengths.
    public func hkdfExpandLabel(secret: [UInt8], label: String, context: [UInt8], length: Int) -> [UInt8] {
        let fullLabel = Array("tls13 \(label)".utf8)
        precondition(fullLabel.count <= 255 && context.count <= 255, "HKDF-Expand-Label: label or context over 255 bytes")
        var info: [UInt8] = [UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        info.append(UInt8(truncatingIfNeeded: fullLabel.count))
        info += fullLabel
        info.append(UInt8(truncatingIfNeeded: context.count))
        info += context
        return hkdfExpand(prk: secret, info: info, length: length)
    }

    /// Derive-Secret (RFC 8446 §7.1): HKDF-Expand-Label(secret, label, transcriptHash, Hash.length).
    public func deriveSecret(_ secret: [UInt8], label: String, transcriptHash: [UInt8]) -> [UInt8] {
        hkdfExpandLabel(secret: secret, label: label, context: transcriptHash, length: hash.length)
    }

    /// After the ServerHello: `transcriptHash` is the hash of ClientHello..ServerHello, `sharedSecret` the (EC)DHE
    /// one. Derives and keeps the handshake secret; returns the client and server handshake traffic secrets.
    public mutating func handshakeTrafficSecrets(sharedSecret: [UInt8], transcriptHash: [UInt8]) -> (client: [UInt8], server: [UInt8]) {
        let zeros = [UInt8](repeating: 0, count: hash.length)
        let earlySecret = hkdfExtract(salt: zeros, ikm: zeros)
        let secret = hkdfExtract(salt: deriveSecret(earlySecret, label: "derived", transcriptHash: emptyHash), ikm: sharedSecret)
        handshakeSecret = secret
        return (deriveSecret(secret, label: "c hs traffic", transcriptHash: transcriptHash),
                deriveSecret(secret, label: "s hs traffic", transcriptHash: transcriptHash))
    }

    /// After the server Finished: `transcriptHash` is the hash of ClientHello..server Finished. Returns the client and
    /// server application traffic secrets. Forgets the handshake secret: calling it before `handshakeTrafficSecrets`,
    /// or twice, is a programming error.
    public mutating func applicationTrafficSecrets(transcriptHash: [UInt8]) -> (client: [UInt8], server: [UInt8]) {
        guard let handshakeSecret else {
            preconditionFailure("TLS13KeySchedule: applicationTrafficSecrets before handshakeTrafficSecrets")
        }
        let zeros = [UInt8](repeating: 0, count: hash.length)
        let masterSecret = hkdfExtract(salt: deriveSecret(handshakeSecret, label: "derived", transcriptHash: emptyHash), ikm: zeros)
        self.handshakeSecret = nil
        return (deriveSecret(masterSecret, label: "c ap traffic", transcriptHash: transcriptHash),
                deriveSecret(masterSecret, label: "s ap traffic", transcriptHash: transcriptHash))
    }

    /// Finished verify_data (RFC 8446 §4.4.4): HMAC(finished_key, transcriptHash), where finished_key is
    /// HKDF-Expand-Label(baseKey, "finished", "", Hash.length) and `baseKey` the sender's handshake traffic secret.
    public func finishedVerifyData(baseKey: [UInt8], transcriptHash: [UInt8]) -> [UInt8] {
        let finishedKey = hkdfExpandLabel(secret: baseKey, label: "finished", context: [], length: hash.length)
        return crypto.hmac(hash, key: finishedKey, data: transcriptHash)
    }

    /// The record key and IV of a traffic secret (RFC 8446 §7.3): a 16-byte key for 0x1301, 0x1304 and 0x1305, a
    /// 32-byte one for 0x1302 and 0x1303; a 12-byte IV.
    public func trafficKeys(secret: [UInt8]) -> (key: [UInt8], iv: [UInt8]) {
        let keyLength = suite == 0x1302 || suite == 0x1303 ? 32 : 16
        return (hkdfExpandLabel(secret: secret, label: "key", context: [], length: keyLength),
                hkdfExpandLabel(secret: secret, label: "iv", context: [], length: 12))
    }

    /// The hash of no bytes: the context of the "derived" steps.
    private var emptyHash: [UInt8] { crypto.transcriptHash(hash).current() }

    /// HKDF-Expand (RFC 5869 §2.3): T(i) = HMAC(prk, T(i-1) ‖ info ‖ i), concatenated and cut to `length`.
    private func hkdfExpand(prk: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length <= 255 * hash.length, "HKDF-Expand: length over 255 blocks")
        var output: [UInt8] = []
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            block = crypto.hmac(hash, key: prk, data: block + info + [counter])
            output += block
            counter &+= 1
        }
        return Array(output.prefix(length))
    }
}
