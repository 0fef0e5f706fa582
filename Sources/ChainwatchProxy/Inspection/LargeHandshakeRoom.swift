import ChainwatchLock

/// The memory the proxy spends, at once, on server handshake messages larger than a tunnel reads by default
/// (`TLSObserver.maxServerHandshakeMessageLength`, 224 KiB; the probe's 512 KiB): Certificate messages up to the
/// protocol's 16 MiB. Real chains stop at about 210 KB, so this is for the rare server, and for the hostile one that
/// announces 16 MiB on every connection: each such message takes its room from here before its bytes are read, and
/// one that finds no room is `oversized_handshake` (under `block`, the client gets nothing), never a tunnel that
/// buffers what it likes. Thread-safe.
public final class LargeHandshakeRoom: Sendable {
    /// Bytes all large messages may hold at once (`--large-handshake-memory`).
    public let capacity: Int
    private let state: Lock<State>

    private struct State {
        var used = 0
        var granted = 0
        var refused = 0
    }

    public init(capacity: Int) {
        self.capacity = max(0, capacity)
        state = Lock(State())
    }

    /// Takes `bytes` of room, or nil when less than that is free. The room is given back when the `Reservation` is
    /// released or deinitialised.
    public func reserve(_ bytes: Int) -> Reservation? {
        let granted = state.withLock { state -> Bool in
            guard bytes <= capacity - state.used else {
                state.refused += 1
                return false
            }
            state.used += bytes
            state.granted += 1
            return true
        }
        return granted ? Reservation(room: self, bytes: bytes) : nil
    }

    fileprivate func give(_ bytes: Int) {
        state.withLock { $0.used -= bytes }
    }

    /// Bytes held now, reservations granted and refused since start (for `/metrics`).
    public var usage: (used: Int, granted: Int, refused: Int) {
        state.withLock { ($0.used, $0.granted, $0.refused) }
    }

    /// Room taken from a `LargeHandshakeRoom`; given back once, by `release()` or when it goes away.
    public final class Reservation: @unchecked Sendable {   // `released` is touched by its one owner's thread only
        public let bytes: Int
        private let room: LargeHandshakeRoom
        private var released = false

        fileprivate init(room: LargeHandshakeRoom, bytes: Int) {
            self.room = room
            self.bytes = bytes
        }

        public func release() {
            guard !released else { return }
            released = true
            room.give(bytes)
        }

        deinit { release() }
    }
}
