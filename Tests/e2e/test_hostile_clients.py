"""Issue 12's findings on the client and operator side, each a regression test: a second instance on a port in use,
head parsing that is linear in the head's length and bounded in time, half-closed clients."""
import socket
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
