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
