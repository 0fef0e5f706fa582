import Testing
@testable import ChainwatchCore

/// The process's budget for bytes held until verdicts (`--held-memory`), and how a tunnel's machine takes and gives
/// back its room (issue 26, item 6: a hostile server made every tunnel it answered hold bytes, with no bound but
/// the number of connections).
@Suite struct HeldBytesBudgetTests {
    @Test func roomIsTakenWhileItLastsAndGivenBack() {
        let budget = HeldBytesBudget(capacity: 40_000)
        #expect(budget.take(16_384))
        #expect(budget.take(16_384))
        #expect(!budget.take(16_384), "32 KiB taken of 40 000: no third step")
        #expect(budget.usage.used == 32_768)
        #expect(budget.usage.refused == 0, "a refused take is not yet a closed tunnel")
        budget.countTunnelClosed()
        #expect(budget.usage.refused == 1)
        budget.giveBack(16_384)
        #expect(budget.take(16_384))
        #expect(budget.usage.used == 32_768)
        #expect(budget.take(40_000 - 32_768), "the last bytes are room too")
        #expect(!budget.take(1))
    }

    /// One client address holds at most a quarter of the budget; the others keep theirs, and what it gives back is
    /// its own again.
    @Test func oneClientHoldsAtMostAQuarter() {
        let budget = HeldBytesBudget(capacity: 16 * 16_384)
        let greedy: [UInt8] = [10, 0, 0, 1], other: [UInt8] = [10, 0, 0, 2]
        #expect((0..<6).map { _ in budget.take(16_384, client: greedy) } == [true, true, true, true, false, false])
        #expect((0..<4).allSatisfy { _ in budget.take(16_384, client: other) })
        #expect(budget.usage.used == 8 * 16_384)
        budget.giveBack(16_384, client: greedy)
        #expect(budget.take(16_384, client: greedy) && !budget.take(16_384, client: greedy))
        // The budget's own capacity still bounds everyone: 8 more addresses' worth is more than the 8 steps left.
        let granted = (3...10).map { budget.take(16_384 * 2, client: [10, 0, 0, UInt8($0)]) }.filter { $0 }.count
        #expect(granted == 4 && budget.usage.used == 16 * 16_384)
        #expect(!budget.take(1, client: [10, 0, 0, 99]))
        for address in 3...6 { budget.giveBack(16_384 * 2, client: [10, 0, 0, UInt8(address)]) }
        #expect(budget.take(16_384 * 4, client: [10, 0, 0, 3]), "a share given back is whole again")
    }

    @Test func aZeroBudgetRefusesEverything() {
        let budget = HeldBytesBudget(capacity: 0)
        #expect(!budget.take(1))
        #expect(budget.take(0))
    }

    /// Loops are threads: takes and gives from many at once never lose or invent room.
    @Test func concurrentTakersNeverExceedTheCapacity() async {
        let budget = HeldBytesBudget(capacity: 100 * 16_384)
        let granted = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var mine = 0
                    for round in 0..<2_000 {
                        if budget.take(16_384) { mine += 1 }
                        if round % 3 == 0, mine > 0 { budget.giveBack(16_384); mine -= 1 }
                    }
                    return mine
                }
            }
            return await group.reduce(0, +)
        }
        #expect(granted <= 100)
        #expect(budget.usage.used == granted * 16_384)
    }

    // MARK: - The machine's side

    @Test func heldServerBytesTakeRoomInStepsAndTheVerdictGivesItBack() {
        var m = ConnectionMachineTests.established()
        #expect(m.handle(.readable(.upstream, buffered: 100)) == [.feedInspection(.upstream, from: 0)])
        #expect(m.handle(.inspected(.upstream)) == [.takeHeldRoom(16_384)])
        #expect(m.handle(.readable(.upstream, buffered: 16_000)) == [.feedInspection(.upstream, from: 100)])
        #expect(m.handle(.inspected(.upstream)) == [], "still within the step taken")
        _ = m.handle(.readable(.upstream, buffered: 40_000))
        #expect(m.handle(.inspected(.upstream)) == [.takeHeldRoom(32_768)], "up to 48 KiB, the next step over 40 000")
        #expect(m.heldRoom == 49_152)
        #expect(m.handle(.decided(.release)) == [.returnHeldRoom, .relay(from: .upstream, count: 40_000, eager: true)])
        #expect(m.heldRoom == 0)
    }

    @Test func bytesThatPassTakeNoRoom() {
        var m = ConnectionMachineTests.established()
        _ = m.handle(.readable(.upstream, buffered: 80))
        _ = m.handle(.hold(.upstream, passingUpTo: 80))   // a HelloRetryRequest, passed whole
        #expect(m.handle(.inspected(.upstream)) == [.relay(from: .upstream, count: 80, eager: true)])
        #expect(m.heldRoom == 0)
    }

    /// No room: the tunnel closes before anything held passes, says why, and the access line can tell.
    @Test func noRoomClosesTheTunnelWithoutPassingHeldBytes() {
        var m = ConnectionMachineTests.established()
        _ = m.handle(.readable(.upstream, buffered: 4000))
        #expect(m.handle(.inspected(.upstream)) == [.takeHeldRoom(16_384)])
        let out = m.handle(.noHeldRoom)
        #expect(out == [.log(.warning, "no room for the bytes held until the verdict (--held-memory is taken): closed before any passed"),
                        .cancelTimer, .close(resetting: [])])
        #expect(!out.contains { if case .relay = $0 { true } else { false } })
        #expect(m.closedWithoutHeldRoom)
        #expect(m.handle(.decided(.release)) == [.ignored("decided after the close")])
    }

    /// A verdict that came in before the refusal was handled: the bytes are no longer held, the tunnel goes on.
    @Test func noRoomAfterTheVerdictIsIgnored() {
        var m = ConnectionMachineTests.established()
        _ = m.handle(.readable(.upstream, buffered: 4000))
        _ = m.handle(.inspected(.upstream))
        _ = m.handle(.decided(.release))
        #expect(m.handle(.noHeldRoom) == [.ignored("noHeldRoom in relaying")])
        #expect(!m.closedWithoutHeldRoom)
    }

    /// While the upstream is redialed for a probe, the client's bytes are held, and take room.
    @Test func clientBytesHeldWhileRedialingTakeRoom() {
        var m = ConnectionMachineTests.established()
        #expect(m.handle(.readable(.client, buffered: 300)) == [.feedInspection(.client, from: 0)])
        _ = m.handle(.redial)
        #expect(m.handle(.inspected(.client)) == [.takeHeldRoom(16_384)])
    }
}
