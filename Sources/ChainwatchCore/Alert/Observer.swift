/// Which chainwatch wrote a line (`observer.*` in ECS): a fleet's lines stay apart in one index.
public struct Observer: Sendable, Hashable {
    /// The product's release.
    public static let version = "0.5.0"
    /// The ECS release whose field reference the lines follow (`Tests/ecs/fields.csv` is its generated list).
    public static let ecsVersion = "9.4.0"

    /// The machine's host name.
    public var hostname: String

    public init(hostname: String) { self.hostname = hostname }
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
