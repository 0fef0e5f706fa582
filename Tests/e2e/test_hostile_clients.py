"""Issue 12's findings on the client and operator side, each a regression test: a second instance on a port in use,
head parsing that is linear in the head's length and bounded in time, half-closed clients."""
import socket
import ssl
import subprocess
import time

from conftest import BIN
from helpers import TCPServer, connect_via, raw_request, read_head


def test_second_instance_on_a_port_in_use_refuses_to_start(start_proxy, tmp_path):
    """SO_REUSEPORT let a second process (same user) bind the port silently and take its share of the connections
    under its own policy. Only the proxy's own loops may share its port."""
    first = start_proxy()
    r = subprocess.run([BIN, "run", "--listen", f"127.0.0.1:{first.port}", "--alert-log", str(tmp_path / "b.jsonl")],
                       capture_output=True, timeout=10)
    assert r.returncode != 0
    assert b"another process listens there" in r.stderr, r.stderr
    assert first.proc.poll() is None   # the first is untouched


def dripped_response_head(size):
    """An upstream whose response head is `size` bytes sent 6 bytes per TCP segment, paced, then a 2-byte body."""
    def handler(conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        read_head(conn)
        head = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (size - 40) + b"\r\nContent-Length: 2\r\n\r\n"
        for i in range(0, len(head), 6):   # paced, so the proxy's reads see a few bytes each
            conn.send(head[i:i + 6])
            time.sleep(0.0001)
        conn.sendall(b"ok")
        time.sleep(0.5)
    return handler


def test_a_response_head_dripped_in_10_000_segments_arrives_whole(start_proxy):
    """The head is read a window at a time (each byte copied and scanned once; the machine's unit tests check the
    copying, bench/head_drip.py measures the CPU: 0.48 s before and 0.18 s after for this head): whatever the
    segmentation, the client gets the head and body."""
    server = TCPServer(dripped_response_head(62_000))
    try:
        p = start_proxy()
        status, head, body = raw_request(
            p.port, f"GET http://127.0.0.1:{server.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(), timeout=60)
        assert status == 200 and body == b"ok"
        assert "X-Pad: " + "a" * 61_960 in head
    finally:
        server.close()


def test_a_response_head_that_drips_past_the_request_timeout_gets_504(start_proxy):
    """Each byte reset the idle timer, so a head dripped slowly enough held the exchange for ever. Once begun, a
    head must be complete within --request-timeout."""
    def handler(conn):
        read_head(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        for _ in range(40):
            time.sleep(0.25)
            conn.sendall(b"X")
    server = TCPServer(handler)
    try:
        p = start_proxy("--request-timeout", "2")
        started = time.monotonic()
        status, _, body = raw_request(
            p.port, f"GET http://127.0.0.1:{server.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(), timeout=15)
        took = time.monotonic() - started
        assert status == 504 and b"response head not complete" in body, body
        assert took < 6, f"answered after {took:.1f} s"
    finally:
        server.close()


def test_a_half_closed_tunnel_closes_after_the_half_closed_timeout(start_proxy):
    """A client that half-closes while its upstream never answers nor closes was held (its socket in CLOSE-WAIT
    on the proxy) for the whole idle timeout. After one side ends, --half-closed-timeout applies to silence."""
    server = TCPServer(lambda conn: time.sleep(30))   # reads nothing, sends nothing, closes late
    try:
        p = start_proxy("--half-closed-timeout", "1")
        s, status, _ = connect_via(p.port, f"127.0.0.1:{server.port}")
        assert status == 200
        s.sendall(b"hello")
        s.shutdown(socket.SHUT_WR)
        started = time.monotonic()
        s.settimeout(10)
        assert s.recv(100) == b""   # the proxy closed its side
        took = time.monotonic() - started
        assert 0.8 < took < 5, f"closed after {took:.1f} s"
        s.close()
    finally:
        server.close()


def test_a_half_closed_tunnel_with_traffic_stays_open(start_proxy):
    """The half-closed timeout counts silence, not age: an upstream still sending keeps the tunnel."""
    def handler(conn):
        conn.recv(100)
        for i in range(8):
            time.sleep(0.3)
            conn.sendall(b"%d" % i)
    server = TCPServer(handler)
    try:
        p = start_proxy("--half-closed-timeout", "1")
        s, status, _ = connect_via(p.port, f"127.0.0.1:{server.port}")
        assert status == 200
        s.sendall(b"hello")
        s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        got = b""
        while len(got) < 8:
            chunk = s.recv(100)
            if not chunk:
                break
            got += chunk
        assert got == b"01234567"   # 2.4 s of traffic through a 1 s half-closed timeout
        s.close()
    finally:
        server.close()


def tls13_server_hello():
    """A TLS 1.3 ServerHello record (supported_versions 1.3, an X25519 key share): enough for the proxy to see TLS
    1.3 and start its probe; the client cannot finish a handshake with it."""
    extensions = b"\x00\x2b\x00\x02\x03\x04" + b"\x00\x33\x00\x24\x00\x1d\x00\x20" + b"\x07" * 32
    body = b"\x03\x03" + b"\x42" * 32 + b"\x00" + b"\x13\x01" + b"\x00" + len(extensions).to_bytes(2, "big") + extensions
    message = b"\x02" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x03" + len(message).to_bytes(2, "big") + message


def test_probe_handshakes_count_against_max_connections(start_proxy, tmp_path):
    """A client that opens tunnels and leaves leaves each one's probe running (the prober keeps a handshake until it
    ends), and probes did not count: 1 500 were in flight under --max-connections 50. Now each running probe takes
    a connection slot. The upstream answers each tunnel's ClientHello with a TLS 1.3 ServerHello (the proxy then
    probes, under the built-in alert policy, without holding the tunnel) and never answers a probe, which waits out
    --probe-timeout. Connections alternate strictly: a tunnel's, then its probe's."""
    accepted = []

    def handler(conn):
        accepted.append(1)
        if len(accepted) % 2 == 1:   # a tunnel's connection
            conn.recv(65536)
            conn.sendall(tls13_server_hello())   # and closes: the tunnel ends with its client
        else:                        # its probe
            time.sleep(8)
    server = TCPServer(handler)
    names = [f"h{i}.test" for i in range(3)]
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 " + " ".join(names + ["late.test"]) + "\n")
    try:
        p = start_proxy("--hosts", str(hosts), "--max-connections", "3", "--probe-timeout", "4")
        context = ssl.create_default_context()
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        for i, name in enumerate(names):
            s, status, _ = connect_via(p.port, f"{name}:{server.port}")
            assert status == 200, f"tunnel {i}"
            tls = context.wrap_socket(s, server_hostname=name, do_handshake_on_connect=False)
            tls.settimeout(2)
            try:
                tls.do_handshake()
            except (socket.timeout, ssl.SSLError, OSError):
                pass   # the ServerHello is not one it can use
            tls.close()
            deadline = time.monotonic() + 3
            while len(accepted) < 2 * (i + 1) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(accepted) == 2 * (i + 1), "the proxy did not probe"
            time.sleep(0.3)   # the tunnel closes; its probe still waits on the upstream
        s, got, _, body = connect_via(p.port, f"late.test:{server.port}", early=True)
        s.close()
        assert got == 503 and b"connection limit" in body, (got, body)
        time.sleep(4.5)   # the probes time out and free their slots
        s, status, _ = connect_via(p.port, f"late.test:{server.port}")
        s.close()
        assert status == 200
    finally:
        server.close()


def test_a_servers_answer_to_a_part_record_reaches_a_client_that_sent_only_that(start_proxy, tmp_path):
    """Under alert, a client that sends only a TLS record header (5 bytes, the hello never comes) has its bytes
    flow after about a second; its server's answer, the same 5 bytes here, now flows with them. It was held for a
    hello that never came, past 30 s (an operator review)."""
    def echo(conn):
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)
    server = TCPServer(echo)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 echo.test\n")
    p = start_proxy("--hosts", str(hosts))
    try:
        s, status, _ = connect_via(p.port, f"echo.test:{server.port}", timeout=5)
        assert status == 200
        started = time.monotonic()
        s.sendall(b"\x16\x03\x01\x00\x50")
        got = b""
        while len(got) < 5:
            chunk = s.recv(64)
            assert chunk, "closed before the echo"
            got += chunk
        assert got == b"\x16\x03\x01\x00\x50" and time.monotonic() - started < 4, (got, time.monotonic() - started)
        s.close()
    finally:
        server.close()
