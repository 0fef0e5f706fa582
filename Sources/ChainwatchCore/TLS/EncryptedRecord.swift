/// The header of one record a `TLSObserver` saw after the stream turned encrypted: what a TLS 1.3 tunnel still shows
/// of the server's encrypted flight (EncryptedExtensions, Certificate, CertificateVerify, Finished, tickets, data).
public struct EncryptedRecord: Equatable, Sendable {
    /// The record's content type as sent (23 application_data for every TLS 1.3 record; 22 or 21 in TLS 1.2).
    public var contentType: UInt8
    /// The payload length from the record header (the header's 5 bytes not included).
    public var length: Int

    public init(contentType: UInt8, length: Int) {
        self.contentType = contentType
        self.length = length
    }
}

/// Where a `TLSObserver`'s walk over encrypted record headers stands.
public enum EncryptedRecordTracking: Equatable, Sendable {
    /// Not asked for (`TLSObserver(tracksEncryptedRecords: false)`).
    case off
    /// Asked for; the stream is not encrypted yet (or never was: the observer failed first).
    case waiting
    /// Walking record headers.
    case tracking
    /// A record beyond `TLSObserver.maxTrackedEncryptedRecords` arrived: the list holds the first ones, and the
    /// walk stopped.
    case full
    /// A record header that can never be valid TLS (content type outside 20...23, version not 3.x, a length past
    /// the ciphertext limit, a ChangeCipherSpec not of one byte): the walk stopped; the list holds the records before.
    case invalidHeader
}
