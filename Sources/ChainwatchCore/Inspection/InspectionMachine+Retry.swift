/// A first contact whose server answers both connections of the pair with a HelloRetryRequest (a server without the
/// offer's key-share group): each then sends a second hello, and an interceptor could forge whichever of the two
/// comes last, as it could have the last first hello. So the second hellos are paired as the first ones were: the
/// probe holds its own (`probeRetried`), the tunnel's HelloRetryRequest reaches the client, the client's second hello
/// is held until whole, and the two leave together in an order drawn at random (`.sendProbeRetry`). Nothing waits
/// longer than `Settings.pairStallMilliseconds` for the other (`Deadline.retryGate`): a server that serves one
/// connection at a time answers the second connection only once the first is done.
struct RetryPairing: Sendable {
    enum ProbeSide: Sendable, Equatable {
        /// The probe has not said it holds a second hello.
        case unknown
        /// It holds one, until `.sendProbeRetry`.
        case holds
        /// Let go (or never to be held: a retry that comes later is sent at once).
        case released
    }

    var probe = ProbeSide.unknown
    /// The client's bytes are held from `clientStreamBytes` on while its second hello is read.
    var scan: SecondHelloScan?
    /// The client's second hello is whole and held, for a probe that has not retried yet.
    var clientWhole = false
    /// The client's bytes fed so far (the stream offset a hold starts at).
    var clientStreamBytes = 0
}

extension InspectionMachine {
    /// The pair's probe got the server's HelloRetryRequest and holds its second hello (the executor's gate), until
    /// `.sendProbeRetry`. A probe whose tunnel has nothing to pair that hello with (its server answered without a
    /// retry, the tunnel ended or was decided) is let go at once.
    public mutating func probeRetried(_ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        switch retry.probe {
        case .released: return [.sendProbeRetry(afterClient: false)]
        case .holds: return [.impossible("probe retried twice")]
        case .unknown: break
        }
        retry.probe = .holds
        guard isPairing, !tunnelEnded, watch.serverHello == nil else {
            endRetryPairing(&out)
            return out
        }
        if retry.clientWhole {
            orderSecondHellos(resources, &out)
            return out
        }
        // The server answers the probe: the tunnel's connection cannot be stalled behind it.
        cancel(.pairStall, &out)
        passHelloRetry(resources, &out)   // under a hold, the tunnel's HelloRetryRequest passes now
        // The tunnel's retry is still to come: it gets as long as the pair's stall.
        if retry.scan == nil { arm(.retryGate, settings.pairStallMilliseconds, &out) }
        return out
    }

    /// Once the tunnel's HelloRetryRequest reaches its client (passed under a hold, or flowing), in a pair whose probe
    /// holds its second hello or may: the client's bytes are held from here until its second hello is whole.
    mutating func holdSecondHelloIfPaired(_ resources: any InspectionResources, _ out: inout [Action]) {
        guard isPairing, !tunnelEnded, watch.sawHelloRetry, retry.scan == nil, !retry.clientWhole else { return }
        guard !holds || passedServerBytes > 0 else { return }
        switch retry.probe {
        case .released: return
        case .holds: break
        case .unknown: guard resources.pairProbeHoldsItsRetry else { return }   // the probe is not this tunnel's to order
        }
        retry.scan = SecondHelloScan()
        out.append(.connection(.hold(.client, passingUpTo: retry.clientStreamBytes)))
        arm(.retryGate, settings.pairStallMilliseconds, &out)   // the client's time for its second hello
    }

    /// The client's bytes after the tunnel's HelloRetryRequest, from stream offset `offset`.
    mutating func scanSecondHello(_ bytes: some Collection<UInt8>, from offset: Int, _ resources: any InspectionResources,
                                  _ out: inout [Action]) {
        guard var scan = retry.scan else { return }
        let progress = scan.feed(bytes)
        retry.scan = scan
        switch progress {
        case .moreBytes:
            return
        case .notAHello:
            endRetryPairing(&out)
        case .whole:
            retry.scan = nil
            retry.clientWhole = true
            if retry.probe == .holds { orderSecondHellos(resources, &out) }   // else the probe's retry is waited for
        }
    }

    /// Both second hellos are ready: they leave in the order a fair coin draws. The client's held bytes go when the
    /// connection is told `.flowing` (at once, or after the bytes being fed now); the probe's after them, on the
    /// loop's next turn, when it goes second.
    mutating func orderSecondHellos(_ resources: any InspectionResources, _ out: inout [Action]) {
        let probeFirst = resources.probeGoesFirst()
        retry.probe = .released
        retry.scan = nil
        retry.clientWhole = false
        cancel(.retryGate, &out)
        if probeFirst {
            out.append(.sendProbeRetry(afterClient: false))
            out.append(.connection(.flowing(.client)))
        } else {
            out.append(.connection(.flowing(.client)))
            out.append(.sendProbeRetry(afterClient: true))
        }
    }

    /// The pairing of second hellos is over (or never began): a client's bytes held for it flow, a probe's second
    /// hello held for it goes, and a probe that retries later is let go at once. Once.
    mutating func endRetryPairing(lettingTheClientGo: Bool = true, _ out: inout [Action]) {
        guard retry.probe != .released else { return }
        let probeHolds = retry.probe == .holds
        let clientHeld = retry.scan != nil || retry.clientWhole
        retry.probe = .released
        retry.scan = nil
        retry.clientWhole = false
        cancel(.retryGate, &out)
        if clientHeld, lettingTheClientGo { out.append(.connection(.flowing(.client))) }
        if probeHolds { out.append(.sendProbeRetry(afterClient: false)) }
    }
}
