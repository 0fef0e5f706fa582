internal import COpenSSL
public import ChainwatchCore

/// Reads an OCSP response a server stapled, for its leaf: decoded, signed by the leaf's issuer (or a responder the
/// issuer authorized, `OCSP_basic_verify` against the rule's trust store), for this leaf, and current.
public enum OCSPStaple {
    /// - Parameters:
    ///   - response: the OCSPResponse DER the server stapled.
    ///   - leaf: the server's certificate; `issuer`: its issuer on the validated path.
    ///   - untrusted: certificates that may hold the responder's (the presented chain).
    ///   - store: the rule's trust store (the responder's own chain is validated against it).
    public static func status(of response: [UInt8], leaf: Certificate, issuer: Certificate, untrusted: [Certificate],
                              store: TrustStore) -> StapledStatus {
        defer { ERR_clear_error() }
        let decoded: OpaquePointer? = response.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_OCSP_RESPONSE(nil, &cursor, buffer.count)
        }
        guard let ocsp = decoded else { return .invalid("the stapled response does not decode") }
        defer { OCSP_RESPONSE_free(ocsp) }
        let responderStatus = OCSP_response_status(ocsp)
        guard responderStatus == OCSP_RESPONSE_STATUS_SUCCESSFUL else {
            return .invalid("the responder answered status \(responderStatus), not successful")
        }
        guard let basic = OCSP_response_get1_basic(ocsp) else { return .invalid("no basic response") }
        defer { OCSP_BASICRESP_free(basic) }
        guard let certs = c_openssl_sk_X509_new_null() else { return .invalid("out of memory") }
        defer { c_openssl_sk_X509_free(certs) }   // borrows: `untrusted` and `issuer` outlive it
        for certificate in untrusted + [issuer] { _ = c_openssl_sk_X509_push(certs, certificate.raw) }
        guard OCSP_basic_verify(basic, certs, store.raw, 0) == 1 else {
            return .invalid("not signed by the leaf's issuer or a responder it authorized: \(OpenSSLError.drainingQueue(call: "OCSP_basic_verify"))")
        }
        guard let id = OCSP_cert_to_id(nil, leaf.raw, issuer.raw) else { return .invalid("cannot name the leaf (OCSP_cert_to_id)") }
        defer { OCSP_CERTID_free(id) }
        var status: Int32 = -1, reason: Int32 = -1
        var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil, nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        guard OCSP_resp_find_status(basic, id, &status, &reason, &revokedAt, &thisUpdate, &nextUpdate) == 1 else {
            return .invalid("the response is not about the leaf")
        }
        // Five minutes of clock skew, as `openssl ocsp` allows; no age limit beyond nextUpdate.
        guard OCSP_check_validity(thisUpdate, nextUpdate, 300, -1) == 1 else {
            return .invalid("the response is not current (thisUpdate/nextUpdate)")
        }
        switch status {
        case V_OCSP_CERTSTATUS_GOOD: return .good
        case V_OCSP_CERTSTATUS_REVOKED:
            let why = reason >= 0 ? String(cString: OCSP_crl_reason_str(Int(reason))) : "no reason given"
            return .revoked(detail: "\(why), serial \(leaf.facts.serialHex)")
        default: return .unknown
        }
    }
}
