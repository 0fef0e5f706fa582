import Dispatch
import Glibc

/// Undoes what a command added outside itself (a firewall table, a child process) when it is interrupted by SIGINT
/// or SIGTERM, then dies of that signal as it would have (the shell sees 130 or 143). Without it an interrupted
/// `selftest --transparent` or `chainwatch-bench --via transparent` left its nftables table in the ruleset, with its
/// redirect rules pointing at a listener that was gone. `cancel` when the command has undone it itself.
public final class SignalCleanup: @unchecked Sendable {   // `sources` is touched by init and cancel only
    private static let signals = [SIGINT, SIGTERM]
    private var sources: [DispatchSourceSignal] = []

    /// `cleanup` runs once, on a dispatch queue, at the first of the signals.
    public init(_ cleanup: @escaping @Sendable () -> Void) {
        for number in Self.signals {
            signal(number, SIG_IGN)   // delivered to the source, not acted on by the default disposition
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                cleanup()
                signal(number, SIG_DFL)
                kill(getpid(), number)
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The command undid it itself: the signals have their default dispositions again.
    public func cancel() {
        for source in sources { source.cancel() }
        sources = []
        for number in Self.signals { signal(number, SIG_DFL) }
    }
}
