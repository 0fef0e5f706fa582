"""Chains real servers send that are large: a 75 KB leaf (badssl's 1000-sans kind, which curl accepts) and a 210 KB
one (10000-sans). Both are genuine (genuine.test under the test PKI's intermediate) and must raise nothing, over TLS 1.2
(read in the tunnel) and TLS 1.3 (read by the probe), under block and alert. Past what a tunnel (224 KiB) or a probe
(512 KiB) reads by default, Certificate messages up to the protocol's 16 MiB are read with room from
--large-handshake-memory (64 MiB for all tunnels): a 1 MB chain passes too. A message that finds no room is its own
reason, oversized_handshake, never untrusted_chain; under block the client gets none of it."""
import socket
import ssl
import subprocess
import threading
import time

import pytest

from helpers import (HTTPServer, OpenSSLServer, TCPServer, assert_no_alert_lines, block_everything, curl_genuine, free_port,
                     read_alert_lines, start_own_anchor_proxy, wait_alert_lines)
from test_admin import metrics, value
from test_hostile_servers import handshake, record
from test_tls13_adversary import closing  # noqa: F401 (fixtures)


def big_leaf(pki, directory, names):
    """genuine.test with `names` extra DNS names, signed by the genuine intermediate; returns (fullchain, key)."""
    key, csr, cert = directory / f"big{names}.key", directory / f"big{names}.csr", directory / f"big{names}.pem"
    ext = directory / f"big{names}.ext"
    sans = ",".join(["DNS:genuine.test"] + [f"DNS:host{i:05d}.genuine.test" for i in range(names)])
    ext.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
                   f"subjectAltName={sans}\n")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "req", "-new", "-key", str(key), "-subj", "/O=Chainwatch Test/CN=genuine.test",
                    "-out", str(csr)], check=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "genuine-intermediate.pem"), "-CAkey",
                    str(pki / "genuine-intermediate.key"), "-set_serial", str(70000 + names), "-days", "30",
                    "-extfile", str(ext), "-out", str(cert)], check=True, capture_output=True)
    full = directory / f"big{names}.fullchain.pem"
    full.write_text(cert.read_text() + (pki / "genuine-intermediate.pem").read_text())
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "DER"], check=True, capture_output=True).stdout
    return full, key, len(der)


@pytest.fixture(scope="module")
def leaves(pki, tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    made = {"75k": big_leaf(pki, d, 3100), "210k": big_leaf(pki, d, 8700), "240k": big_leaf(pki, d, 10000),
            "1m": big_leaf(pki, d, 43000)}
    sizes = {k: v[2] for k, v in made.items()}
    assert 70_000 < sizes["75k"] < 80_000 and 200_000 < sizes["210k"] < 220_000 and 235_000 < sizes["240k"], sizes
    assert 1_000_000 < sizes["1m"] < 1_100_000, sizes
    return made


def start(start_proxy, tmp_path, pki, action, *extra):
    return start_own_anchor_proxy(start_proxy, tmp_path, pki, action, probe_timeout=5, extra=extra)


def server_bytes_through(proxy, port, tls, want, timeout=10, alpn=None):
    """A TLS client (Python's ssl over memory BIOs) through the proxy that counts the server's raw bytes until
    `want` arrived or the connection ends. OpenSSL's client refuses a Certificate over 100 KiB itself; the count is
    what tells whether chainwatch passed the server's flight."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    try:
        sock.sendall(f"CONNECT genuine.test:{port} HTTP/1.1\r\nHost: genuine.test:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(1)
            assert chunk, f"the proxy closed before answering the CONNECT: {head!r}"
            head += chunk
        assert head.startswith(b"HTTP/1.1 200"), head
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ctx.maximum_version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[tls]
        if alpn:
            ctx.set_alpn_protocols([alpn])
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls_obj = ctx.wrap_bio(incoming, outgoing, server_hostname="genuine.test")
        received = 0
        deadline = time.monotonic() + timeout
        while received < want and time.monotonic() < deadline:
            try:
                tls_obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                pass   # the client's own 100 KiB limit, once the Certificate is in: keep counting the bytes
            data = outgoing.read()
            if data:
                sock.sendall(data)
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += len(chunk)
            incoming.write(chunk)
        return received
    finally:
        sock.close()


@pytest.mark.parametrize("size", ["75k", "210k"])
@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_large_genuine_chain_reaches_the_client_and_raises_nothing(start_proxy, tmp_path, pki, leaves, closing, size,
                                                                     tls, action):
    full, key, length = leaves[size]
    server = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls=tls))
    proxy = start(start_proxy, tmp_path, pki, action)
    assert server_bytes_through(proxy, server.port, tls, want=length) >= length   # under block: after a passing verdict
    if size == "75k":   # within curl's own limit: the whole exchange, validated by curl too
        r = curl_genuine(proxy, server.port, pki / "genuine-root.pem", tls)
        assert r.returncode == 0 and r.stdout == b"hello from upstream\n", r.stderr
    assert_no_alert_lines(proxy, server.port)


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_megabyte_chain_is_read_with_room_and_raises_nothing(start_proxy, tmp_path, pki, leaves, closing, tls, action):
    """Past the default limits (224 KiB in the tunnel, 512 KiB for the probe, which then handshakes again with room
    for 16 MiB): read, judged genuine, passed whole."""
    full, key, length = leaves["1m"]
    server = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls=tls))
    proxy = start(start_proxy, tmp_path, pki, action)
    assert server_bytes_through(proxy, server.port, tls, want=length, timeout=20) >= length
    assert_no_alert_lines(proxy, server.port)


@pytest.mark.parametrize("tls,size", [("1.2", "240k"), ("1.3", "1m")])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_certificate_without_room_is_oversized_handshake(start_proxy, tmp_path, pki, leaves, closing, tls, size, action):
    """--large-handshake-memory 0: nothing past the default limits is read (the tunnel's 224 KiB, the probe's 512 KiB)."""
    full, key, length = leaves[size]
    server = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls=tls))
    proxy = start(start_proxy, tmp_path, pki, action, "--large-handshake-memory", "0")
    received = server_bytes_through(proxy, server.port, tls, want=length)
    lines = []
    deadline = time.monotonic() + 3
    while not lines and time.monotonic() < deadline:
        lines = read_alert_lines(proxy.alert_log, server.port)
        time.sleep(0.05)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("oversized_handshake", action)]
    assert "--large-handshake-memory" in lines[0]["message"], lines[0]["message"]
    if action == "block":
        assert received < length   # fails closed: the chain could not be judged
    else:
        assert received >= length


def metric(admin, name, **labels):
    return value(metrics(admin), name, **labels)


def verdicts(admin):
    """Each verdict reported so far, as (action, reason, evidence) with its count."""
    return {(dict(labels)["action"], dict(labels)["reason"], dict(labels)["evidence"]): n
            for (name, labels), n in metrics(admin).items() if name == "chainwatch_verdicts_total" and n}


@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_megabyte_chain_over_tls13_passes_on_a_server_of_one_connection_at_a_time(start_proxy, tmp_path, pki, leaves,
                                                                                     closing, action):
    """`openssl s_server` serves one connection at a time. Under block the probe and the tunnel's new connection go
    together (when the server takes the tunnel's first, the tunnel gives it up for the probe and connects again); a
    1 MB chain is too large for the probe cache, so the tunnel holds that result (with room) for its own ServerHello. Before, the tunnel probed again while it held the server's only connection:
    that probe timed out and the genuine chain was blocked (probe_failed). Two tunnels in turn, each judged with one
    probe of its own, and the room given back."""
    full, key, length = leaves["1m"]
    leaf = full.with_name(full.name.replace(".fullchain.pem", ".pem"))
    server = closing(OpenSSLServer(leaf, key, chain=pki / "genuine-intermediate.pem", tls="1.3"))
    admin = free_port()
    proxy = start(start_proxy, tmp_path, pki, action, "--admin", f"127.0.0.1:{admin}")
    for n in (1, 2):
        assert server_bytes_through(proxy, server.port, "1.3", want=length, timeout=20) >= length
        deadline = time.monotonic() + 10   # under alert the probe runs once the client has let the server go
        while sum(verdicts(admin).values()) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert verdicts(admin) == {("pass", "none", "probe"): n}, read_alert_lines(proxy.alert_log)
    assert_no_alert_lines(proxy, server.port)
    assert metric(admin, "chainwatch_probes_started_total") == 2
    assert metric(admin, "chainwatch_probes_finished_total", result="failed") == 0
    assert metric(admin, "chainwatch_large_handshake_bytes") == 0


def announcing_sixteen_mebibytes(conn):
    """A TLS 1.2 ServerHello, then a Certificate announcing the protocol's largest body (16 MiB - 1), of which it
    sends one record and then nothing: what a hostile server does to make a proxy reserve memory."""
    conn.recv(65536)   # the ClientHello
    hello = handshake(2, b"\x03\x03" + b"\x42" * 32 + b"\x00" + b"\xc0\x2b\x00" + b"\x00\x00")
    first = b"\x0b" + (0xFFFFFF).to_bytes(3, "big") + (0xFFFFFC).to_bytes(3, "big") + b"\x30" * 16000
    conn.sendall(record(22, hello) + record(22, first))
    time.sleep(8)


def test_room_is_shared_by_all_tunnels_and_given_back_at_the_verdict(start_proxy, tmp_path, closing):
    """Under block a 16 MiB message needs three copies' room (read, validated, held: 48 MiB of the default 64): the
    first tunnel gets it, a second at the same time does not (oversized_handshake at once, no server byte), and once
    the first ends at its verdict deadline (handshake_timeout) the room is free again for a third."""
    server = closing(TCPServer(announcing_sixteen_mebibytes))
    hosts, policy = block_everything(tmp_path, "huge.test")
    admin = free_port()
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", "2", "--admin", f"127.0.0.1:{admin}")

    def curl():
        return subprocess.Popen(["curl", "-sk", "--tls-max", "1.2", "--max-time", "10", "-x", proxy.url,
                                 f"https://huge.test:{server.port}/"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    first = curl()
    deadline = time.monotonic() + 5
    while metric(admin, "chainwatch_large_handshake_bytes") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    held = metric(admin, "chainwatch_large_handshake_bytes")
    assert held == 3 * (0xFFFFFF + 65536), held
    second = curl()
    out, _ = second.communicate(timeout=15)
    assert second.returncode != 0 and out == b""
    lines = wait_alert_lines(proxy.alert_log, server.port, 1, timeout=3)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("oversized_handshake", "block")]
    out, _ = first.communicate(timeout=15)
    assert first.returncode != 0 and out == b""
    lines = wait_alert_lines(proxy.alert_log, server.port, 2, timeout=3)
    assert sorted(l["event"]["reason"] for l in lines) == ["handshake_timeout", "oversized_handshake"]
    assert metric(admin, "chainwatch_large_handshake_bytes") == 0
    third = curl()
    third.communicate(timeout=15)
    lines = wait_alert_lines(proxy.alert_log, server.port, 3, timeout=3)
    assert sorted(l["event"]["reason"] for l in lines) == ["handshake_timeout", "handshake_timeout", "oversized_handshake"]
    assert metric(admin, "chainwatch_large_handshakes_total", result="granted") == 2
    assert metric(admin, "chainwatch_large_handshakes_total", result="refused") == 1
    assert metric(admin, "chainwatch_large_handshake_bytes") == 0


def client_hello(tls="1.3"):
    """The first flight of Python's TLS client (a ClientHello offering `tls`) for genuine.test."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[tls]
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    try:
        ctx.wrap_bio(incoming, outgoing, server_hostname="genuine.test").do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def open_tunnel(proxy, port):
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.sendall(f"CONNECT genuine.test:{port} HTTP/1.1\r\nHost: genuine.test:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, f"the proxy closed before answering the CONNECT: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def relay(conn, first, backend_port, pause_after=None, pause=0.0):
    """Relays a connection whose first bytes were `first` to a server on `backend_port`; the server's bytes stop for
    `pause` seconds once `pause_after` of them have been passed."""
    upstream = socket.create_connection(("127.0.0.1", backend_port))
    upstream.sendall(first)

    def back():
        passed, paused = 0, pause_after is None
        try:
            while data := upstream.recv(16384):
                if not paused and passed + len(data) >= pause_after:
                    conn.sendall(data[:pause_after - passed])
                    data, passed, paused = data[pause_after - passed:], pause_after, True
                    time.sleep(pause)
                conn.sendall(data)
                passed += len(data)
        except OSError:
            pass
    threading.Thread(target=back, daemon=True).start()
    try:
        while data := conn.recv(65536):
            upstream.sendall(data)
    except OSError:
        pass
    upstream.close()


class GenuineThenSilent:
    """In front of a genuine TLS server: the first `relayed` connections that send bytes (chainwatch's probe, made
    first under block: for a 1 MB chain one handshake that stops at 512 KiB and one with room for 2 MiB) are relayed
    to it; every later one is read and never answered, as long as it stays open. With `silent_for`, the connection
    that carries exactly those bytes (the test client's own ClientHello: the tunnel, not the probe, whose hello has
    its own random) is the one never answered, whenever it comes, and every other is relayed."""

    def __init__(self, backend_port, relayed, silent_for=None):
        self.backend_port = backend_port
        self.lock = threading.Lock()
        self.left = relayed
        self.silent_for = silent_for

    def __call__(self, conn):
        first = conn.recv(65536)
        if not first:
            return
        with self.lock:
            if self.silent_for is not None:
                relayed = not (len(first) >= 43 and self.silent_for.startswith(first))
            else:
                relayed = self.left > 0
                self.left -= 1
        if not relayed:
            while conn.recv(65536):
                pass
            return
        relay(conn, first, self.backend_port)


def test_a_kept_probe_chain_gives_its_room_back_when_the_server_then_says_nothing(start_proxy, tmp_path, pki, leaves,
                                                                                  closing):
    """Under block a TLS 1.3 tunnel at first contact holds its paired probe's 1 MB chain, with room, until its own
    ServerHello and flight. A server that answers the probe, takes the tunnel's connection and sends nothing (its
    client keeping the tunnel open) must not hold that room for as long as the tunnel lasts: from the probe's answer
    on, the server has the flight deadline (--probe-timeout) to show its handshake; then handshake_timeout, and the
    room goes back."""
    full, key, length = leaves["1m"]
    genuine = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls="1.3"))
    hello = client_hello("1.3")
    server = closing(TCPServer(GenuineThenSilent(genuine.port, relayed=0, silent_for=hello)))
    admin = free_port()
    proxy = start_own_anchor_proxy(start_proxy, tmp_path, pki, "block", probe_timeout=2,
                                   extra=("--admin", f"127.0.0.1:{admin}"))
    sock = open_tunnel(proxy, server.port)
    try:
        sock.sendall(hello)
        deadline = time.monotonic() + 10   # the probe's own room (6 MiB, for its handshake with room for 2 MiB) first
        while (metric(admin, "chainwatch_large_handshakes_total", result="granted") < 2
               or metric(admin, "chainwatch_probes_in_flight") > 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert metric(admin, "chainwatch_large_handshake_bytes") > length   # the kept chain's room
        lines = wait_alert_lines(proxy.alert_log, server.port, 1, timeout=8)
        assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("handshake_timeout", "block")]
        assert metric(admin, "chainwatch_large_handshake_bytes") == 0
        sock.settimeout(3)
        assert sock.recv(65536) == b""   # blocked: closed, no server byte
    finally:
        sock.close()


def test_a_client_that_leaves_while_the_probe_made_first_runs_still_gets_its_verdict_reported(start_proxy, tmp_path,
                                                                                             pki, closing):
    """Under block, a TLS 1.3 ClientHello sends the probe first. A client that closes at once leaves the inspection
    waiting for the probe and its judgement; that verdict must still be reported, once (counted, and logged when it
    has a finding). Here the machine still delivers the held ClientHello on the reconnect, so the tunnel's own
    ServerHello comes and the verdict is the cached one; when the tunnel is gone before the judgement ends, the
    judgement is the verdict (that ordering is not forced here)."""
    server = closing(HTTPServer(certfile=str(pki / "genuine.fullchain.pem"), keyfile=str(pki / "genuine.key"), tls="1.3"))
    admin = free_port()
    proxy = start_own_anchor_proxy(start_proxy, tmp_path, pki, "block", probe_timeout=2,
                                   extra=("--admin", f"127.0.0.1:{admin}"))
    sock = open_tunnel(proxy, server.port)
    sock.sendall(client_hello("1.3"))
    sock.close()
    deadline = time.monotonic() + 8
    while not verdicts(admin) and time.monotonic() < deadline:
        time.sleep(0.05)
    found = verdicts(admin)
    assert sum(found.values()) == 1 and list(found)[0][:2] == ("pass", "none"), found
    assert metric(admin, "chainwatch_probes_started_total") == 1


def test_probe_results_stay_within_the_cache_memory(start_proxy, tmp_path, pki, leaves, closing):
    """--cache-memory bounds the caches by what their entries hold, not only by their count: 60 TLS 1.3 tunnels, each
    with an offer of its own (another ALPN name), leave 60 probe results of a 210 KB chain (12 MB); with
    --cache-memory 16 the probe results may hold 8 MiB, and the oldest go. Every tunnel still passes, quietly."""
    full, key, length = leaves["210k"]
    server = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls="1.3"))
    admin = free_port()
    proxy = start(start_proxy, tmp_path, pki, "alert", "--cache-memory", "16", "--admin", f"127.0.0.1:{admin}")
    for n in range(60):
        assert server_bytes_through(proxy, server.port, "1.3", want=length, alpn=f"p{n}") >= length
    deadline = time.monotonic() + 10
    while metric(admin, "chainwatch_probes_finished_total", result="chain") < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert metric(admin, "chainwatch_probes_finished_total", result="chain") == 60
    held, entries = metric(admin, "chainwatch_cache_bytes", cache="probes"), metric(admin, "chainwatch_cache_entries", cache="probes")
    assert 4 << 20 < held <= 8 << 20, held
    assert 15 < entries < 40, entries
    assert_no_alert_lines(proxy, server.port)


def test_a_client_that_leaves_mid_flight_raises_nothing(start_proxy, tmp_path, pki, leaves, closing):
    """Under alert, a TLS 1.3 client that reads 64 KB of a genuine server's 1 MB flight and closes (as OpenSSL's client
    does once a Certificate passes its 100 KiB, or when it refuses a chain) leaves a tunnel whose flight is short of
    the probe's, every record so far alike. That is no sign of interception: judged by the probe, it passes, with no
    alert line. Before, it was evidence_mismatch ("stopped after N of the probe's M records")."""
    full, key, length = leaves["1m"]
    genuine = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls="1.3"))

    def pausing(conn):   # the flight stops a second after 64 KB: the client is gone before the rest comes
        first = conn.recv(65536)
        if first:
            relay(conn, first, genuine.port, pause_after=64 * 1024, pause=1.0)
    server = closing(TCPServer(pausing))
    admin = free_port()
    proxy = start(start_proxy, tmp_path, pki, "alert", "--admin", f"127.0.0.1:{admin}")
    assert server_bytes_through(proxy, server.port, "1.3", want=60 * 1024) >= 60 * 1024
    deadline = time.monotonic() + 10
    while not verdicts(admin) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert verdicts(admin) == {("pass", "none", "probe"): 1}, read_alert_lines(proxy.alert_log)
    assert_no_alert_lines(proxy, server.port)
