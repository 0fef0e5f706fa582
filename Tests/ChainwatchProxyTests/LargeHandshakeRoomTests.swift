@testable import ChainwatchProxy
import Testing

/// The memory for server handshake messages over 224 KiB: taken before such a message is read, refused past the
/// capacity, given back once.
struct LargeHandshakeRoomTests {
    @Test func roomIsTakenUpToTheCapacityAndGivenBackOnce() {
        let room = LargeHandshakeRoom(capacity: 1_000)
        let first = room.reserve(600)
        #expect(first != nil)
        #expect(room.reserve(500) == nil)          // 400 free
        let second = room.reserve(400)
        #expect(second != nil)
        #expect(room.usage.used == 1_000)
        first?.release()
        first?.release()                            // once only
        #expect(room.usage.used == 400)
        #expect(room.usage.granted == 2 && room.usage.refused == 1)
        _ = second
    }

    @Test func aReservationThatGoesAwayGivesItsRoomBack() {
        let room = LargeHandshakeRoom(capacity: 100)
        do {
            let held = room.reserve(100)
            #expect(held != nil && room.usage.used == 100)
        }
        #expect(room.usage.used == 0)
        #expect(room.reserve(100) != nil)
    }

    @Test func noCapacityReadsNone() {
        let room = LargeHandshakeRoom(capacity: 0)
        #expect(room.reserve(1) == nil)
        #expect(room.reserve(0) != nil)
    }
}
