/// A first contact whose server answers both connections of the pair with a HelloRetryRequest (a server without the
/// offer's key-share group): each then sends a second hello, and an interceptor could forge whichever of the two
/// comes last, as it could have the last first hello. So the second hellos are paired as the first ones were: the
/// probe holds its own (`probeRetried`), the tunnel's HelloRetryRequest reaches the client, the client's second hello
/// is held until whole, and the two leave together in an order drawn at random (`.sendSecondHellos`). A side waits
/// for the other's HelloRetryRequest `Settings.otherRetryMilliseconds` at most (a server that serves one connection
/// at a time answers the second connection only once the first is done), and for the client's second hello
/// `pairStallMilliseconds` (`Deadline.retryGate`); then what is held goes, the client's bytes first.
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
    /// What the client sent after its first hello, under a rule that holds (`clientEnded`: a client that only answered
    /// the retry with an alert has left it too).
    var clientTail = AlertsOnly()
}

/// Walks the record headers of a client's bytes after its first ClientHello: whether all of them are alert and
/// ChangeCipherSpec records (no second hello, no data begun). Constant memory, any chunking; stops at the first other
/// record type.
struct AlertsOnly: Sendable, Equatable {
    private(set) var holds = true
    /// The record header's byte read next (0-4), the length's high byte, and the body bytes still to skip.
    private var headerByte = 0
    private var lengthHigh: UInt8 = 0
    private var bodyLeft = 0

    mutating func feed(_ bytes: some Collection<UInt8>) {
        guard holds else { return }
        var i = bytes.startIndex
        while i != bytes.endIndex {
            if bodyLeft > 0 {
                let skipped = min(bodyLeft, bytes.distance(from: i, to: bytes.endIndex))
                bodyLeft -= skipped
                i = bytes.index(i, offsetBy: skipped)
                continue
            }
            let byte = bytes[i]
            i = bytes.index(after: i)
            switch headerByte {
            case 0:
                guard byte == 20 || byte == 21 else { holds = false; return }   // ChangeCipherSpec, alert
            case 3: lengthHigh = byte
            case 4: bodyLeft = Int(lengthHigh) << 8 | Int(byte)
            default: break
            }
            headerByte = headerByte == 4 ? 0 : headerByte + 1
        }
    }
}

extension InspectionMachine {
    /// The pair's probe got the server's HelloRetryRequest and holds its second hello (the executor's gate), until
    /// `.sendProbeRetry`. A probe whose tunnel has nothing to pair that hello with (its server answered without a
    /// retry, the tunnel ended or was decided) is let go at once.
    public mutating func probeRetried(_ resources: any InspectionResources) -> [Action] {
        var out: [Action] = []
        switch retry.probe {
        case .released: return [.sendProbeRetry]
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
        let scanning = retry.scan != nil
        passHelloRetry(resources, &out)   // under a hold, the tunnel's HelloRetryRequest passes now
        if retry.scan == nil {
            arm(.retryGate, settings.otherRetryMilliseconds, &out)   // the tunnel's retry is still to come
        } else if scanning {
            arm(.retryGate, settings.pairStallMilliseconds, &out)    // its client's second hello, held for this probe
        }
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
        // The client's time for its second hello; while the probe has not retried, the time for its retry.
        arm(.retryGate, retry.probe == .holds ? settings.pairStallMilliseconds : settings.otherRetryMilliseconds, &out)
    }

    /// The client's bytes after the tunnel's HelloRetryRequest.
    mutating func scanSecondHello(_ bytes: some Collection<UInt8>, _ resources: any InspectionResources, _ out: inout [Action]) {
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

    /// Both second hellos are ready: they leave in the order a fair coin draws, a loop turn apart either way.
    mutating func orderSecondHellos(_ resources: any InspectionResources, _ out: inout [Action]) {
        let probeFirst = resources.probeGoesFirst()
        retry.probe = .released
        retry.scan = nil
        retry.clientWhole = false
        cancel(.retryGate, &out)
        out.append(.sendSecondHellos(probeFirst: probeFirst))
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
        if probeHolds { out.append(.sendProbeRetry) }
    }

    /// Lets the pair's probe send its closing flight (its Finished, a close_notify) and close, once the tunnel is
    /// decided (its server's flight goes to the client, or it is blocked), ended, or gave its connection up. Until
    /// then the probe is as silent as the tunnel held for the verdict, whatever part of the tunnel's flight has come:
    /// an interceptor that answers one connection of the pair and holds the other (or sends it only a first byte)
    /// cannot tell by what the answered one sends which of them it was (`ProbeHandshake`: it gives its connection up
    /// after the pair stall, as the tunnel does). Once.
    mutating func releaseProbeClose(_ out: inout [Action]) {
        guard pairProbeHoldsItsClose else { return }
        pairProbeHoldsItsClose = false
        out.append(.releaseProbeClose)
    }
}
