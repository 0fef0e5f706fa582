/// Which chainwatch wrote a line (`observer.*` in ECS): a fleet's lines stay apart in one index.
public struct Observer: Sendable, Hashable {
    /// The product's release.
    public static let version = "0.5.0"
    /// The ECS release whose field reference the lines follow (`Tests/ecs/fields.csv` is its generated list).
    public static let ecsVersion = "9.4.0"

    /// The machine's host name.
    public var hostname: String
    /// The admin listener `chainwatch ctl` must be told (`--admin ADDR`) to reach this process: nil for the address
    /// it tries by default (or none). The clear command of a known-bad mark names it.
    public var admin: String?

    public init(hostname: String, admin: String? = nil) { self.hostname = hostname; self.admin = admin }
}

extension JSONWriter {
    /// `ecs.version` and `observer.*`: what every line of the alert and access logs says about who wrote it.
    mutating func observedBy(_ observer: Observer) {
        object("ecs") { $0.field("version", Observer.ecsVersion) }
        object("observer") { o in
            o.field("hostname", observer.hostname)
            o.field("product", "chainwatch")
            o.field("vendor", "chainwatch")
            o.field("version", Observer.version)
            o.field("type", "proxy")
        }
    }
}
