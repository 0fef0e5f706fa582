import ChainwatchCore
import ChainwatchEventLoop

/// A tunnel's inspection and the admission of a request, as the connection's machine asks for them.
extension ProxyConnection {
    func startInspection() {
        worker.stats.tunnelsOpened.add(1, ordering: .relaxed)
        closeOutcome = .tunnel
        guard let snapshot, let target = machine.target, let connectedAddress else { return }
        var facts = facts(for: target)
        facts.upstreamIP = connectedAddress.ip
        let inspection = TunnelInspection(inspector: worker.inspector, snapshot: snapshot, loop: worker.loop, facts: facts,
                                          upstreamAddress: connectedAddress, client: clientKey, stack: spareStack,
                                          spotChecks: worker.spotChecks, spotCheck: spotCheck,
                                          holdLimit: worker.configuration.connectionLimits.holdLimit,
                                          takeSpare: { [weak self] in self?.handSpare() },
                                          spareIsOpen: { [weak self] in self?.spare != nil }) { [weak self] event in
            self?.post(event)
        }
        self.inspection = inspection
        inspection.start(spareOpen: spare != nil)   // what it holds comes back as events, queued behind this action
    }

    /// Gives the inspection `side`'s new bytes; what they change comes back as events, queued before `.inspected`.
    func feed(_ side: Side, from offset: Int) {
        if let inspection, let connection = connection(side) {
            connection.input.forEachChunk(from: offset) { chunk in
                if side == .client { inspection.clientBytes(chunk) } else { inspection.serverBytes(chunk) }
            }
            // A spare no probe took once the hello is read (a TLS 1.2 hello, an offer with a result, a block rule's
            // pair, no TLS at all) is of no use.
            if spare != nil, inspection.sawClientHello || !inspection.awaitsVerdict { closeSpare() }
        }
        events.append(.inspected(side))
    }

    /// What the alert lines say about this client and `authority`, before anything is known of the handshake.
    func facts(for authority: Authority) -> ConnectionFacts {
        var facts = ConnectionFacts(id: id, sourceIP: clientAddress.ip, sourcePort: clientAddress.port, connectHost: authority.host,
                                    port: authority.port)
        switch machine.dialect {
        case .http: break
        case .socks5: facts.via = "socks5"
        case .transparent: facts.via = "transparent"
        }
        return facts
    }

    /// Whether a request may go on (`Admission`, ChainwatchCore, decides): an upstream whose last verdict blocked gets
    /// `403`, and plain HTTP to a host whose rule says `https_only` is alerted or, under block, refused.
    func vet(_ request: ProxyRequest, requestLine: String) -> ProxyRequest.Refusal? {
        let inspector = worker.inspector
        let now = worker.loop.cachedMilliseconds
        let decision: Admission.Decision
        switch request {
        case .connect(let authority):
            let snapshot = inspector.policies.snapshot
            self.snapshot = snapshot
            let mark = inspector.cache.knownBad(authority, now: now)
            decision = Admission.connect(authority, mark: mark, ruleIdentities: snapshot.ruleIdentities,
                                         anchorsGeneration: snapshot.anchorsGeneration,
                                         secondsLeft: Int(((mark?.expires ?? now) - now + 999) / 1000))
            if let (mark, outcome) = decision.mark {
                inspector.refused(authority, mark: mark)
                access.admission = outcome
            }
        case .forward(let authority, _):
            decision = Admission.forward(authority, facts: facts(for: authority), requestLine: requestLine,
                                         policy: inspector.policies.snapshot.policy)
        }
        if let line = decision.finding {
            inspector.report(line.verdict, evidence: line.evidence, rule: line.rule, tunnel: line.facts, nowMilliseconds: now)
            access.admission = InspectionOutcome(action: line.verdict.deciding?.action, reason: line.verdict.deciding?.reason,
                                                 evidence: line.evidence?.source)
        }
        return decision.refusal
    }
}
