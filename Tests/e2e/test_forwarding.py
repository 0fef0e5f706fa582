"""The forwarding core, end to end: real curl, openssl and Python servers through the real proxy on loopback."""
import hashlib
import os
import select
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from admin_helpers import admin_get

from conftest import Proxy
from helpers import (HTTPServer, OpenSSLServer, TCPServer, connect_via, echo_handler, free_port, make_chain,
                     raw_request, read_head, read_response, recv_exactly)

MIB = 1 << 20


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    p = Proxy(["--request-timeout", "2", "--connect-timeout", "1", "--idle-timeout", "30"], tmp_path_factory.mktemp("proxy"))
    time.sleep(0.2)
    p.baseline_fds = p.fd_count()
    yield p
    p.stop()


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return make_chain(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def blob():
    return os.urandom(64 * MIB)


@pytest.fixture(scope="module")
def https_server(chain, blob):
    leaf, key, inter, _ = chain
    full = os.path.join(os.path.dirname(leaf), "fullchain.pem")
    s = HTTPServer(blob=blob, certfile=full, keyfile=key)
    yield s
    s.close()


@pytest.fixture(scope="module")
def http_server(blob):
    s = HTTPServer(blob=blob)
    yield s
    s.close()


@pytest.fixture(scope="module")
def echo_server():
    s = TCPServer(echo_handler)
    yield s
    s.close()


def curl(*args, timeout=60):
    return subprocess.run(["curl", "-sS", "--max-time", str(timeout), *args], capture_output=True, timeout=timeout + 5)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_curl_through_tunnel_to_openssl_server(proxy, chain, version):
    leaf, key, inter, _ = chain
    server = OpenSSLServer(leaf, key, chain=inter, tls=version)
    try:
        r = curl("-k", "-x", proxy.url, f"--tlsv{version}", "--tls-max", version, "-w", "%{ssl_verify_result}",
                 f"https://127.0.0.1:{server.port}/")
        assert r.returncode == 0, r.stderr
        assert b"s_server" in r.stdout
        assert f"Protocol  : TLSv{version}".encode() in r.stdout
    finally:
        server.close()


def test_curl_verifies_chain_through_tunnel(proxy, chain, https_server):
    """A client that validates sees the upstream's real chain: the proxy does not terminate TLS."""
    root = chain[3]
    r = curl("--cacert", root, "-x", proxy.url, "--resolve", f"localhost:{https_server.port}:127.0.0.1",
             f"https://localhost:{https_server.port}/")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from upstream\n"


def test_plain_http_forwarding_adds_via_and_strips_hop_by_hop(proxy, http_server):
    r = curl("-x", proxy.url, "-H", "Proxy-Connection: keep-alive", "-H", "Connection: X-Secret", "-H", "X-Secret: 1",
             "-H", "X-Kept: yes", f"http://127.0.0.1:{http_server.port}/echo-headers")
    assert r.returncode == 0, r.stderr
    headers = r.stdout.decode().lower()
    assert "via: 1.1 chainwatch" in headers
    assert "x-kept: yes" in headers
    assert "proxy-connection" not in headers and "x-secret" not in headers


def test_plain_http_keep_alive_reuses_client_connection(proxy, http_server):
    url = f"http://127.0.0.1:{http_server.port}/"
    r = curl("-v", "-x", proxy.url, url, url, url)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from upstream\n" * 3
    assert r.stderr.count(b"Re-using existing connection") + r.stderr.count(b"Reusing existing") >= 2, r.stderr


def test_plain_http_chunked_response_and_upload(proxy, http_server):
    r = curl("-x", proxy.url, f"http://127.0.0.1:{http_server.port}/chunked")
    assert r.returncode == 0 and r.stdout == b"hello chunked world", r
    body = os.urandom(3 * MIB + 7)
    r = subprocess.run(["curl", "-sS", "-x", proxy.url, "-H", "Transfer-Encoding: chunked", "--data-binary", "@-",
                        f"http://127.0.0.1:{http_server.port}/sha256"], input=body, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == [hashlib.sha256(body).hexdigest(), str(len(body))]


def test_a_chunked_upload_with_a_bare_line_feed_is_refused_and_a_repeated_length_goes_on_as_one(proxy, http_server):
    """A chunk line ended by a bare LF reaches no upstream (400); `Content-Length: 5, 5` goes upstream as
    `Content-Length: 5` (RFC 9110 §8.6), and the body arrives."""
    bare = (f"POST http://127.0.0.1:{http_server.port}/sha256 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n5\nhello\r\n0\r\n\r\n").encode()
    got, head, body = raw_request(proxy.port, bare)
    assert got == 400 and b"malformed chunked request body" in body, (got, head, body)
    repeated = (f"POST http://127.0.0.1:{http_server.port}/sha256 HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n"
                "Connection: close\r\n\r\nhello").encode()
    got, head, body = raw_request(proxy.port, repeated)
    assert got == 200 and body.decode().split() == [hashlib.sha256(b"hello").hexdigest(), "5"], (got, head, body)


def test_plain_http_pipelined_requests_answered_in_order(proxy, http_server):
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        req = f"GET http://127.0.0.1:{http_server.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        s.sendall(req * 3)
        got = b""
        while got.count(b"hello from upstream\n") < 3:
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        assert got.count(b"HTTP/1.1 200") == 3


def test_64_mib_download_through_tunnel(proxy, https_server, blob):
    r = subprocess.run(["curl", "-sSk", "-x", proxy.url, f"https://127.0.0.1:{https_server.port}/blob"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == len(blob)
    assert hashlib.sha256(r.stdout).digest() == hashlib.sha256(blob).digest()


def test_64_mib_upload_through_tunnel(proxy, https_server, blob):
    r = subprocess.run(["curl", "-sSk", "-x", proxy.url, "--data-binary", "@-", "-H", "Content-Type: application/octet-stream",
                        f"https://127.0.0.1:{https_server.port}/sha256"], input=blob, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == [hashlib.sha256(blob).hexdigest(), str(len(blob))]


def test_200_concurrent_tunnels_are_byte_exact(proxy, echo_server):
    errors = []
    payloads = [os.urandom(64 * 1024 + i) for i in range(200)]
    barrier = threading.Barrier(200, timeout=30)

    def one(i):
        try:
            s, status, _ = connect_via(proxy.port, f"127.0.0.1:{echo_server.port}", timeout=30)
            with s:
                assert status == 200
                barrier.wait()
                sender = threading.Thread(target=s.sendall, args=(payloads[i],))
                sender.start()
                got = recv_exactly(s, len(payloads[i]))
                sender.join()
                assert got == payloads[i], f"tunnel {i} corrupted"
                s.shutdown(socket.SHUT_WR)
                assert s.recv(1) == b"", "half-close not passed on"
        except Exception as e:  # noqa: BLE001 - collected and reported below
            errors.append(f"{i}: {e!r}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]


def test_half_close_passes_eof_and_keeps_the_other_direction(proxy):
    def handler(conn):
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        conn.sendall(hashlib.sha256(data).hexdigest().encode())   # answers only after the client's EOF

    server = TCPServer(handler)
    try:
        s, status, _ = connect_via(proxy.port, f"127.0.0.1:{server.port}")
        payload = os.urandom(5 * MIB)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            chunk = s.recv(1024)
            if not chunk:
                break
            answer += chunk
        assert answer.decode() == hashlib.sha256(payload).hexdigest()
        s.close()
    finally:
        server.close()


@pytest.mark.parametrize("request_bytes,status,needle", [
    (b"NONSENSE\r\n\r\n", 400, b"METHOD TARGET VERSION"),
    (b"CONNECT nohostport HTTP/1.1\r\n\r\n", 400, b"host:port"),
    (b"CONNECT [::1 HTTP/1.1\r\n\r\n", 400, b"host:port"),
    (b"CONNECT 0177.0.0.1:443 HTTP/1.1\r\n\r\n", 400, b"host:port"),      # 127.0.0.1 to inet_aton, 177.0.0.1 to others
    (b"GET http://2130706433/ HTTP/1.1\r\n\r\n", 400, b"bad host"),        # 127.0.0.1 to curl and browsers
    (b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", 400, b"absolute"),
    (b"\x16\x03\x01\x00\x05hello", 400, b"method"),
    (b"TRACE http://127.0.0.1/ HTTP/1.1\r\n\r\n", 405, b"TRACE"),
    (b"GET http://127.0.0.1/ HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431, b"exceeds"),
    (b"CONNECT does-not-exist.invalid:443 HTTP/1.1\r\n\r\n", 502, b"cannot resolve"),
    (b"CONNECT " + b"a" * 3000 + b".test:443 HTTP/1.1\r\n\r\n", 400, b"host:port"),   # a label over 63 bytes
    # Framing a proxy must not pass on as sent (request smuggling's ground): Transfer-Encoding in HTTP/1.0, a
    # Content-Length that is no number (it was called 'ambiguous'), a chunk line ended by a bare LF.
    (b"POST http://127.0.0.1:1/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, b"HTTP/1.0"),
    (b"POST http://127.0.0.1:1/ HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, b"bad Content-Length"),
])
def test_error_answers(proxy, request_bytes, status, needle):
    got, head, body = raw_request(proxy.port, request_bytes)
    assert got == status, head
    assert needle in body, body
    assert body.endswith(b"\n") and body.count(b"\n") == 1


def test_refused_upstream_is_502(proxy):
    port = free_port()   # nothing listens there
    got, _, body = raw_request(proxy.port, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert got == 502 and b"refused" in body


def test_connect_timeout_is_504(proxy):
    # A listener whose accept queue is full and never accepted: further SYNs are dropped, so connects hang.
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(0)
    port = blackhole.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        time.sleep(0.2)
        start = time.monotonic()
        got, _, body = raw_request(proxy.port, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert got == 504, body
        assert b"timed out" in body
        assert time.monotonic() - start < 5
    finally:
        for f in fillers:
            f.close()
        blackhole.close()


def test_client_that_sends_nothing_gets_408(proxy):
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        start = time.monotonic()
        status, _, body = read_response(s)
        assert status == 408 and b"no complete request" in body
        assert 1.5 < time.monotonic() - start < 6


def test_client_reset_mid_stream_closes_upstream(proxy):
    closed = threading.Event()

    def handler(conn):
        conn.settimeout(10)
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        closed.set()

    server = TCPServer(handler)
    try:
        s, status, _ = connect_via(proxy.port, f"127.0.0.1:{server.port}")
        s.sendall(os.urandom(100000))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()   # RST
        assert closed.wait(5), "upstream side not closed after client reset"
    finally:
        server.close()


def test_upstream_reset_mid_stream_reaches_client(proxy):
    def handler(conn):
        conn.sendall(os.urandom(50000))
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(0.1)

    server = TCPServer(handler)
    try:
        s, status, _, early = connect_via(proxy.port, f"127.0.0.1:{server.port}", early=True)
        got = len(early)
        with pytest.raises(ConnectionResetError):   # passed on as a reset, not a clean end
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise EOFError
                got += len(chunk)
        s.close()
    finally:
        server.close()


def test_slow_reader_keeps_proxy_memory_bounded(proxy):
    size = 256 * MIB

    def handler(conn):
        block = bytes(range(256)) * 4096   # 1 MiB
        for _ in range(size // len(block)):
            conn.sendall(block)

    server = TCPServer(handler)
    try:
        s, status, _, early = connect_via(proxy.port, f"127.0.0.1:{server.port}", timeout=60, early=True)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        before = proxy.rss_kib()
        time.sleep(1.5)   # the upstream pushes as fast as it can while the client reads nothing
        during = proxy.rss_kib()
        assert during - before < 16 * 1024, f"proxy grew {during - before} KiB while the client was not reading"
        h = hashlib.sha256(early)
        total = len(early)
        while total < size:
            chunk = s.recv(1 << 20)
            assert chunk
            h.update(chunk)
            total += len(chunk)
        assert total == size
        assert h.hexdigest() == hashlib.sha256(bytes(range(256)) * 4096 * (size // MIB)).hexdigest()
        s.close()
    finally:
        server.close()


def test_ipv6_listener_and_bracketed_target(start_proxy, echo_server):
    v6echo = TCPServer(echo_handler, host="::1")
    try:
        p = start_proxy(listen_host="::1")
        s, status, _ = connect_via(p.port, f"[::1]:{v6echo.port}", proxy_host="::1")
        with s:
            assert status == 200
            s.sendall(b"ping6")
            assert recv_exactly(s, 5) == b"ping6"
    finally:
        v6echo.close()


def test_connection_limit_answers_503(start_proxy, echo_server):
    upstream_connections = []

    def counting_echo(conn):
        upstream_connections.append(1)
        echo_handler(conn)

    counting = TCPServer(counting_echo)
    admin = free_port()
    p = start_proxy("--max-connections", "2", "--admin", f"127.0.0.1:{admin}")

    def wait_open(n):
        # What the proxy counts, not a fixed sleep: on a loaded machine the start-up check's connection (on another
        # loop) was once still counted when the second held client came, and that client got the 503.
        deadline = time.monotonic() + 5
        while f"chainwatch_connections_open {n}\n" not in admin_get(admin, "/metrics")[1] and time.monotonic() < deadline:
            time.sleep(0.05)

    wait_open(0)
    # Each held client has started its request: the listener defers accepting until a client has sent something
    # (TCP_DEFER_ACCEPT), so a silent one is not yet the proxy's to count.
    held = [socket.create_connection(("127.0.0.1", p.port)) for _ in range(2)]
    for h in held:
        h.sendall(b"CONNECT ")
    try:
        wait_open(2)
        got, _, body = raw_request(p.port, f"CONNECT 127.0.0.1:{counting.port} HTTP/1.1\r\n\r\n".encode())
        assert got == 503 and b"connection limit" in body
        time.sleep(0.2)
        assert upstream_connections == [], "a refused client's CONNECT still reached the upstream"
    finally:
        for h in held:
            h.close()
    wait_open(0)   # the proxy has seen the held clients leave
    s, status, _ = connect_via(p.port, f"127.0.0.1:{counting.port}")
    s.close()
    counting.close()
    assert status == 200
    assert p.output().count(" 503 ") == 1 and " 400 " not in p.output()


def test_allow_port_refuses_other_ports(start_proxy, echo_server):
    p = start_proxy("--allow-port", "443")
    got, _, body = raw_request(p.port, f"CONNECT 127.0.0.1:{echo_server.port} HTTP/1.1\r\n\r\n".encode())
    assert got == 403 and b"--allow-port" in body
    got, _, body = raw_request(p.port, f"GET http://127.0.0.1:{echo_server.port}/ HTTP/1.1\r\n\r\n".encode())
    assert got == 403 and b"--allow-port" in body   # plain HTTP reaches no other port either


def test_non_loopback_listen_requires_allow_client(tmp_path):
    import subprocess as sp
    from conftest import BIN
    r = sp.run([BIN, "run", "--listen", "0.0.0.0:3999", "--alert-log", str(tmp_path / "a.jsonl")], capture_output=True, timeout=10)
    assert r.returncode != 0
    assert b"--allow-client" in r.stderr


def test_sigterm_drains_open_tunnels_then_exits_0(start_proxy, echo_server):
    p = start_proxy("--grace", "5")
    s, status, _ = connect_via(p.port, f"127.0.0.1:{echo_server.port}")
    os.kill(p.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert p.proc.poll() is None, "exited while a tunnel was open"
    s.sendall(b"still here")
    assert recv_exactly(s, 10) == b"still here"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", p.port), timeout=1).close()
    s.close()
    assert p.proc.wait(5) == 0


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_backs_off_and_serves_the_waiting_clients_later(tmp_path, echo_server):
    """With every descriptor in use the proxy neither spins on its listener nor drops the queued clients: a tunnel
    whose upstream socket cannot be made gets a 502 naming the cause, the rest wait in the kernel's queue and are
    served once tunnels close."""
    p = Proxy(["--threads", "1", "--request-timeout", "30"], tmp_path, max_files=48)
    clients = []
    try:
        time.sleep(0.2)
        for _ in range(40):   # about twice what 48 descriptors allow (each tunnel holds two)
            s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
            s.sendall(f"CONNECT 127.0.0.1:{echo_server.port} HTTP/1.1\r\n\r\n".encode())
            clients.append(s)
        time.sleep(0.5)
        answered = set(select.select(clients, [], [], 0.5)[0])
        open_tunnels, waiting, refused = [], [], []
        for s in clients:
            if s not in answered:
                waiting.append(s)
                continue
            status, _, _ = read_head(s)
            if status == 200:
                open_tunnels.append(s)
            else:
                assert status == 502, status
                refused.append(s)
        assert open_tunnels and waiting, (len(open_tunnels), len(waiting), len(refused))
        if refused:
            assert "too many open files" in p.output().lower()
        before = cpu_seconds(p.pid)
        time.sleep(1.0)
        assert cpu_seconds(p.pid) - before < 0.3, "the proxy spun while out of descriptors"
        for s in open_tunnels + refused:
            s.close()
        # Each waiting client is accepted now. While the closed tunnels' descriptors are still being released, one
        # may find no descriptor for its upstream: it gets a 502 that says so, never silence.
        served = 0
        for s in waiting:
            s.settimeout(10)
            status, head, rest = read_head(s)
            if status == 502:
                assert b"too many open files" in (rest + s.recv(4096)).lower()
                continue
            assert status == 200, head
            s.sendall(b"still here")
            assert recv_exactly(s, 10) == b"still here"
            s.close()   # its descriptors go to the next waiting client
            served += 1
        assert served >= len(waiting) - 2, (served, len(waiting))   # a 502 or two while the first closes settle
        # The log says when accepting stopped and when it came back, a line each per burst, not one per attempt.
        output = p.output()
        assert "cannot accept: " in output and "accepting again, after" in output, output[-2000:]
        assert output.count("cannot accept: ") <= 5, output[-2000:]
    finally:
        for s in clients:
            s.close()
        p.stop()


def test_no_descriptor_leak(proxy):
    """Runs last in this module: after everything above, the proxy's descriptors return to the baseline."""
    deadline = time.monotonic() + 10
    while proxy.fd_count() > proxy.baseline_fds and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proxy.fd_count() == proxy.baseline_fds, os.listdir(f"/proc/{proxy.pid}/fd")


def test_destinations_the_policy_refuses_get_403_without_a_connection(start_proxy, tmp_path, echo_server):
    """Link-local (where cloud metadata answers) and the proxy itself are refused by default, also by name; a
    --deny-destination network is refused however it is spelled (a name, an IPv4-mapped literal), and
    --allow-destination exempts from the defaults."""
    hosts = tmp_path / "hosts"
    hosts.write_text("169.254.169.254 metadata.test\n127.0.0.1 local.test\n")
    p = start_proxy("--hosts", str(hosts), "--connect-timeout", "2")
    for target in ("169.254.169.254:80", "metadata.test:80", f"127.0.0.1:{p.port}", f"local.test:{p.port}",
                   f"[::ffff:127.0.0.1]:{p.port}"):
        got, _, body = raw_request(p.port, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        assert got == 403 and b"not a destination" in body, (target, got, body)
    got, _, body = raw_request(p.port, b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n")
    assert got == 403 and b"link-local" in body
    # Loopback upstreams stay reachable for a loopback listener (its clients are on the host already).
    sock, status, _ = connect_via(p.port, f"127.0.0.1:{echo_server.port}")
    assert status == 200
    sock.close()

    strict = start_proxy("--hosts", str(hosts), "--deny-destination", "127.0.0.0/8")
    for target in (f"127.0.0.1:{echo_server.port}", f"local.test:{echo_server.port}",
                   f"[::ffff:127.0.0.1]:{echo_server.port}", f"localhost:{echo_server.port}"):
        got, _, body = raw_request(strict.port, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        assert got == 403 and b"--deny-destination" in body, (target, got, body)

    # 0.0.0.0 reaches this host's own services on Linux: refused by default, reachable when exempted.
    got, _, body = raw_request(p.port, f"CONNECT 0.0.0.0:{echo_server.port} HTTP/1.1\r\n\r\n".encode())
    assert got == 403 and b"unspecified" in body
    exempt = start_proxy("--hosts", str(hosts), "--allow-destination", "0.0.0.0/8")
    sock, status, _ = connect_via(exempt.port, f"0.0.0.0:{echo_server.port}")
    assert status == 200
    sock.close()
