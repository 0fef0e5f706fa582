/// What an accept loop does when `accept` fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
/// the queued connection stays readable, so retrying at once spins the loop, and a warning per attempt floods the
/// log (2.9 million lines in 10 s, issue 26). It pauses accepting, 100 ms after the first failure and twice as long
/// after each further one up to 1.6 s, and says so twice per burst: a line when accepting first fails, and one with
/// the count of failed attempts when an accept succeeds again, which ends the burst. Pure: time is a parameter.
public struct AcceptBackoff: Sendable, Equatable {
    public static let firstPauseMilliseconds = 100
    public static let longestPauseMilliseconds = 1_600

    /// Failed attempts in the burst going on (0: none).
    public private(set) var failuresInBurst = 0

    public init() {}

    /// An accept failed with `reason` (the system's words): how long to pause, and the line to log (nil within a
    /// burst, which has had its line).
    public mutating func failed(_ reason: String) -> (pauseMilliseconds: Int, log: String?) {
        failuresInBurst += 1
        let pause = min(Self.longestPauseMilliseconds, Self.firstPauseMilliseconds << min(failuresInBurst - 1, 5))
        guard failuresInBurst == 1 else { return (pause, nil) }
        return (pause, "cannot accept: \(reason); not accepting for \(pause) ms, longer while it lasts (one line per burst)")
    }

    /// An accept succeeded: a burst, if any, is over, and the line that says so (nil when there was none).
    public mutating func accepted() -> String? {
        guard failuresInBurst > 0 else { return nil }
        defer { failuresInBurst = 0 }
        return "accepting again, after \(failuresInBurst) failed attempt(s)"
    }
}
