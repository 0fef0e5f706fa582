/// What the executor reports to a `ConnectionMachine`, and what the machine tells it to do.
extension ConnectionMachine {
    public enum Event: Sendable, Equatable {
        /// The client is accepted; its first bytes may already be buffered.
        case started
        /// The answer to `.vet`: nil lets the request proceed.
        case vetted(ProxyRequest.Refusal?)
        case resolved(addressCount: Int)
        case resolveFailed(String)
        /// Every resolved address is one the destination policy refuses (the reason, for the 403).
        case destinationRefused(String)
        case connected
        case connectFailed(ConnectFailure)
        /// `side`'s input now holds `buffered` bytes.
        case readable(Side, buffered: Int)
        /// The inspection has seen the bytes of the last `.feedInspection` for `side` (and reported what they changed).
        case inspected(Side)
        /// `side`'s output holds `queued` bytes (after a write, a relay, or a drain).
        case queued(Side, Int)
        /// `side`'s output fell to its low watermark; it holds `queued` bytes.
        case drained(Side, queued: Int)
        case endOfStream(Side)
        /// A socket error (reset, refused write), in the system's words.
        case failed(Side, String)
        /// Inspection: `side`'s bytes stay in the proxy except those before stream offset `passingUpTo` (counted from
        /// the side's first byte): a HelloRetryRequest carries no certificate and its client needs it to go on.
        case hold(Side, passingUpTo: Int)
        /// Inspection: up to `bytes` of `side` may be held while the verdict is pending, instead of
        /// `ConnectionLimits.holdLimit` (a Certificate message larger than that, which the inspection has room for).
        case holdUpTo(Side, bytes: Int)
        /// Inspection: `side`'s bytes need not be held any longer (an alert rule, once the ClientHello picked it).
        case flowing(Side)
        /// Inspection: the verdict.
        case decided(InspectionDecision)
        /// The answer to a `.takeHeldRoom` that the process's budget for held bytes (`HeldBytesBudget`) could not give:
        /// the tunnel closes before what it holds passes.
        case noHeldRoom
        /// Inspection, before any server byte has reached the client: close the upstream connection and keep the
        /// client's bytes (those that went up already are kept as `replayCopy`), so that the probe and the tunnel's
        /// connection are opened together, and a server that takes one connection at a time answers the probe.
        /// `.reconnect` opens the tunnel's upstream again.
        case redial
        /// Inspection: connect to the same upstream address again after `.redial`, then pass the client's bytes.
        case reconnect
        /// Inspection, before any client byte has gone up: keep a copy of the client's bytes as they go
        /// (`replayCopy`), so that a `.redial` may still come after they went (a probe beside the tunnel under a rule
        /// that holds: a server that serves one connection at a time may take the tunnel's first).
        case keepReplayCopy
        /// A splice pump reading `from` ended.
        case spliceEnded(from: Side, SpliceEnd)
        /// The rest asked for by `.rest` is over: `side` may be read again.
        case rested(Side)
        /// The timer fired; nothing was read or written for `idleMilliseconds`.
        case timerFired(idleMilliseconds: Int64)
        /// The answer to `.peek`: the bytes of `side`'s input it asked for (copied: request and response heads,
        /// plain-HTTP bodies; never the tunnel's bytes).
        case peeked(Side, [UInt8])
    }

    public enum LogLevel: Sendable, Hashable { case info, warning }

    public enum Action: Sendable, Equatable {
        /// Asks for a copy of at most `max` bytes of `side`'s input from offset `from` on (answered by `.peeked`). A
        /// head is read from past the bytes already read, so each byte is copied once.
        case peek(Side, from: Int, max: Int)
        /// Drops the first `count` bytes of `side`'s input.
        case consume(Side, Int)
        /// Asks whether this request may go on (a known-bad upstream, a plain-HTTP rule); answered by `.vetted`.
        indirect case vet(ProxyRequest, requestLine: String)
        case resolve(Authority)
        /// Connects to the resolved address at `addressIndex`, with the connect timeout.
        case connect(addressIndex: Int)
        /// Closes the upstream socket (a failed attempt, a finished exchange); a later `.connect` makes a new one.
        case dropUpstream
        /// A plain-HTTP exchange is complete (its response fully relayed): the access log's line for it.
        case exchangeEnded
        /// Sends bytes of the proxy's own to `side`.
        case write(Side, [UInt8])
        /// Refuses with a status: log it and count it (the `write` of the answer follows).
        case refused(status: Int, reason: String)
        /// The tunnel is established: start inspecting its handshake (the inspection answers with `.hold`/`.decided`).
        case startInspection
        /// The tunnel holds more bytes for its verdict: take `bytes` more room from the process's budget for held bytes
        /// (`HeldBytesBudget`); when there is none, answer `.noHeldRoom`.
        case takeHeldRoom(Int)
        /// The verdict is in and nothing is held: give back all the room taken.
        case returnHeldRoom
        /// Gives the inspection `side`'s buffered input from byte `from` on; answered by `.inspected(side)`.
        case feedInspection(Side, from: Int)
        /// Tells the inspection that a side's stream ended, every byte of it fed (a handshake the client had not begun,
        /// or the rest of a server's, will not come); what that decides comes back as events.
        case endedForInspection(Side)
        /// Moves the first `count` bytes of `from`'s input to the other side's output (zero-copy); `eager` sends them
        /// at once when nothing is queued before them.
        case relay(from: Side, count: Int, eager: Bool)
        /// Before the `.relay` of the client's next `count` bytes: keep a copy of them (`ConnectionMachine.replayCopy`).
        case copyForReplay(Int)
        /// Forget the copy: it will not be replayed.
        case dropReplayCopy
        /// Send the kept copy (`count` bytes) to the upstream connection just made again, before anything else; answered
        /// by `.queued(.upstream, …)`.
        case replay(Int)
        case setReading(Side, Bool)
        /// `.drained` is reported when `side`'s output falls to `bytes`.
        case setLowWatermark(Side, Int)
        /// Hands the direction read from `from` to a splice pump (answered by `.spliceEnded`).
        case splice(from: Side)
        /// Half-close: no more bytes will be sent to `side`.
        case shutdownWrite(Side)
        /// Discards `side`'s buffered input.
        case discardInput(Side)
        case schedule(milliseconds: Int)
        case cancelTimer
        /// `side`'s head trickles in (it is no longer read, a `.setReading` came first): report `.rested(side)` after
        /// `milliseconds`, on a timer of its own (the connection's timer keeps its deadline).
        case rest(Side, milliseconds: Int)
        case log(LogLevel, String)
        /// An event that does not apply in the machine's phase (a resolver answering after a refusal, a verdict after
        /// the close, a redial once bytes have passed): nothing is done. Named, so tests see every such transition.
        case ignored(String)
        /// Closes both sides, those in `resetting` with an RST (their peer learns the stream did not end normally).
        /// The last action.
        case close(resetting: [Side])
    }
}

extension ConnectionMachine.Event {
    /// The event's name without its values, for `.ignored` (an event's bytes are not worth a log line).
    public var name: String {
        switch self {
        case .started: "started"
        case .vetted: "vetted"
        case .resolved: "resolved"
        case .resolveFailed: "resolveFailed"
        case .destinationRefused: "destinationRefused"
        case .connected: "connected"
        case .connectFailed: "connectFailed"
        case .readable(let side, _): "readable(\(side))"
        case .inspected(let side): "inspected(\(side))"
        case .queued(let side, _): "queued(\(side))"
        case .drained(let side, _): "drained(\(side))"
        case .endOfStream(let side): "endOfStream(\(side))"
        case .failed(let side, _): "failed(\(side))"
        case .hold(let side, _): "hold(\(side))"
        case .holdUpTo(let side, _): "holdUpTo(\(side))"
        case .flowing(let side): "flowing(\(side))"
        case .decided: "decided"
        case .noHeldRoom: "noHeldRoom"
        case .redial: "redial"
        case .reconnect: "reconnect"
        case .keepReplayCopy: "keepReplayCopy"
        case .spliceEnded(let side, _): "spliceEnded(\(side))"
        case .timerFired: "timerFired"
        case .rested(let side): "rested(\(side))"
        case .peeked(let side, _): "peeked(\(side))"
        }
    }
}
