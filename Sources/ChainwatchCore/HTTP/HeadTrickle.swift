/// Tells a head that trickles in (a few bytes per read, for many reads) from one that arrives in a few reads, so the
/// side it comes from can rest between reads (`ConnectionMachine`'s `.rest`): bytes that arrive meanwhile wait in the
/// kernel and the next read takes them all. Parsing a head is linear already (`HeadReader`); what a client that sends
/// its head a byte at a time costs is a wakeup, a `readv` and an event per byte, about 4 µs each: 70 ms of loop CPU
/// for a 16 KB request head, 220 ms for a 64 KB response head (issue 26). Resting 10 ms between reads makes that a
/// read per 10 ms of dripping. A head sent in one or a few writes, a line per write even, never rests. Pure.
public struct HeadTrickle: Sendable, Equatable {
    /// A read of fewer new bytes than this that leaves the head incomplete is small.
    public static let smallRead = 512
    /// Small reads in a row before the side rests between reads.
    public static let freeSmallReads = 8

    /// Small reads since the head began, or since the last large one.
    public private(set) var smallReadsInARow = 0

    public init() {}

    /// Counts a read of `count` new bytes that left the head incomplete; true when the side should rest before its
    /// next read.
    public mutating func read(_ count: Int) -> Bool {
        guard count > 0 else { return false }
        guard count < Self.smallRead else {
            smallReadsInARow = 0
            return false
        }
        smallReadsInARow += 1
        return smallReadsInARow > Self.freeSmallReads
    }
}
