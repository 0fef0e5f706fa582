import Testing
@testable import ChainwatchCore

/// A head that trickles in a byte at a time costs a read per byte however linear its parsing; the side rests between
/// reads once it trickles, so bytes pile up in the kernel and each read takes many (issue 26, item 8: a 16 KB request
/// head dripped a byte per send cost 70 ms of loop CPU, a 64 KB response head 220 ms).
@Suite struct HeadTrickleTests {
    @Test func smallReadsInARowRestAfterTheFreeOnes() {
        var t = HeadTrickle()
        var answers: [Bool] = []
        for _ in 0..<HeadTrickle.freeSmallReads { answers.append(t.read(1)) }
        #expect(answers.allSatisfy { !$0 })
        let ninth = t.read(1), more = t.read(100), large = t.read(HeadTrickle.smallRead), afterLarge = t.read(1), nothing = t.read(0)
        #expect(ninth && more)
        #expect(!large, "a large read starts the count again")
        #expect(!afterLarge)
        #expect(!nothing, "a read of nothing new is not counted")
    }

    /// Reads the executor makes for a head of `size` bytes sent one byte every 100 µs: the machine is told of each
    /// byte while it reads, and of all that came meanwhile when a rest ends. Simulated time, counted reads.
    static func readsForDrippedRequestHead(_ head: [UInt8]) -> (reads: Int, complete: Bool) {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        var reads = 0, arrived = 0, now = 0.0
        var restUntil: Double? = nil
        var complete = false
        func run(_ actions: [ConnectionMachine.Action]) {
            for action in actions {
                switch action {
                case .peek(.client, let from, let max):
                    reads += 1
                    let bytes = Array(head[min(from, arrived)..<min(arrived, from + max)])
                    run(m.handle(.peeked(.client, bytes)))
                case .rest(.client, let ms): restUntil = now + Double(ms)
                case .vet: complete = true
                default: break
                }
            }
        }
        while arrived < head.count, !complete {
            now += 0.1
            arrived += 1
            if let until = restUntil {
                guard now >= until else { continue }   // resting: the byte waits in the kernel
                restUntil = nil
                run(m.handle(.rested(.client)))
            }
            run(m.handle(.readable(.client, buffered: arrived)))
        }
        if let until = restUntil, !complete { now = until; restUntil = nil; run(m.handle(.rested(.client))); run(m.handle(.readable(.client, buffered: arrived))) }
        return (reads, complete)
    }

    @Test func aRequestHeadDrippedAByteAtATimeIsReadInAFewHundredReads() {
        let head = Array(("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Pad: " + String(repeating: "a", count: 16_000 - 60) + "\r\n\r\n").utf8)
        let (reads, complete) = Self.readsForDrippedRequestHead(head)
        #expect(complete)
        // One read per byte before (16 000); a read per 10 ms rest, 100 bytes at a time, was about 170; with rests
        // that grow to 80 ms, about 30.
        #expect(reads < 50, "\(reads) reads for a \(head.count)-byte head")
    }

    /// Each rest while the head trickles is twice the one before, up to eight times the first; once resting, a large
    /// read (what piled up) does not stop it.
    @Test func restsGrowWhileTheHeadTrickles() {
        var t = HeadTrickle()
        for _ in 0...HeadTrickle.freeSmallReads { _ = t.read(1) }
        #expect((0..<6).map { _ in t.nextRest(base: 10) } == [10, 20, 40, 80, 80, 80])
        let afterRests = t.read(HeadTrickle.smallRead * 2)
        #expect(afterRests, "what piled up in a rest is no sign the head stopped trickling")
        #expect(t.nextRest(base: 10) == 80)
        var fresh = HeadTrickle()
        for _ in 0...HeadTrickle.freeSmallReads { _ = fresh.read(1) }
        let beforeRests = fresh.read(HeadTrickle.smallRead)
        #expect(!beforeRests, "before any rest a large read starts the count again")
    }

    @Test func aHeadInAFewLargeReadsNeverRests() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        let head = Array(("GET http://example.com/ HTTP/1.1\r\nX-Pad: " + String(repeating: "a", count: 4000) + "\r\n\r\n").utf8)
        var out: [ConnectionMachine.Action] = []
        var start = 0
        for end in Array(stride(from: 1000, to: head.count, by: 1000)) + [head.count] {
            out += m.handle(.readable(.client, buffered: end))
            out += m.handle(.peeked(.client, Array(head[start..<end])))
            start = end
        }
        #expect(!out.contains { if case .rest = $0 { true } else { false } })
        #expect(out.contains { if case .vet = $0 { true } else { false } })
    }

    @Test func aRestedSideIsReadAgainAndARestAfterTheCloseIsIgnored() {
        var m = ConnectionMachine(limits: ConnectionLimits())
        _ = m.handle(.started)
        var sent = 0
        var last: [ConnectionMachine.Action] = []
        for byte in Array("GET http://example.com/ HTTP/1.1\r\n".utf8).prefix(HeadTrickle.freeSmallReads + 1) {
            sent += 1
            _ = m.handle(.readable(.client, buffered: sent))
            last = m.handle(.peeked(.client, [byte]))
        }
        #expect(last == [.setReading(.client, false), .rest(.client, milliseconds: 10)])
        #expect(m.isPaused(.client, for: .trickling))
        #expect(m.handle(.rested(.client)) == [.setReading(.client, true)])
        #expect(m.handle(.rested(.client)) == [.ignored("rested(client) in readingRequest")])
    }
}
