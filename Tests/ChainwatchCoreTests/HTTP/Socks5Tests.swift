import Testing
@testable import ChainwatchCore

/// SOCKS 5 (RFC 1928) as a `--socks` listener reads it: the reader on bytes, cut anywhere, and the connection's
/// machine answering in SOCKS.
@Suite struct Socks5Tests {
    static let greeting: [UInt8] = [5, 2, 0, 2]   // curl offers no-auth and username/password

    static func request(_ atyp: UInt8, _ address: [UInt8], port: UInt16, command: UInt8 = 1) -> [UInt8] {
        [5, command, 0, atyp] + address + [UInt8(port >> 8), UInt8(port & 0xFF)]
    }

    /// Reads `bytes` arriving one byte at a time, as a reader is given everything buffered and not consumed.
    static func byteAtATime(_ bytes: [UInt8], _ reader: inout Socks5.Reader) -> [Socks5.Step] {
        var steps: [Socks5.Step] = []
        var buffered: [UInt8] = []
        for byte in bytes {
            buffered.append(byte)
            let step = reader.read(buffered)
            switch step {
            case .needMore: continue
            case .answer(_, let consumed), .connect(_, let consumed): buffered.removeFirst(consumed)
            case .refuse: break
            }
            steps.append(step)
        }
        return steps
    }

    @Test func aDomainNameRequestCutAnywhere() {
        let name = Array("Genuine.Test".utf8)
        var reader = Socks5.Reader()
        let steps = Self.byteAtATime(Self.greeting + Self.request(3, [UInt8(name.count)] + name, port: 8443), &reader)
        #expect(steps == [.answer(reply: [5, 0], consumed: 4),
                          .connect(Authority(host: "genuine.test", port: 8443), consumed: 7 + name.count)])
        #expect(reader.greeted)
    }

    @Test func addressRequests() {
        var v4 = Socks5.Reader()
        _ = v4.read(Self.greeting)
        #expect(v4.read(Self.request(1, [127, 0, 0, 1], port: 443) + [22, 3, 1]) == .connect(Authority(host: "127.0.0.1", port: 443), consumed: 10),
                "bytes after the request are the tunnel's")
        for (bytes, text) in [([UInt8](repeating: 0, count: 15) + [1], "::1"),
                              ([0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1], "2001:db8::1"),
                              ([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1], "2001:db8:0:1::1"),
                              ([0x20, 0x01, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7], "2001:1:2:3:4:5:6:7")] {
            var v6 = Socks5.Reader()
            _ = v6.read(Self.greeting)
            #expect(v6.read(Self.request(4, bytes, port: 443)) == .connect(Authority(host: text, port: 443), consumed: 22))
        }
    }

    /// Each malformed greeting or request gets the reply its client can read, and a reason.
    @Test func refusals() {
        func refusal(_ bytes: [UInt8], greeted: Bool = true) -> [UInt8]? {
            var reader = Socks5.Reader()
            if greeted { _ = reader.read(Self.greeting) }
            guard case .refuse(let reply, let reason) = reader.read(bytes) else { Issue.record("not refused: \(bytes)"); return [] }
            #expect(!reason.isEmpty)
            return reply
        }
        #expect(refusal([5, 1, 2], greeted: false) == [5, 0xFF], "username/password only")
        #expect(refusal([5, 0], greeted: false) == [5, 0xFF], "no method at all")
        #expect(refusal([4, 1, 0, 80, 127, 0, 0, 1, 0], greeted: false) == [0, 0x5B, 0, 0, 0, 0, 0, 0], "SOCKS 4 gets its own rejection")
        #expect(refusal(Array("GET / HTTP/1.1\r\n".utf8), greeted: false) == nil, "HTTP on the SOCKS port: nothing it could read")
        #expect(refusal(Self.request(1, [127, 0, 0, 1], port: 443, command: 2)) == Socks5.reply(.commandNotSupported), "BIND")
        #expect(refusal(Self.request(1, [127, 0, 0, 1], port: 443, command: 3)) == Socks5.reply(.commandNotSupported), "UDP ASSOCIATE")
        #expect(refusal([5, 1, 0, 9, 1, 2]) == Socks5.reply(.addressTypeNotSupported))
        #expect(refusal(Self.request(3, [0], port: 443)) == Socks5.reply(.hostUnreachable), "an empty name")
        #expect(refusal(Self.request(3, [3, 0x61, 0x20, 0x62], port: 443)) == Socks5.reply(.hostUnreachable), "a space in the name")
        #expect(refusal(Self.request(3, [2, 0xC3, 0xA9], port: 443)) == Socks5.reply(.hostUnreachable), "not ASCII")
        #expect(refusal(Self.request(1, [127, 0, 0, 1], port: 0)) == Socks5.reply(.generalFailure), "port 0")
        #expect(refusal([5, 1, 1, 1, 127, 0, 0, 1, 1, 187]) == Socks5.reply(.generalFailure), "reserved byte set")
    }

    // MARK: - Username and password (RFC 1929)

    static let credentials = try! Socks5.Credentials(text: "# users\nalice:s3cret:with:colons\n\nbob:hunter2\r\n", path: "creds")

    static func password(_ user: String, _ password: String) -> [UInt8] {
        [1, UInt8(user.utf8.count)] + Array(user.utf8) + [UInt8(password.utf8.count)] + Array(password.utf8)
    }

    @Test func aListenerWithCredentialsAsksForThemAndAdmitsOnlyThem() {
        var reader = Socks5.Reader(credentials: Self.credentials)
        let request = Self.request(1, [127, 0, 0, 1], port: 443)
        let steps = Self.byteAtATime(Self.greeting + Self.password("alice", "s3cret:with:colons") + request, &reader)
        #expect(steps == [.answer(reply: [5, 2], consumed: 4), .answer(reply: [1, 0], consumed: 26),
                          .connect(Authority(host: "127.0.0.1", port: 443), consumed: 10)])
        #expect(reader.user == "alice")
        for (user, password) in [("alice", "wrong"), ("bob", "hunter"), ("carol", "hunter2"), ("bob", "hunter2 ")] {
            var other = Socks5.Reader(credentials: Self.credentials)
            _ = other.read(Self.greeting)
            guard case .refuse(let reply, let reason) = other.read(Self.password(user, password)) else {
                Issue.record("\(user):\(password) admitted"); continue
            }
            #expect(reply == [1, 1] && reason.contains(user))
        }
        var bob = Socks5.Reader(credentials: Self.credentials)
        _ = bob.read(Self.greeting)
        #expect(bob.read(Self.password("bob", "hunter2")) == .answer(reply: [1, 0], consumed: 13), "a CRLF line end is not the password's")
        // A greeting that offers only "no authentication" to a listener with credentials: no acceptable method.
        var lazy = Socks5.Reader(credentials: Self.credentials)
        guard case .refuse(let reply, _) = lazy.read([5, 1, 0]) else { Issue.record("admitted without a password"); return }
        #expect(reply == Socks5.noAcceptableMethods)
    }

    @Test func credentialFilesWithProblemsNameTheLine() {
        for (text, problem) in [("alice\n", "creds:1: expected user:password"), ("# only a comment\n", "creds: no user:password line"),
                                ("a:b\nc:d\na:e\n", "creds:3: user 'a' listed twice"), (":nouser\n", "creds:1: a user name and a password"),
                                ("nopassword:\n", "creds:1: a user name and a password")] {
            do {
                _ = try Socks5.Credentials(text: text, path: "creds")
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.description.hasPrefix(problem), "\(error)")
            }
        }
    }

    // MARK: - The connection's machine on a SOCKS listener

    @Test func aSocksTunnelIsAConnectWithSocksAnswers() {
        var m = ConnectionMachine(limits: ConnectionLimits(), dialect: .socks5)
        _ = m.handle(.started)
        #expect(m.handle(.readable(.client, buffered: 4)) == [.peek(.client, from: 0, max: 4)])
        #expect(m.handle(.peeked(.client, Self.greeting)) == [.consume(.client, 4), .write(.client, [5, 0])])
        let request = Self.request(3, [12] + Array("genuine.test".utf8), port: 443)
        #expect(m.handle(.readable(.client, buffered: request.count)) == [.peek(.client, from: 0, max: request.count)])
        let asked = m.handle(.peeked(.client, request))
        #expect(asked.first == .consume(.client, request.count))
        #expect(asked.last == .vet(.connect(Authority(host: "genuine.test", port: 443)), requestLine: "SOCKS5 genuine.test:443"))
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let connected = m.handle(.connected)
        #expect(connected.contains(.startInspection))
        #expect(connected.contains(.write(.client, Socks5.reply(.succeeded))))
        #expect(!connected.contains(.write(.client, HTTPWriter.connectionEstablished)))
    }

    @Test func refusalsAreSocksReplies() {
        func refused(_ event: ConnectionMachine.Event, after steps: Int) -> [ConnectionMachine.Action] {
            var m = ConnectionMachine(limits: ConnectionLimits(), dialect: .socks5)
            _ = m.handle(.started)
            _ = m.handle(.readable(.client, buffered: 4))
            _ = m.handle(.peeked(.client, Self.greeting))
            let request = Self.request(1, [127, 0, 0, 1], port: 443)
            _ = m.handle(.readable(.client, buffered: request.count))
            _ = m.handle(.peeked(.client, request))
            if steps > 1 { _ = m.handle(.vetted(nil)) }
            return m.handle(event)
        }
        #expect(refused(.vetted(ProxyRequest.Refusal(status: 403, reason: "known bad")), after: 1).contains(.write(.client, Socks5.reply(.notAllowed))))
        #expect(refused(.resolveFailed("no such name"), after: 2).contains(.write(.client, Socks5.reply(.hostUnreachable))))
        #expect(refused(.destinationRefused("link-local"), after: 2).contains(.write(.client, Socks5.reply(.notAllowed))))
        // Before the greeting: a client over the connection limit reads "no acceptable methods".
        var full = ConnectionMachine(limits: ConnectionLimits(), dialect: .socks5)
        #expect(full.refuseAtOnce(status: 503, reason: "connection limit reached (1)").contains(.write(.client, Socks5.noAcceptableMethods)))
    }

    // MARK: - A transparent listener: no request, the original destination

    @Test func aRedirectedConnectionGoesToItsOriginalDestinationWithNoAnswerOfItsOwn() {
        let destination = Authority(host: "10.77.2.2", port: 8443)
        var m = ConnectionMachine(limits: ConnectionLimits(), dialect: .transparent(destination))
        let started = m.handle(.started)
        #expect(started.last == .vet(.connect(destination), requestLine: "TRANSPARENT 10.77.2.2:8443"))
        #expect(m.target == destination)
        _ = m.handle(.readable(.client, buffered: 300))   // its ClientHello waits for the upstream
        _ = m.handle(.vetted(nil))
        _ = m.handle(.resolved(addressCount: 1))
        let connected = m.handle(.connected)
        #expect(connected.contains(.startInspection))
        #expect(!connected.contains { if case .write = $0 { true } else { false } }, "nothing of the proxy's own reaches the client")
        #expect(connected.contains(.feedInspection(.client, from: 0)))
        // A refusal (a known-bad upstream) is a reset: the client spoke to its server, not to a proxy.
        var refused = ConnectionMachine(limits: ConnectionLimits(), dialect: .transparent(destination))
        _ = refused.handle(.started)
        let out = refused.handle(.vetted(ProxyRequest.Refusal(status: 403, reason: "known bad")))
        #expect(out.contains(.refused(status: 403, reason: "known bad")) && out.last == .close(resetting: [.client]))
        #expect(!out.contains { if case .write = $0 { true } else { false } })
    }
}
