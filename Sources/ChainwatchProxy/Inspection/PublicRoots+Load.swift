import ChainwatchOpenSSL
import Foundation

extension PublicRoots {
    /// Reads the public root set from a directory (every `.crt` and `.pem` file under it, as Debian's
    /// `/usr/share/ca-certificates/mozilla`) or from one PEM bundle file.
    public static func load(path: String) throws(PublicRootsError) -> PublicRoots {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw PublicRootsError("\(path): no such file or directory")
        }
        var files: [String] = []
        if isDirectory.boolValue {
            guard let walk = FileManager.default.enumerator(atPath: path) else { throw PublicRootsError("\(path): cannot be read") }
            for case let name as String in walk where name.hasSuffix(".crt") || name.hasSuffix(".pem") {
                files.append((path as NSString).appendingPathComponent(name))
            }
        } else {
            files = [path]
        }
        var certificates: [Certificate] = []
        for file in files.sorted() {
            guard let pem = FileManager.default.contents(atPath: file) else { throw PublicRootsError("\(file): cannot be read") }
            do { certificates += try Certificate.parsePEM(Array(pem)) } catch {
                throw PublicRootsError("\(file): \(error)")
            }
        }
        guard !certificates.isEmpty else { throw PublicRootsError("\(path): no certificate found") }
        return PublicRoots(certificates: certificates, source: path)
    }
}

public struct PublicRootsError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
