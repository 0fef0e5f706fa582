/// Tells a head that trickles in (a few bytes per read, for many reads) from one that arrives in a few reads, so the
/// side it comes from can rest between reads (`ConnectionMachine`'s `.rest`): bytes that arrive meanwhile wait in the
/// kernel and the next read takes them all. Parsing a head is linear already (`HeadReader`); what a client that sends
/// its head a byte at a time costs is a wakeup, a `readv` and an event per byte, about 4 µs each: 70 ms of loop CPU
/// for a 16 KB request head, 220 ms for a 64 KB response head (issue 26). Resting between reads makes that a read per
/// rest: 10 ms at first, twice as long for each rest after it while the head still trickles, up to 80 ms (a 16 KB head
/// dripped for 1.6 s is read in some 30 reads, not 160). A head sent in one or a few writes, a line per write even,
/// never rests. Pure.
public struct HeadTrickle: Sendable, Equatable {
    /// A read of fewer new bytes than this that leaves the head incomplete is small.
    public static let smallRead = 512
    /// Small reads in a row before the side rests between reads.
    public static let freeSmallReads = 8

    /// The longest rest, as a multiple of the first.
    public static let maxRestFactor = 8

    /// Small reads since the head began, or since the last large one.
    public private(set) var smallReadsInARow = 0
    /// Rests taken since then.
    public private(set) var rests = 0

    public init() {}

    /// Counts a read of `count` new bytes that left the head incomplete; true when the side should rest before its
    /// next read.
    public mutating func read(_ count: Int) -> Bool {
        guard count > 0 else { return false }
        // A large read starts the count again, unless the side has rested: what piles up in a rest is no sign that
        // the head stopped trickling (the head's end, or its size limit, ends the resting).
        guard count < Self.smallRead || rests > 0 else {
            smallReadsInARow = 0
            return false
        }
        smallReadsInARow += 1
        return smallReadsInARow > Self.freeSmallReads
    }

    /// The next rest: `base` milliseconds doubled for each rest taken since the head began trickling, at most
    /// `maxRestFactor` times `base`; counted.
    public mutating func nextRest(base: Int) -> Int {
        defer { rests += 1 }
        return min(base << min(rests, 30), base * Self.maxRestFactor)
    }
}
