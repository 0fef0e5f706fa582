"""Hostile clients, pages and servers, round three (the items with an end-to-end shape; the rest are unit tests):
the admin listener is not a destination, and a server that answers a ClientHello with bytes that are not TLS gets
none of them to the client under a block rule.

Run alone: make e2e ARGS="-k hostile_round3".
"""
import ssl

from admin_helpers import admin_get
from helpers import TCPServer, connect_via, free_port, recv_until_closed, wait_alert_lines


def client_hello(server_name):
    """The first flight of a Python TLS 1.2 client: its ClientHello (TLS 1.2 at most: no probe goes first)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=server_name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def test_the_admin_listener_is_not_reachable_through_the_proxy(start_proxy):
    """A CONNECT to the admin port is refused with 403 (the proxy itself), so a page in a browser that uses the
    proxy cannot clear the known-bad marks or read /state through it. Before: 200, and the admin answered."""
    admin = free_port()
    proxy = start_proxy("--admin", f"127.0.0.1:{admin}")
    assert admin_get(admin, "/healthz")[0] == 200
    for target in (f"127.0.0.1:{admin}", f"localhost:{admin}", f"[::ffff:127.0.0.1]:{admin}"):
        sock, status, head, body = connect_via(proxy.port, target, early=True)
        sock.close()
        assert status == 403, (target, status, head)
        assert b"admin listener" in body, (target, body)


def test_a_server_answering_the_hello_without_tls_is_blocked_under_block(start_proxy, tmp_path):
    """`action: block` with `non_tls` at its default (alert): the server answers the ClientHello with an HTTP error
    page. The client gets none of it and the tunnel closes; one line, block not_tls. Before: the page was released
    to the client with an alert line."""
    page = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"

    def answer(conn):
        conn.recv(65536)
        conn.sendall(page)

    server = TCPServer(answer)
    policy = tmp_path / "block.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: block\n  anchors: [system]\n")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 plain.test\n")
    try:
        proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts))
        sock, status, _ = connect_via(proxy.port, f"plain.test:{server.port}")
        assert status == 200
        sock.sendall(client_hello("plain.test"))
        received = recv_until_closed(sock)
        sock.close()
        assert received == b"", f"the client got the server's bytes: {received[:80]!r}"
        lines = wait_alert_lines(proxy.alert_log, server.port, 1)   # written by the alert thread: polled
        assert [(l["event"]["action"], l["event"]["reason"]) for l in lines] == [("block", "not_tls")], lines
    finally:
        server.close()


def test_a_web_page_cannot_drive_the_admin_listener(start_proxy):
    """What a page in a browser on the same host can send: a simple cross-site POST (no custom header, an Origin),
    or any request under a name that rebinds to 127.0.0.1 (its own name in Host). Each gets 403 and changes
    nothing; `chainwatch ctl` (the X-Chainwatch-Admin header, an address as Host) still clears. Before: 200."""
    import subprocess
    from admin_helpers import admin_get
    from conftest import BIN
    admin = free_port()
    start_proxy("--admin", f"127.0.0.1:{admin}")
    simple = admin_get(admin, "/known-bad/clear", method="POST", headers={"Content-Type": "text/plain"})
    assert simple[0] == 403 and "X-Chainwatch-Admin" in simple[1], simple
    with_origin = admin_get(admin, "/known-bad/clear", method="POST",
                            headers={"X-Chainwatch-Admin": "1", "Origin": "https://attacker.example"})
    assert with_origin[0] == 403, with_origin
    rebound = admin_get(admin, "/state", headers={"Host": f"rebind.attacker.example:{admin}"})
    assert rebound[0] == 403 and "not this listener's address" in rebound[1], rebound
    ctl = subprocess.run([BIN, "ctl", "--admin", f"127.0.0.1:{admin}", "clear-known-bad"], capture_output=True,
                         text=True, timeout=10)
    assert ctl.returncode == 0 and '"cleared"' in ctl.stdout, (ctl.stdout, ctl.stderr)
    assert admin_get(admin, "/state")[0] == 200


def test_the_admin_listener_caps_its_connections_and_cuts_dripped_heads(start_proxy):
    """64 connections drip a request head a byte a second, 8 from each of 8 loopback addresses (a client address
    holds at most 8): a 9th from one of them, and a 65th from a ninth address, are answered 503 at once, the proxy
    still relays, and each dripping connection is cut (408) at the 5 s head deadline, after which /healthz answers a
    fresh connection. Before: evhttp took every connection, and a byte every 9 s kept one open for ever."""
    import select
    import socket
    import time
    from helpers import echo_handler
    admin = free_port()
    proxy = start_proxy("--admin", f"127.0.0.1:{admin}")
    def refused_from(source):
        extra = socket.create_connection(("127.0.0.1", admin), timeout=5, source_address=(source, 0))
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = recv_until_closed(extra)
        extra.close()
        return answer.startswith(b"HTTP/1.1 503 ")

    held = []
    started = time.monotonic()
    for index in range(64):
        source = f"127.0.0.{index // 8 + 1}"
        s = socket.create_connection(("127.0.0.1", admin), timeout=5, source_address=(source, 0))
        s.sendall(b"GET /healthz HTTP/1.1\r\n")   # a first byte: accepted at once (TCP_DEFER_ACCEPT)
        held.append(s)
        if index == 7:
            time.sleep(0.2)
            assert refused_from("127.0.0.1"), "a ninth connection from one address, with 8 of 64 slots taken"
    time.sleep(0.3)
    assert refused_from("127.0.0.9"), "a 65th connection"
    echo = TCPServer(echo_handler)
    try:
        s, status, _ = connect_via(proxy.port, f"127.0.0.1:{echo.port}")
        s.sendall(b"ping")
        assert s.recv(4) == b"ping", "the proxy relays while the admin listener is full"
        s.close()
    finally:
        echo.close()
    open_ = {s: b"" for s in held}
    while open_ and time.monotonic() - started < 8:
        for s in list(open_):
            try:
                s.sendall(b"X")   # a byte a second: the deadline is from the accept, not the last byte
            except OSError:
                pass
        ready, _, _ = select.select(list(open_), [], [], 1.0)
        for s in ready:
            try:
                got = s.recv(4096)
            except OSError:   # reset: our drip came after the close
                got = b""
            open_[s] += got
            if not got:
                del open_[s]
                s.close()
    cut = time.monotonic() - started
    assert not open_, f"{len(open_)} dripping connection(s) still open after {cut:.1f} s"
    assert 4 < cut < 8, cut
    assert admin_get(admin, "/healthz") == (200, "ok\n")
