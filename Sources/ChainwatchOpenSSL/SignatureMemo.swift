internal import COpenSSL
import ChainwatchCore
import ChainwatchLock

/// Signatures already verified: (the certificate's SHA-256, its issuer's SHA-256), for checks that succeeded.
///
/// Why: thousands of leaves share a handful of intermediates. `X509_verify_cert` checks every signature of a path
/// on every validation, so each new leaf paid for its intermediate's signature by the root again (an ECDSA or RSA
/// verification, about a million instructions). With the memo a new leaf costs one signature check, its own.
///
/// Sound because the key is both certificates' exact bytes: a signature's validity depends on the signed
/// certificate's bytes and the issuer's key and nothing else, and SHA-256 (not SHA-1, whose chosen-prefix collisions
/// are practical) makes a look-alike with the same key infeasible. Only successes are kept, so a failure is always
/// checked again; validity dates, purposes and constraints are checked on every validation as before. Bounded: a
/// `GenerationalCache` of `capacity` keys.
public final class SignatureMemo: Sendable {
    public static let shared = SignatureMemo()

    public let capacity: Int
    private struct State {
        var verified: GenerationalCache<ByteKey, Void>
        var hits = 0
        var checks = 0
    }
    private let state: Lock<State>

    public init(capacity: Int = 4096) {
        self.capacity = max(2, capacity)
        state = Lock(State(verified: GenerationalCache(capacity: capacity)))
    }

    /// Signatures found in the memo, and signatures checked with OpenSSL (successful or not).
    public var hitsAndChecks: (hits: Int, checks: Int) { state.withLock { ($0.hits, $0.checks) } }
    /// Verified signatures held.
    public var count: Int { state.withLock { $0.verified.count } }

    /// Whether `subject`'s signature verifies with `issuer`'s public key: from the memo, else checked (`X509_verify`).
    /// Nil when the issuer's key does not decode.
    func verify(_ subject: OpaquePointer, issuer: OpaquePointer) -> Bool? {
        guard let key = Self.key(subject, issuer) else { return Self.check(subject, issuer) }
        return verify(key: key) { Self.check(subject, issuer) }
    }

    /// Whether a presented certificate's signature verifies with `issuer`'s public key: from the memo (keyed by the
    /// SHA-256 of both certificates' bytes, which their facts hold: no digest computed), else checked, an ECDSA
    /// signature with BoringSSL (`CertificateSignatureCheck`, which accepts only what verified) and anything it does
    /// not accept with OpenSSL (`X509_verify`). `subject.der` must be the bytes `subject.raw` was decoded from (a
    /// presented certificate's are), so the fast check reads what OpenSSL would verify. Nil when the issuer's key does
    /// not decode.
    func verify(_ subject: Certificate, issuer: Certificate) -> Bool? {
        verify(key: subject.facts.sha256 + issuer.facts.sha256) {
            CertificateSignatureCheck.verifies(subjectDER: subject.der, issuerDER: issuer.der)
                ? true : Self.check(subject.raw, issuer.raw)
        }
    }

    private func verify(key: [UInt8], check: () -> Bool?) -> Bool? {
        let known = state.withLock { s in
            let found = s.verified.value(for: ByteKey(key)) != nil
            if found { s.hits += 1 } else { s.checks += 1 }
            return found
        }
        if known { return true }
        let verified = check()
        if verified == true { state.withLock { $0.verified.insert((), for: ByteKey(key)) } }
        return verified
    }

    private static func check(_ subject: OpaquePointer, _ issuer: OpaquePointer) -> Bool? {
        guard let publicKey = X509_get0_pubkey(issuer) else { return nil }
        return X509_verify(subject, publicKey) > 0
    }

    /// SHA-256 of the subject's DER, then of the issuer's; nil when OpenSSL cannot digest (then nothing is memoised).
    private static func key(_ subject: OpaquePointer, _ issuer: OpaquePointer) -> [UInt8]? {
        var key = [UInt8](repeating: 0, count: 64)
        let made = key.withUnsafeMutableBufferPointer { buffer -> Bool in
            var length: UInt32 = 0
            guard let base = buffer.baseAddress,
                  X509_digest(subject, EVP_sha256(), base, &length) == 1, length == 32,
                  X509_digest(issuer, EVP_sha256(), base + 32, &length) == 1, length == 32 else { return false }
            return true
        }
        return made ? key : nil
    }
}

/// `X509_verify_cert`'s last step (OpenSSL 3.0's `internal_verify`: each signature of the built path and each
/// certificate's validity dates, from the anchor down to the leaf), with the signatures through a `SignatureMemo`.
/// Set on a context with `X509_STORE_CTX_set_verify`; a `PathSignatures` is the context's ex_data 0 (application
/// data), unretained.
///
/// Errors go through the context's verify callback as OpenSSL's own step sends them (error, depth, current
/// certificate set, then the callback asked whether to go on), so `X509_verify_cert` reports the same codes at the
/// same depths.
let verifyPathWithMemo: @convention(c) (OpaquePointer?) -> Int32 = { context in
    guard let context, let chain = X509_STORE_CTX_get0_chain(context),
          let signaturesPointer = X509_STORE_CTX_get_ex_data(context, 0) else { return 0 }
    let signatures = Unmanaged<PathSignatures>.fromOpaque(signaturesPointer).takeUnretainedValue()
    let callback = X509_STORE_CTX_get_verify_cb(context)
    let parameters = X509_STORE_CTX_get0_param(context)
    let flags = X509_VERIFY_PARAM_get_flags(parameters)

    /// Reports `error` at `depth` for `certificate`; true when the callback lets the validation go on.
    func goOn(_ certificate: OpaquePointer?, depth: Int32, error: Int32) -> Bool {
        X509_STORE_CTX_set_error_depth(context, depth)
        X509_STORE_CTX_set_current_cert(context, certificate)
        X509_STORE_CTX_set_error(context, error)
        return (callback?(0, context) ?? 0) != 0
    }
    /// `ossl_x509_check_cert_time`: the certificate's dates against the context's time (or the clock).
    func datesHold(_ certificate: OpaquePointer, depth: Int32) -> Bool {
        if flags & UInt(X509_V_FLAG_NO_CHECK_TIME) != 0 && flags & UInt(X509_V_FLAG_USE_CHECK_TIME) == 0 { return true }
        var time = X509_VERIFY_PARAM_get_time(parameters)
        let useTime = flags & UInt(X509_V_FLAG_USE_CHECK_TIME) != 0
        let notBefore = useTime ? X509_cmp_time(X509_get0_notBefore(certificate), &time)
                                : X509_cmp_time(X509_get0_notBefore(certificate), nil)
        if notBefore == 0, !goOn(certificate, depth: depth, error: X509_V_ERR_ERROR_IN_CERT_NOT_BEFORE_FIELD) { return false }
        if notBefore > 0, !goOn(certificate, depth: depth, error: X509_V_ERR_CERT_NOT_YET_VALID) { return false }
        let notAfter = useTime ? X509_cmp_time(X509_get0_notAfter(certificate), &time)
                               : X509_cmp_time(X509_get0_notAfter(certificate), nil)
        if notAfter == 0, !goOn(certificate, depth: depth, error: X509_V_ERR_ERROR_IN_CERT_NOT_AFTER_FIELD) { return false }
        if notAfter < 0, !goOn(certificate, depth: depth, error: X509_V_ERR_CERT_HAS_EXPIRED) { return false }
        return true
    }

    var depth = c_openssl_sk_X509_num(chain) - 1
    guard depth >= 0, var issuer = c_openssl_sk_X509_value(chain, depth) else { return 0 }
    var subject: OpaquePointer
    var checkSignature = true
    let selfIssued = X509_STORE_CTX_get_check_issued(context).map { $0(context, issuer, issuer) != 0 } ?? false
    if selfIssued {
        subject = issuer   // the anchor's own signature: only with X509_V_FLAG_CHECK_SS_SIGNATURE
    } else if flags & UInt(X509_V_FLAG_PARTIAL_CHAIN) != 0 {
        subject = issuer
        checkSignature = false   // a trusted certificate that is not self-issued: nothing above it to check with
    } else if depth <= 0 {
        // A lone certificate that is not self-issued: OpenSSL reports it and returns the callback's answer, without
        // checking its dates.
        return goOn(issuer, depth: 0, error: X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE) ? 1 : 0
    } else {
        depth -= 1
        X509_STORE_CTX_set_error_depth(context, depth)
        guard let next = c_openssl_sk_X509_value(chain, depth) else { return 0 }
        subject = next
    }
    while depth >= 0 {
        if checkSignature && (subject != issuer || flags & UInt(X509_V_FLAG_CHECK_SS_SIGNATURE) != 0) {
            switch signatures.verify(subject, issuer: issuer) {
            case nil:   // reported at the issuer's depth, as OpenSSL does
                if !goOn(issuer, depth: subject != issuer ? depth + 1 : depth,
                         error: X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY) { return 0 }
            case false?:
                if !goOn(subject, depth: depth, error: X509_V_ERR_CERT_SIGNATURE_FAILURE) { return 0 }
            case true?:
                break
            }
        }
        checkSignature = true
        if !datesHold(subject, depth: depth) { return 0 }
        X509_STORE_CTX_set_current_cert(context, subject)
        X509_STORE_CTX_set_error_depth(context, depth)
        if (callback?(1, context) ?? 1) == 0 { return 0 }
        depth -= 1
        if depth >= 0 {
            issuer = subject
            guard let next = c_openssl_sk_X509_value(chain, depth) else { return 0 }
            subject = next
        }
    }
    return 1
}

/// What `verifyPathWithMemo` checks signatures with: the memo, and the certificates of one validation by their `X509`
/// address (the presented and extra ones, whose bytes are known), so a presented certificate's signature is keyed
/// and checked from its bytes; any other pair (a store certificate as the subject) through the `X509`s.
final class PathSignatures {
    let memo: SignatureMemo
    private let presented: [UInt: Certificate]
    private let store: TrustStore

    init(memo: SignatureMemo, presented: [Certificate], store: TrustStore) {
        self.memo = memo
        self.store = store
        var byAddress: [UInt: Certificate] = [:]
        for certificate in presented { byAddress[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(certificate.raw)))] = certificate }
        self.presented = byAddress
    }

    func verify(_ subject: OpaquePointer, issuer: OpaquePointer) -> Bool? {
        if let subjectCertificate = presented[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(subject)))],
           let issuerCertificate = presented[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(issuer)))]
                ?? store.certificate(ofStoreCertificate: issuer) {
            return memo.verify(subjectCertificate, issuer: issuerCertificate)
        }
        return memo.verify(subject, issuer: issuer)
    }
}
