/// One of a connection's two sockets.
public enum Side: Sendable, Hashable, CustomStringConvertible {
    /// The client that connected to the proxy.
    case client
    /// The server the proxy connected to for it.
    case upstream

    /// The side bytes read from this one go to.
    public var other: Side { self == .client ? .upstream : .client }

    public var description: String { self == .client ? "client" : "upstream" }
}

/// Why a side's reads are paused. A side is read while it has no reason to be paused.
public enum PauseReason: Sendable, Hashable {
    /// The request head is parsed: bytes after it (an eager ClientHello, a body) wait until upstream is connected.
    case awaitingUpstream
    /// Not connected yet (upstream only).
    case notConnected
    /// The other side's output is full: the slow side throttles the fast one.
    case peerBackedUp
    /// Inspection holds this side's bytes until the verdict, and `holdLimit` of them are buffered.
    case heldForVerdict
    /// A splice pump reads this side.
    case spliced
    /// The side sent its end of stream.
    case ended
    /// Plain HTTP: a pipelined next request waits until this exchange is over.
    case exchangeInProgress
    /// The proxy's own error answer is out; the client is read only to discard what it sends.
    case closing
    /// A head arrives a few bytes per read: the side rests (`ConnectionLimits.tricklePauseMilliseconds`, growing) so
    /// that the next read takes what came meanwhile (`HeadTrickle`).
    case trickling
}

/// How one splice pump ended.
public enum SpliceEnd: Sendable, Hashable {
    /// No pipe could be made (out of descriptors, a small pipe budget): the direction keeps copying.
    case unavailable
    /// Quiet for a while: the pipe was given back and the direction reads through the proxy again.
    case idle
    /// The source sent FIN and everything before it was delivered.
    case endOfStream
    /// A splice failed.
    case error(String)
}

/// What the inspection of a tunnel decided.
public enum InspectionDecision: Sendable, Hashable {
    /// The verdict lets the tunnel go on: held bytes pass, nothing more is watched.
    case release
    /// The verdict blocks: both sides close; the client never gets the held server bytes.
    case block(String)
    /// Nothing to judge, and under a rule that holds nothing unjudged passes: both sides close, the held server bytes
    /// dropped, without a block (no finding: the client left before its handshake could show a chain).
    case drop(String)
}

/// A connect attempt that did not succeed.
public enum ConnectFailure: Sendable, Hashable, CustomStringConvertible {
    /// The attempt failed (the system's words, e.g. `connection refused`).
    case failed(String)
    /// No answer within the connect timeout.
    case timedOut

    /// The status a client gets when every address failed this way.
    public var status: Int { if case .timedOut = self { 504 } else { 502 } }

    public var description: String {
        switch self {
        case .failed(let text): text
        case .timedOut: "connect timed out"
        }
    }
}

/// The limits and timeouts one connection runs with (all from `chainwatch run`'s options).
public struct ConnectionLimits: Sendable, Hashable {
    public var requestTimeoutMilliseconds = 10_000
    public var connectTimeoutMilliseconds = 10_000
    public var idleTimeoutMilliseconds = 300_000
    /// The idle timeout once either side has ended its stream (HAProxy's `timeout client-fin`).
    public var halfClosedTimeoutMilliseconds = 30_000
    /// How long a refused client may take to read the proxy's answer before it is closed.
    public var lingerMilliseconds = 2_000
    /// Bytes queued for one direction before its reader is paused.
    public var maxBufferedPerDirection = 256 * 1024
    /// Most bytes of one side held while a verdict is pending; past it, that side is not read.
    public var holdLimit = 256 * 1024
    /// The first bytes each way go out at once; a direction that has moved more carries bulk data.
    public var eagerBytes = 64 * 1024
    /// Bulk directions move by splice(2) once the verdict is in.
    public var spliceBulk = true
    /// Ports CONNECT may reach; empty: any.
    public var allowedPorts: Set<UInt16> = []
    /// Most interim (1xx) responses accepted before one final response.
    public var maxInterimResponses = 8
    /// How long a side whose head trickles in rests before its next read at first (`HeadTrickle`: doubled per rest
    /// while it trickles, up to 8 times this).
    public var tricklePauseMilliseconds = 10
    /// The users a `--socks` listener admits by username and password (nil: no authentication).
    public var socksCredentials: Socks5.Credentials?

    public init() {}
}

/// One value per side: two stored fields, no hashing (the machine reads these on every event).
struct PerSide<Value: Sendable & Equatable>: Sendable, Equatable {
    var client: Value
    var upstream: Value

    subscript(side: Side) -> Value {
        @inline(__always) get { side == .client ? client : upstream }
        @inline(__always) _modify {
            if side == .client { yield &client } else { yield &upstream }
        }
    }
}

/// The reasons one side is paused, as bits: the machine reads them on every event, and a `Set` would allocate.
struct PauseSet: Sendable, Equatable {
    private var bits: UInt16 = 0

    init() {}
    init(_ reason: PauseReason) { insert(reason) }

    var isEmpty: Bool { bits == 0 }
    func contains(_ reason: PauseReason) -> Bool { bits & Self.bit(reason) != 0 }
    mutating func insert(_ reason: PauseReason) { bits |= Self.bit(reason) }
    mutating func remove(_ reason: PauseReason) { bits &= ~Self.bit(reason) }

    private static func bit(_ reason: PauseReason) -> UInt16 {
        switch reason {
        case .awaitingUpstream: 1 << 0
        case .notConnected: 1 << 1
        case .peerBackedUp: 1 << 2
        case .heldForVerdict: 1 << 3
        case .spliced: 1 << 4
        case .ended: 1 << 5
        case .exchangeInProgress: 1 << 6
        case .closing: 1 << 7
        case .trickling: 1 << 8
        }
    }
}

/// One side of a connection as its machine tracks it: why it is paused, what it buffers and queues, what it relayed,
/// and what the inspection holds of it.
struct SideState: Sendable, Equatable {
    /// Why the side is not read; it is read exactly while this is empty.
    var pauses: PauseSet
    /// Whether the executor was last told to read it.
    var reading = false
    /// Bytes in its input, and in its output.
    var buffered = 0
    var queued = 0
    /// Its write half is shut (its FIN sent).
    var writeShut = false
    /// Bytes moved from it so far, counted from the last splice hand-back (bulk detection).
    var relayed = 0
    /// Bytes moved from it since the connection began (stream offsets for `.hold`).
    var streamRelayed = 0
    /// A low watermark is set on its output (to resume its peer when it drains).
    var lowWatermarkSet = false
    /// Inspection: how many of its bytes the inspection has been given, whether a feed is out, how many bytes may pass
    /// while the rest is held (nil: not held), and the most held while a verdict is pending.
    var fed = 0
    var feeding = false
    var allowance: Int?
    var holdLimit: Int

    init(holdLimit: Int, paused: PauseSet) {
        self.holdLimit = holdLimit
        pauses = paused
    }

    /// The verdict is in: nothing more goes to the inspection, and nothing is held.
    mutating func endInspection() {
        allowance = nil
        fed = 0
        feeding = false
    }
}

/// A request being connected: which it is, and the resolved addresses tried so far.
struct ConnectAttempt: Sendable, Equatable {
    var request: ProxyRequest
    var addressCount = 0
    var nextAddress = 0
}
