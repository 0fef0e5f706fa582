/// Between a first contact's tunnel and the probe of its pair, so that the probe's connection does nothing an
/// interceptor could tell from the tunnel's:
/// - **Its second hello.** When the server answers the probe's hello with a HelloRetryRequest, the probe's second
///   hello waits here (`hold`) until the tunnel's inspection lets it go (`release`, from `InspectionMachine`'s
///   `.sendProbeRetry`), so that it leaves together with the client's second hello, in an order drawn at random, not a
///   round trip before it. A gate the tunnel released already lets a hello through at once.
/// - **Its closing flight** (under a rule that holds the server's bytes: `holdsClose`). A probe whose server answered
///   it keeps its Finished and close_notify, and its connection, until the tunnel is decided (`releaseClose`, from
///   `.releaseProbeClose`), as the tunnel's connection, held for the verdict, sends nothing; after
///   `stallMilliseconds` from its server's first byte it gives the connection up without them, as the tunnel does
///   after the pair stall (`ProbeHandshake`).
///
/// Made by the tunnel for each pair; given to the probe's handshake only when the tunnel's call starts that handshake
/// (`attach`, by the prober): a probe already in flight for the key is not this tunnel's to order. Loop thread only
/// (the tunnel's loop, which runs the handshake it starts); the unchecked Sendable lets it ride the prober's hop to
/// that same loop.
final class PairProbeGate: @unchecked Sendable {
    /// Whether the tunnel's probe is the handshake this gate was given to.
    private(set) var attached = false
    private(set) var released = false
    /// What the handshake holds, and how it sends it.
    private var held: [UInt8] = []
    private var send: (([UInt8]) -> Void)?
    /// Told once, when the handshake starts holding (the tunnel's inspection: `probeRetried`).
    var onHold: (() -> Void)?

    /// Whether the probe keeps its closing flight for the tunnel (a rule that holds), and for how long at most.
    let holdsClose: Bool
    let stallMilliseconds: Int
    /// What a tunnel holds of its server's bytes before it stops reading (`ConnectionLimits.holdLimit`): a kept probe
    /// reads as much, and drops it.
    let holdLimit: Int
    private(set) var closeReleased = false
    /// The handshake's way to send its closing flight and close, while it holds them.
    private var close: (() -> Void)?

    init(holdsClose: Bool, stallMilliseconds: Int, holdLimit: Int) {
        self.holdsClose = holdsClose
        self.stallMilliseconds = stallMilliseconds
        self.holdLimit = holdLimit
    }

    /// By the prober, when this tunnel's call starts the handshake.
    func attach() { attached = true }

    /// The handshake's second hello (and what it sends with it): held, unless released already (then false: the
    /// caller sends them itself). Later bytes of a handshake that holds are held behind them.
    func hold(_ bytes: [UInt8], send: @escaping ([UInt8]) -> Void) -> Bool {
        guard !released else { return false }
        held += bytes
        self.send = send
        return true
    }

    /// Whether the handshake holds bytes here.
    var holds: Bool { send != nil && !released }

    /// Lets the held bytes go (once), and every later hold through.
    func release() {
        guard !released else { return }
        released = true
        onHold = nil
        guard let send else { return }
        self.send = nil
        let bytes = held
        held = []
        send(bytes)
    }

    /// Whether the handshake, done, keeps its closing flight here (`holdClose`) instead of sending it.
    var keepsClose: Bool { holdsClose && !closeReleased }

    /// The handshake keeps its closing flight; `close` sends it and closes.
    func holdClose(_ close: @escaping () -> Void) { self.close = close }

    /// The handshake gave its connection up (the stall) or ended: nothing is held any longer.
    func dropClose() { close = nil }

    /// The tunnel is decided (or ended, or gave its connection up): the closing flight goes, now or when the handshake
    /// is done.
    func releaseClose() {
        guard !closeReleased else { return }
        closeReleased = true
        let close = self.close
        self.close = nil
        close?()
    }
}
