import ChainwatchOpenSSL
import Testing

/// `KeyAgreement`: X448 and RFC 7919's finite-field groups, as libssl performs them (the probe's answer to a server
/// that accepts nothing else).
@Suite struct KeyAgreementTests {
    static let kinds: [KeyAgreement.Kind] = [.x448, .ffdhe(bits: 2048), .ffdhe(bits: 3072)]

    @Test(arguments: kinds)
    func twoSidesAgreeOnPaddedSharesAndSecrets(_ kind: KeyAgreement.Kind) throws {
        let client = try KeyAgreement(kind), server = try KeyAgreement(kind)
        let length = switch kind {
        case .x448: 56
        case .ffdhe(let bits): bits / 8
        }
        // Shares and secrets are the prime's length (RFC 8446 §4.2.8.1, §7.4.1), leading zero bytes kept.
        #expect(client.publicShare.count == length && server.publicShare.count == length)
        let secret = try client.sharedSecret(peerShare: server.publicShare)
        #expect(secret.count == length)
        #expect(secret == (try server.sharedSecret(peerShare: client.publicShare)))
        #expect(secret != (try client.sharedSecret(peerShare: try KeyAgreement(kind).publicShare)))
    }

    @Test(arguments: kinds)
    func sharesOpenSSLWouldRefuseAreRefused(_ kind: KeyAgreement.Kind) throws {
        let own = try KeyAgreement(kind)
        let length = own.publicShare.count
        #expect(throws: OpenSSLError.self) { try own.sharedSecret(peerShare: Array(own.publicShare.dropLast())) }
        #expect(throws: OpenSSLError.self) { try own.sharedSecret(peerShare: own.publicShare + [0]) }
        // 0 and 1 (a finite-field share outside 1 < y < p − 1; an X448 point that gives an all-zero secret).
        #expect(throws: OpenSSLError.self) { try own.sharedSecret(peerShare: [UInt8](repeating: 0, count: length)) }
        #expect(throws: OpenSSLError.self) {
            try own.sharedSecret(peerShare: kind == .x448 ? [1] + [UInt8](repeating: 0, count: length - 1)
                                                          : [UInt8](repeating: 0, count: length - 1) + [1])
        }
        if case .ffdhe = kind {
            // The prime itself and p − 1 (all-ones is above p: RFC 7919's primes start and end with 64 one bits).
            #expect(throws: OpenSSLError.self) { try own.sharedSecret(peerShare: [UInt8](repeating: 0xFF, count: length)) }
        }
    }

    @Test func onlyRFC7919sGroupsAreMade() {
        #expect(throws: OpenSSLError.self) { try KeyAgreement(.ffdhe(bits: 1024)) }
    }
}
