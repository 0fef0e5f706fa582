/// Plain HTTP: the steps of one exchange (`ExchangeMachine`) as the connection's machine runs them, all in this file.
extension ConnectionMachine {
    /// Bytes peeked from `side` while an exchange is in flight.
    mutating func exchangeStep(_ side: Side, _ bytes: [UInt8], _ out: inout [Action]) {
        guard exchange != nil else { return }
        if side == .client {
            guard !exchange!.requestBody.isComplete else { return }
            let used: Int
            do { used = try exchange!.requestBodyBytes(bytes[...]) } catch {
                refuse(400, "malformed chunked request body: \(error)", &out)
                return
            }
            if used > 0 { moveExchangeBytes(from: .client, used, &out) }
            if exchange!.requestBody.isComplete { pauseForExchange(.client, &out) }   // a pipelined request waits its turn
            return
        }
        var rest = bytes[...]
        while phase == .exchanging, exchange != nil {
            let headBefore = exchange!.responseStarted ? nil : exchange!.responseHead.bytes.count
            switch exchange!.nextResponseStep(rest) {
            case .wait:
                if headBefore == 0, exchange!.responseHead.bytes.count > 0 { responseHeadBegan(&out) }
                if headBefore != nil { restIfTrickling(.upstream, read: rest.count, &out) }
                return
            case .malformedHead(let detail):
                refuse(502, "upstream sent a malformed response: \(detail)", &out)
            case .ambiguousLength:
                refuse(502, "upstream response has an ambiguous body length", &out)
            case .tooManyInterim:
                out.append(.log(.warning, "upstream sent more than \(limits.maxInterimResponses) interim responses"))
                close(resetting: [.client], &out)
            case .malformedBody(let detail):
                out.append(.log(.warning, "upstream sent a malformed chunked body: \(detail)"))
                close(resetting: [.client], &out)
            case .head(let head, let length, let interim):
                trickle = HeadTrickle()
                out.append(.consume(.upstream, length))
                consumeBuffered(.upstream, length)
                responseHeadEnded(&out)
                if !interim { responseStatus = head.status }
                if !interim || exchange!.clientVersion == "HTTP/1.1" {
                    let bytes = HTTPWriter.bytes(of: head)
                    sides[.client].queued += bytes.count   // as `emitRelay` counts: a body-less response closes next
                    out.append(.write(.client, bytes))
                }
                if !interim, exchange!.responseBody!.isComplete { finishExchange(&out); return }   // no body (204, 304, HEAD)
                // What follows the head is read afresh from the start of the input: the head's reader saw only a
                // window of it.
                peekAfterResponseHead(&out)
                return
            case .body(let count):
                moveExchangeBytes(from: .upstream, count, &out)
                rest = rest.dropFirst(count)
                if exchange!.responseBody!.isComplete { finishExchange(&out) }
            }
        }
    }

    private mutating func moveExchangeBytes(from side: Side, _ count: Int, _ out: inout [Action]) {
        consumeBuffered(side, count)
        emitRelay(from: side, count: count, eager: true, &out)
    }

    /// After bytes were queued for `side` during an exchange.
    mutating func exchangeOutputChanged(_ side: Side, _ out: inout [Action]) {
        if side == .client, closeWhenFlushed, queuedBytes(.client) == 0 { close(resetting: [], &out) }
    }

    mutating func exchangeEndOfStream(_ side: Side, _ out: inout [Action]) {
        guard side == .upstream, exchange != nil else { return close(resetting: [], &out) }
        if !exchange!.responseStarted {
            refuse(502, "upstream closed the connection without a response", &out)
        } else if exchange!.upstreamClosed() {
            finishExchange(&out)
        } else {
            out.append(.log(.info, "upstream closed mid-response"))
            close(resetting: [.client], &out)
        }
    }

    // MARK: - Helpers

    mutating func consumeBuffered(_ side: Side, _ count: Int) { sides[side].buffered = max(0, sides[side].buffered - count) }

    /// Asks for the exchange bytes `side` holds: past those read of a response head, else from the start.
    func peekExchange(_ side: Side, _ out: inout [Action]) {
        if side == .upstream, let exchange, !exchange.responseStarted {
            let next = exchange.responseHead.nextPeek
            out.append(.peek(.upstream, from: next.from, max: next.max))
        } else {
            out.append(.peek(side, from: 0, max: sides[side].buffered))
        }
    }

    /// After a response head: the bytes behind it, if any, are read afresh.
    func peekAfterResponseHead(_ out: inout [Action]) {
        if sides[.upstream].buffered > 0, sides[.upstream].pauses.isEmpty { peekExchange(.upstream, &out) }
    }

    /// The upstream sent a response head's first bytes: the rest must follow within the request timeout, however
    /// slowly it drips (activity would reset the idle timer).
    mutating func responseHeadBegan(_ out: inout [Action]) {
        responseHeadDeadline = true
        out.append(.schedule(milliseconds: limits.requestTimeoutMilliseconds))
    }

    mutating func responseHeadEnded(_ out: inout [Action]) {
        guard responseHeadDeadline else { return }
        responseHeadDeadline = false
        out.append(.schedule(milliseconds: idleLimit))
    }
    func queuedBytes(_ side: Side) -> Int { sides[side].queued }

    mutating func pauseForExchange(_ side: Side, _ out: inout [Action]) {
        pause(side, .exchangeInProgress)
        setReading(&out)
    }

    /// The response is complete: drop the upstream connection and serve the next request, or close.
    mutating func finishExchange(_ out: inout [Action]) {
        guard let finished = exchange else { return }
        exchangesServed += 1
        exchange = nil
        responseHeadDeadline = false
        trickle = HeadTrickle()
        out.append(.exchangeEnded)
        out.append(.dropUpstream)
        sides[.upstream].pauses = PauseSet(.notConnected)
        sides[.upstream].buffered = 0
        sides[.upstream].queued = 0
        resume(.client, .exchangeInProgress)
        resume(.client, .peerBackedUp)
        if sides[.client].lowWatermarkSet { sides[.client].lowWatermarkSet = false; out.append(.setLowWatermark(.client, 0)) }
        guard finished.keepAlive, finished.requestBody.isComplete else {
            closeWhenFlushed = true
            pause(.client, .closing)
            setReading(&out)
            if sides[.client].queued == 0 { close(resetting: [], &out) }
            return
        }
        phase = .readingRequest
        target = nil
        attempt = nil
        out.append(.schedule(milliseconds: limits.requestTimeoutMilliseconds))   // the next head, like the first
        setReading(&out)
        if sides[.client].buffered > 0 { peekRequestHead(&out) }
    }
}
