import ArgumentParser
import CBuildInfo
import ChainwatchCore
import ChainwatchEventLoop
import ChainwatchOpenSSL
import ChainwatchPolicyFile
import ChainwatchProxy
import Foundation
import Logging

@main
struct Chainwatch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chainwatch",
        abstract: "A man-in-the-middle detection proxy: forwards CONNECT tunnels unchanged and checks every server's certificate chain against a policy.",
        version: versionText,
        subcommands: [Run.self, Pin.self, Policy.self, Ctl.self, Selftest.self],
        defaultSubcommand: Run.self)
}

/// `--version`: the release, and the commit when the build was given one (`make build`).
let versionText = Observer.version + (String(cString: c_chainwatch_commit()).isEmpty ? "" : " (commit \(String(cString: c_chainwatch_commit())))")

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the proxy (the default command).")

    @Option(help: "Address to listen on, ADDR:PORT or [V6]:PORT; one no other process listens on.")
    var listen = "127.0.0.1:3128"

    @Option(name: .customLong("socks"), help: ArgumentHelp("A SOCKS 5 listener, ADDR:PORT or [V6]:PORT (repeatable); on an address that is not loopback, with --socks-credentials and --allow-client.",
                                                           discussion: "RFC 1928 (no authentication, or username/password with --socks-credentials), the CONNECT command to a name, an IPv4 or an IPv6 address (curl --socks5-hostname, ssh -D clients). Each tunnel is inspected as a CONNECT's; refusals are SOCKS replies (2, not allowed, for a known-bad upstream or a refused destination; 4, host unreachable, for a name that does not resolve or an upstream that does not answer; 5, connection refused). A non-loopback address needs --socks-credentials and --allow-client."))
    var socks: [String] = []

    @Option(name: .customLong("socks-credentials"), help: ArgumentHelp("A file of user:password lines: --socks listeners then ask for a username and password (RFC 1929) and admit only these. Needed for a --socks address that is not loopback.",
                                                                       valueName: "file"))
    var socksCredentials: String?

    @Option(name: .customLong("transparent"), help: ArgumentHelp("A listener for connections a firewall redirects to chainwatch, ADDR:PORT or [V6]:PORT (repeatable).",
                                                                 discussion: "For a gateway whose clients have no proxy setting: nftables `redirect` (the original destination read with SO_ORIGINAL_DST, IPv4 and IPv6) or `tproxy` (the socket's own address). Each connection's tunnel goes to its original address and port, its rule picked by the TLS SNI (no SNI: the address), inspected as a CONNECT's; a refusal is a reset. Needs --allow-client unless on loopback. chainwatch's own connections must be exempt from the redirect (deploy/README.md, Gateway); one that comes back is reset."))
    var transparent: [String] = []

    @Option(help: "Event loops, each on its own thread, and as many threads that validate chains no cached verdict covers (default: one per CPU the process may run on, see taskset(1)).")
    var threads: Int?
    /// `--threads`, or one per CPU this process may run on: a default of the machine's, so not shown by `--help` as
    /// a number (the man page and the README say it in words).
    private var loopCount: Int { threads ?? EventLoop.usableCPUCount }

    @Option(help: "Policy file (YAML, see policies/REFERENCE.md). Default: the built-in policy: system trust, alert on every failure.")
    var policy: String?

    @Flag(help: "Reload the policy file when it changes (SIGHUP always reloads).")
    var watch = false

    @Option(name: .customLong("alert-log"), help: "Alert log: one JSON line per finding (ECS field names). `-` is standard output. Reopened on SIGUSR1.")
    var alertLog = "chainwatch-alerts.jsonl"

    @Option(name: .customLong("access-log"), help: "Access log: one JSON line (ECS) per tunnel and plain-HTTP request as it ends: client, destination, SNI, TLS version, verdict, bytes each way, duration, close reason. `-` is standard output. Reopened on SIGUSR1. Not the alert log's file (nor standard output with --alert-log -). Default: none.")
    var accessLog: String?

    @Option(help: ArgumentHelp("Extra trust anchors (PEM bundle, CA certificates) added to every rule that trusts the system roots.",
                               discussion: "Anchors you name are trusted deliberately: a chain through one raises no finding."))
    var ca: String?

    @Option(name: .customLong("public-roots"),
            help: ArgumentHelp("The public root set (a directory of .crt/.pem files or a PEM bundle), or 'none'.",
                               discussion: """
                               Default: \(PublicRoots.debianDirectory) (Debian's ca-certificates). Every alert \
                               line names the kind of anchor its chain validated through \
                               (chainwatch.chain.anchor_kind): public (a root of this set: nothing raised), local (a \
                               root of the OS trust store that is not in the set, added on this machine: an unpinned \
                               host anchored only there raises local_root, how a TLS-inspection gateway's installed \
                               CA looks), operator (--ca or a rule's own anchors: trusted quietly) or system (no set \
                               to tell: not found, or 'none'; local_root is then never raised).
                               """))
    var publicRoots: String?

    @Option(help: ArgumentHelp("Known intermediate CAs (PEM bundle), offered to chains that miss theirs.",
                               discussion: "Intermediates seen in valid chains are offered too (the last 1 024), as browsers keep them."))
    var intermediates: String?

    @Option(help: "A hosts(5) file consulted before DNS (with /etc/hosts).")
    var hosts: String?

    @Option(name: .customLong("probe-timeout"), help: "Seconds for a probe handshake (TLS 1.3, resumed sessions) before probe_failed; also how long a TLS 1.3 tunnel's encrypted server flight may take to reach the probe's size before it counts as short (evidence_mismatch), and how long a server whose bytes are held may take from its first byte to show its chain (handshake_timeout).")
    var probeTimeout = 5.0

    @Option(name: .customLong("max-probes"),
            help: "Probe handshakes in flight at once, process-wide; more wait in line, and one that has waited longer than --probe-timeout when a slot frees fails (probe_failed). With 16 or more, one client (an IPv4 address, an IPv6 /64) may have a quarter of them in flight or waiting; past that its next new probe fails at once.")
    var maxProbes = 256

    @Option(name: .customLong("spot-check-rate"),
            help: "Spot checks a second per upstream in use (a tunnel relied on its cached TLS 1.3 probe in the last 30 s; at most one check per such tunnel): probes made afresh at random times, with the mirrored hello of a recent client; a chain other than the cached one is judged like a tunnel's (evidence spot_check). A forger who forges every connection for t seconds of use goes unseen with probability e^(-rate*t): 0.03 % after 20 s at the default. 0 turns them off.")
    var spotCheckRate = SpotChecker.defaultRate

    @Option(name: .customLong("spot-check-beside"),
            help: "The fraction of spot checks made beside the next tunnel to the upstream from the client the check was drawn for (one of those that used the upstream in the last 30 s, each as likely; its address, an IPv6 one by its /64, and its CONNECT's User-Agent; after 10 s from any), on a spare connection opened at that CONNECT, the check's hello sent just before the client's, instead of at the moment drawn. Beside a tunnel a check is met by a forger who forges connections with no twin before them; alone, by one who spares connections that come in pairs. 0 with --no-spare-connections.")
    var spotCheckBeside = SpotChecker.defaultBesideFraction

    @Option(name: .customLong("large-handshake-memory"),
            help: "MiB all tunnels and probes may hold at once for server handshake messages over 224 KiB (Certificate messages up to the protocol's 16 MiB; real chains stop near 210 KB). One that finds no room is oversized_handshake (under block: the client gets nothing). 0 reads none.")
    var largeHandshakeMemory = Inspector.defaultLargeHandshakeMemory >> 20

    @Option(name: .customLong("cache-memory"),
            help: "MiB the caches of chains may hold: half for cached verdicts (an eighth of that for known-bad marks), half for probe results. Past it the expired entries go, then the oldest (probes), any (verdicts) or the soonest to expire (marks); a chain of thousands of names weighs hundreds of KB, a usual one a few KB.")
    var cacheMemory = (VerdictCache.defaultMaxBytes + Prober.defaultMaxBytes) >> 20

    @Option(name: .customLong("held-memory"),
            help: "MiB all tunnels together may hold until their verdicts (a server's bytes under block, a client's until its ClientHello is whole), counted in 16 KiB steps; the tunnels of one client (an IPv4 address, an IPv6 /64) at most a quarter of it. A tunnel that finds no room is closed before any held byte passes (logged, access line no_held_room; no known-bad mark: a resource limit, not a finding).")
    var heldMemory = HeldBytesBudget.defaultCapacity >> 20

    @Option(name: .customLong("allow-client"), help: "A client network allowed to connect (CIDR, repeatable). Required to listen on a non-loopback address; default: loopback only.")
    var allowClient: [String] = []

    @Option(name: .customLong("allow-destination"),
            help: ArgumentHelp("A network requests may reach although refused by default (repeatable), e.g. 127.0.0.0/8.",
                               discussion: "Refused by default: link-local (169.254.0.0/16: cloud metadata services; fe80::/10), other metadata addresses, unspecified, multicast and broadcast, loopback when --listen is not a loopback address, and a host name DNS or the system hosts file maps to loopback (DNS rebinding; loopback literals, localhost and names in --hosts stay allowed); always: the proxy's own listeners (--listen, --admin, --socks and --transparent; for a wildcard address, on every address the host had at start). Checked on the resolved addresses, so names that resolve there are refused too (403)."))
    var allowDestination: [String] = []

    @Option(name: .customLong("deny-destination"), help: "A network requests may not reach, beyond the defaults (repeatable), e.g. 10.0.0.0/8.")
    var denyDestination: [String] = []

    @Option(name: .customLong("allow-port"), help: "A port CONNECT and plain HTTP may reach (repeatable; default: any).")
    var allowPort: [UInt16] = []

    @Option(name: .customLong("max-connections"), help: "Most connections open at once, client connections and probe handshakes together; more clients get 503.")
    var maxConnections = 10_000

    @Option(name: .customLong("connect-timeout"), help: "Seconds to connect upstream before 504.")
    var connectTimeout = 10.0

    @Option(name: .customLong("request-timeout"), help: "Seconds for a client to send its request head before 408 (counted from its first byte, or from about 1 s after it connected when it sends nothing), and for an upstream to finish a plain-HTTP response head once it has begun it (504).")
    var requestTimeout = 10.0

    @Option(name: .customLong("idle-timeout"), help: "Seconds a tunnel may carry no bytes before it is closed.")
    var idleTimeout = 300.0

    @Option(name: .customLong("half-closed-timeout"), help: "Seconds a connection one side has ended (half-closed) may carry no bytes before it is closed.")
    var halfClosedTimeout = 30.0

    @Option(help: "Seconds tunnels may take to finish after SIGTERM/SIGINT.")
    var grace = 10.0

    @Flag(name: .customLong("no-spare-connections"),
          help: "Open no spare connection beside a tunnel's at its CONNECT (alert rules, a client's first tunnel to an address in 5 minutes): a TLS 1.3 first contact's probe then connects once the client's hello is in, after the tunnel's, every time, and an interceptor can tell the two apart by their order; every spot check is then made alone (--spot-check-beside 0). For upstreams that allow one connection per client address.")
    var noSpareConnections = false

    @Flag(name: .customLong("no-splice"), help: "Copy bulk tunnel bytes through the proxy instead of splice(2) (for comparison).")
    var noSplice = false

    @Option(name: .customLong("admin"), help: ArgumentHelp("The admin listener, ADDR:PORT, or off.",
            discussion: "GET /metrics (Prometheus), /healthz, /readyz, /state; POST /known-bad/clear, /verdicts/clear, /probes/clear (see chainwatch ctl). Clients as for the proxy port (--allow-client). At most 64 connections at once (503 past them), one request each, which must be in within 5 s (408). The default address, when another process has it, is skipped with a warning; an address given here must be free."))
    var admin = Run.defaultAdmin
    static let defaultAdmin = "127.0.0.1:9128"

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    func validate() throws {
        guard SocketAddress(numeric: listen) != nil else { throw ValidationError("--listen: \(listen) is not ADDR:PORT or [V6]:PORT") }
        for address in socks where SocketAddress(numeric: address) == nil { throw ValidationError("--socks: \(address) is not ADDR:PORT or [V6]:PORT") }
        for address in transparent where SocketAddress(numeric: address) == nil {
            throw ValidationError("--transparent: \(address) is not ADDR:PORT or [V6]:PORT")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level \(logLevel)") }
        for c in allowClient where CIDR(c) == nil { throw ValidationError("--allow-client: \(c) is not a CIDR network") }
        for c in allowDestination where CIDR(c) == nil { throw ValidationError("--allow-destination: \(c) is not a CIDR network") }
        for c in denyDestination where CIDR(c) == nil { throw ValidationError("--deny-destination: \(c) is not a CIDR network") }
        guard (threads ?? 1) >= 1 else { throw ValidationError("--threads must be at least 1") }
        guard maxProbes >= 1 else { throw ValidationError("--max-probes must be at least 1") }
        guard spotCheckRate >= 0, spotCheckRate <= 100 else { throw ValidationError("--spot-check-rate must be between 0 and 100") }
        guard spotCheckBeside >= 0, spotCheckBeside <= 1 else { throw ValidationError("--spot-check-beside must be between 0 and 1") }
        guard (0...65_536).contains(largeHandshakeMemory) else { throw ValidationError("--large-handshake-memory must be 0 to 65536 (MiB)") }
        guard (1...65_536).contains(cacheMemory) else { throw ValidationError("--cache-memory must be 1 to 65536 (MiB)") }
        guard (1...65_536).contains(heldMemory) else { throw ValidationError("--held-memory must be 1 to 65536 (MiB)") }
        guard admin == "off" || SocketAddress(numeric: admin) != nil else { throw ValidationError("--admin: \(admin) is not ADDR:PORT, [V6]:PORT or off") }
        guard maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1") }
        guard socksCredentials == nil || !socks.isEmpty else {
            throw ValidationError("--socks-credentials needs a --socks listener (nothing would ask for them)")
        }
        // Seconds become milliseconds in an Int: a value that is not a number, infinite or past a week would not fit
        // (it stopped the process at start), and a zero timeout closes what it times at once.
        let week = 7 * 86_400.0
        for (option, seconds) in [("--probe-timeout", probeTimeout), ("--connect-timeout", connectTimeout),
                                  ("--request-timeout", requestTimeout), ("--idle-timeout", idleTimeout),
                                  ("--half-closed-timeout", halfClosedTimeout)] where !(seconds > 0 && seconds <= week) {
            throw ValidationError("\(option) must be more than 0 and at most \(Int(week)) seconds (a week), not \(seconds)")
        }
        guard grace >= 0, grace <= 3600 else { throw ValidationError("--grace must be 0 to 3600 seconds, not \(grace)") }
    }

    func run() throws {
        // First of all OpenSSL calls: no exit handler freeing what a validation thread may still use.
        _ = OpenSSLLibrary.initializeWithoutExitCleanup()
        // Until the control loop watches them (after the policy, the trust stores and the listeners are up), a reload
        // or reopen signal has nothing to do, and its default action would kill the process: it is ignored.
        signal(SIGHUP, SIG_IGN)
        signal(SIGUSR1, SIG_IGN)
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { label in
            var handler = EscapingLogHandler(StreamLogHandler.standardError(label: label))
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "chainwatch")
        if BuiltinECKeys.register() {
            logger.debug("EC keys in certificates are decoded through OpenSSL's built-in EC method")
        } else {
            logger.warning("OpenSSL refused the built-in EC method for certificates' keys: they are decoded through its provider decoders (correct, slower)")
        }
        var configuration = ProxyConfiguration(
            listen: SocketAddress(numeric: listen)!, threads: loopCount, hostsFile: hosts,
            allowedClients: allowClient.compactMap(CIDR.init), allowedPorts: Set(allowPort), maxConnections: maxConnections)
        configuration.socks = socks.compactMap { SocketAddress(numeric: $0) }
        if let socksCredentials {
            guard let text = try? String(contentsOfFile: socksCredentials, encoding: .utf8) else {
                throw CLIError("--socks-credentials: cannot read \(socksCredentials)")
            }
            do { configuration.socksCredentials = try Socks5.Credentials(text: text, path: socksCredentials) } catch {
                throw CLIError("--socks-credentials: \(error)")
            }
        }
        configuration.transparent = transparent.compactMap { SocketAddress(numeric: $0) }
        configuration.connectTimeoutMilliseconds = Int(connectTimeout * 1000)
        configuration.requestTimeoutMilliseconds = Int(requestTimeout * 1000)
        configuration.idleTimeoutMilliseconds = Int(idleTimeout * 1000)
        configuration.halfClosedTimeoutMilliseconds = Int(halfClosedTimeout * 1000)
        configuration.shutdownGraceMilliseconds = Int(grace * 1000)
        configuration.spliceBulk = !noSplice
        configuration.spareConnections = !noSpareConnections
        configuration.heldMemory = heldMemory << 20
        configuration.allowedDestinations = allowDestination.compactMap(CIDR.init)
        configuration.deniedDestinations = denyDestination.compactMap(CIDR.init)
        configuration.adminAddress = admin == "off" ? nil : SocketAddress(numeric: admin)
        let inspector: Inspector
        let reloader: PolicyReloader
        do {
            try configuration.validate()
            let extraAnchors = try ca.map { try caCertificates(inPEMFile: $0, option: "--ca") } ?? []
            reloader = try PolicyReloader(path: policy, extraAnchors: extraAnchors, publicRoots: try loadPublicRoots(logger),
                                          logger: logger)
            let cache = VerdictCache(maxBytes: cacheMemory << 19)   // half of it
            reloader.cache = cache
            let alerts = try AlertWriter(path: alertLog, logger: logger)
            let access = try accessLog.map { try AlertWriter(path: $0, logger: logger, name: "access log") }
            if let access, access.isSameFile(as: alerts) {
                // Two kinds of line in one file: a SIEM rule for findings would read every tunnel's access line; and two
                // writers on one pipe (both `-`): a write over PIPE_BUF can interleave with the other's, mid-line.
                throw ValidationError("--access-log \(access.path) is the alert log's file\(access.path == "-" ? " (standard output)" : ""): give it a file of its own")
            }
            let largeHandshakes = LargeHandshakeRoom(capacity: largeHandshakeMemory << 20)
            let prober = Prober(timeoutMilliseconds: Int(probeTimeout * 1000), maxBytes: cacheMemory << 19,
                                maxInFlight: min(maxProbes, maxConnections), largeHandshakes: largeHandshakes)
            let known = try intermediates.map { try certificates(inPEMFile: $0, option: "--intermediates") } ?? []
            inspector = Inspector(policies: reloader.store, cache: cache, prober: prober,
                                  spotChecker: SpotChecker(ratePerSecond: spotCheckRate,
                                                           besideFraction: noSpareConnections ? 0 : spotCheckBeside), alerts: alerts, accessLog: access, logger: logger,
                                  observer: Observer(hostname: ProcessInfo.processInfo.hostName,
                                                     admin: admin == Run.defaultAdmin || admin == "off" ? nil : admin),
                                  intermediates: IntermediatePool(loaded: known), validations: ValidationQueue(threads: loopCount),
                                  largeHandshakes: largeHandshakes)
        } catch {
            FileHandle.standardError.write(Data("chainwatch: \(error)\n".utf8))
            throw ExitCode(1)
        }
        let server = ProxyServer(configuration: configuration, inspector: inspector, logger: logger)
        do {
            try server.start()
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        var adminServer: AdminServer?
        var adminText = "off"
        if admin != "off", let address = SocketAddress(numeric: admin) {
            do {
                adminServer = try AdminServer(address: address, server: server, reloader: reloader, logger: logger)
                adminText = "\(adminServer!.address)"
            } catch {
                guard admin == Run.defaultAdmin else {
                    logger.critical("cannot start: --admin \(admin): \(error)")
                    server.shutdown()
                    throw ExitCode(1)
                }
                // Not fatal (a second proxy on one host, as the tests run many, would not start), but said in the
                // start-up line itself: `chainwatch ctl` and a scrape of the default address reach the other process.
                adminText = "NONE: \(admin) is taken by another process (\(error)), so `chainwatch ctl` and /metrics at "
                    + "\(admin) reach that process, not this one (pid \(getpid())); pass --admin ADDR:PORT, or --admin off"
                logger.error("no admin listener: \(adminText)")
            }
        }
        logger.notice("chainwatch \(Observer.version) pid \(getpid()): proxy on \(server.configuration.listen), admin \(adminText); policy: \(reloader.store.snapshot.source); alerts: \(alertLog == "-" ? "standard output" : alertLog)")
        // systemd (Type=notify): ready once listening; a watchdog keep-alive each second while every loop beats (a
        // stuck loop stops them, and systemd restarts the service after WatchdogSec=); stopping at SIGTERM.
        let systemd = ServiceNotifier(environment: ProcessInfo.processInfo.environment)
        systemd.notify("READY=1\nSTATUS=listening on \(server.configuration.listen)\nMAINPID=\(getpid())")
        let watchdog = systemd.watchdogMilliseconds != nil
        try server.runUntilSignalled(onSignal: [
            (SIGHUP, {
                systemd.notify("RELOADING=1")
                reloader.reload()
                systemd.notify("READY=1\nSTATUS=policy generation \(reloader.store.snapshot.generation)")
            }),
            (SIGUSR1, { inspector.alerts.reopen(); inspector.accessLog?.reopen() }),
        ], every: watch || watchdog ? {
            if watch { reloader.reloadIfChanged() }
            if watchdog, server.stuckLoops.isEmpty { systemd.notify("WATCHDOG=1") }
        } : nil, onDrain: { systemd.notify("STOPPING=1\nSTATUS=draining") })
        withExtendedLifetime(adminServer) {}
        // Lines a full disk kept from their file went to standard error: said by the exit status too.
        if server.linesLostToTheirFiles > 0 { throw ExitCode(1) }
    }
}

extension Run {
    /// The public root set `--public-roots` names; the default one may be missing (a warning), a named one may not.
    func loadPublicRoots(_ logger: Logger) throws -> PublicRoots? {
        if publicRoots == "none" { return nil }
        let path = publicRoots ?? PublicRoots.debianDirectory
        do {
            let roots = try PublicRoots.load(path: path)
            logger.info("public roots: \(roots.count) from \(path)")
            return roots
        } catch {
            guard publicRoots == nil else { throw CLIError("--public-roots: \(error)") }
            logger.warning("no public root set (\(error)): system roots are not told apart from roots added to this machine, and local_root is never raised; install ca-certificates or pass --public-roots")
            return nil
        }
    }
}

/// The certificates of a PEM file an option names; a file that cannot be read, or holds none, is an error naming both.
func certificates(inPEMFile path: String, option: String) throws -> [Certificate] {
    guard let pem = FileManager.default.contents(atPath: path) else { throw CLIError("cannot read \(option) \(path)") }
    let certificates: [Certificate]
    do { certificates = try Certificate.parsePEM(Array(pem)) } catch {
        throw CLIError("\(option) \(path): not PEM certificates (\(error))")
    }
    guard !certificates.isEmpty else { throw CLIError("\(option) \(path): no certificate in the file") }
    return certificates
}

/// `certificates(inPEMFile:option:)`, each a CA by the check a policy's anchors get (`AnchorInspector.builtIn`): a
/// server's own certificate given as a trust anchor was accepted silently, and anchored nothing it signed.
func caCertificates(inPEMFile path: String, option: String) throws -> [Certificate] {
    let found = try certificates(inPEMFile: path, option: option)
    for (index, certificate) in found.enumerated() {
        let which = found.count > 1 ? " (certificate \(index + 1), \(certificate.facts.subject))" : " (\(certificate.facts.subject))"
        switch AnchorInspector.builtIn.inspect(certificate.der) {
        case .ca: continue
        case .notCA:
            throw CLIError("\(option) \(path)\(which): not a CA certificate (basicConstraints CA:FALSE or absent); to trust one server's own certificate, pin it in the policy instead")
        case .unusable(let why):
            throw CLIError("\(option) \(path)\(which): \(why)")
        }
    }
    return found
}

struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
