/// Between a first contact's tunnel and the probe of its pair: when the server answers the probe's hello with a
/// HelloRetryRequest, the probe's second hello waits here (`hold`) until the tunnel's inspection lets it go
/// (`release`, from `InspectionMachine`'s `.sendProbeRetry`), so that it leaves together with the client's second
/// hello, in an order drawn at random, not a round trip before it. A gate the tunnel released already lets a hello
/// through at once.
///
/// Made by the tunnel for each pair; given to the probe's handshake only when the tunnel's call starts that handshake
/// (`attach`, by the prober): a probe already in flight for the key is not this tunnel's to order. Loop thread only
/// (the tunnel's loop, which runs the handshake it starts); the unchecked Sendable lets it ride the prober's hop to
/// that same loop.
final class ProbeRetryGate: @unchecked Sendable {
    /// Whether the tunnel's probe is the handshake this gate was given to.
    private(set) var attached = false
    private(set) var released = false
    /// What the handshake holds, and how it sends it.
    private var held: [UInt8] = []
    private var send: (([UInt8]) -> Void)?
    /// Told once, when the handshake starts holding (the tunnel's inspection: `probeRetried`).
    var onHold: (() -> Void)?

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
}
