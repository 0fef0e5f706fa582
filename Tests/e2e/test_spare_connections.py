"""Spare connections (first contact under alert): at the CONNECT of a tunnel to an address no probe succeeded with
lately, chainwatch opens a connection beside the tunnel's for the probe a TLS 1.3 first contact will make, so that
the probe's hello can leave with the client's in an order drawn at random. These are the ways it could hurt the
tunnels it sits beside, each tried as a review found it (before the fixes: a leaked socket per tunnel, a fixed order
for hellos sent in pieces, one client's unfinished hello taking the spare from others, a one-connection service that
greets first serving the spare instead of the client; and, older, a refused transparent connection that never left
the worker)."""
import json
import os
import socket
import struct
import subprocess
import threading
import time

from helpers import TCPServer, free_port
from test_admin import metrics, value
from test_tls13_adversary import closing  # noqa: F401 (fixture)


def extension(kind, body):
    return struct.pack(">HH", kind, len(body)) + body


def u16s(values):
    b = b"".join(struct.pack(">H", v) for v in values)
    return struct.pack(">H", len(b)) + b


def client_hello(sni, share_len=32):
    """A TLS 1.3 ClientHello with one x25519 key share of `share_len` bytes (32 is right; 31 cannot be mirrored)."""
    name = sni.encode()
    exts = extension(0, struct.pack(">HBH", len(name) + 3, 0, len(name)) + name)
    exts += extension(10, u16s([0x001d, 0x0017])) + extension(13, u16s([0x0403, 0x0804, 0x0401]))
    exts += extension(43, bytes([2, 3, 4])) + extension(45, bytes([1, 1]))
    share = struct.pack(">HH", 0x001d, share_len) + os.urandom(share_len)
    exts += extension(51, struct.pack(">H", len(share)) + share)
    body = b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) + u16s([0x1301, 0x1302, 0x1303]) + b"\x01\x00"
    body += struct.pack(">H", len(exts)) + exts
    message = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack(">H", len(message)) + message


class Sink:
    """A TCP server on loopback that never answers (or, with `greeting`, greets and echoes with `250 `), recording each
    connection's data chunks with their times; `one_at_a_time`: it talks on one connection at a time, in the order
    they were accepted."""

    def __init__(self, greeting=None, one_at_a_time=False):
        self.greeting = greeting
        self.turn = threading.Lock() if one_at_a_time else None
        self.lock = threading.Lock()
        self.connections = []   # [(accepted at, [(time, bytes)])]
        self.server = TCPServer(self._serve)
        self.port = self.server.port

    def _serve(self, conn):
        chunks = []
        with self.lock:
            self.connections.append((time.monotonic(), chunks))
        if self.turn:
            with self.turn:
                self._talk(conn, chunks)
        else:
            self._talk(conn, chunks)

    def _talk(self, conn, chunks):
        if self.greeting:
            conn.sendall(self.greeting)
        conn.settimeout(10)
        while True:
            data = conn.recv(65536)
            if not data:
                return
            chunks.append((time.monotonic(), data))
            if self.greeting:
                conn.sendall(b"250 " + data)

    def close(self):
        self.server.close()


def tunnel(port, target_port, source="127.0.0.1", user_agent=None):
    c = socket.socket()
    c.bind((source, 0))
    c.settimeout(5)
    c.connect(("127.0.0.1", port))
    agent = f"User-Agent: {user_agent}\r\n" if user_agent else ""
    c.sendall(f"CONNECT 127.0.0.1:{target_port} HTTP/1.1\r\nHost: 127.0.0.1:{target_port}\r\n{agent}\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        more = c.recv(4096)
        assert more, head
        head += more
    assert head.startswith(b"HTTP/1.1 200"), head
    return c, head.split(b"\r\n\r\n", 1)[1]


def proxy_sockets_to(pid, port):
    ss = subprocess.run(["ss", "-tnp", "state", "all", f"dport = :{port}"], capture_output=True, text=True).stdout
    return sum(1 for line in ss.splitlines() if f"pid={pid}," in line)


def test_a_probe_that_fails_before_taking_its_spare_closes_it(start_proxy, closing):
    """A hello the probe cannot mirror (a 31-byte x25519 share) fails its probe before the handshake takes the spare.
    Before: the spare stayed open for good, a socket per tunnel; one client could use up the descriptors."""
    sink = closing(Sink())
    admin = free_port()
    p = start_proxy("--admin", f"127.0.0.1:{admin}", "--probe-timeout", "1", "--spot-check-rate", "0")
    for k in range(10):   # a client address each: a client gets one spare per address per 5 minutes
        c, _ = tunnel(p.port, sink.port, source=f"127.0.1.{k + 1}")
        c.sendall(client_hello(f"x{k}.test", share_len=31))
        time.sleep(0.2)
        c.close()
    deadline = time.monotonic() + 5
    while proxy_sockets_to(p.proc.pid, sink.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proxy_sockets_to(p.proc.pid, sink.port) == 0, "sockets to the upstream outlived their tunnels"
    counted = metrics(admin)
    assert value(counted, "chainwatch_spare_connections_total", use="probe") == 10, counted


def test_a_hello_sent_in_pieces_leaves_whole_and_in_no_fixed_order(start_proxy, closing):
    """The client's hello in two writes 100 ms apart: held until whole (a spare waits beside the tunnel), so the
    tunnel's hello reaches the server in one piece, and whose bytes come first is the coin's. Before: the first piece
    went at once, and the tunnel was first every time."""
    sink = closing(Sink())
    p = start_proxy("--probe-timeout", "1", "--spot-check-rate", "0")
    tunnel_first = []
    rounds = 20   # a fair coin lands the same way 20 times with probability 2e-6
    for k in range(rounds):   # a client address each, for a first contact (and a spare) each
        c, _ = tunnel(p.port, sink.port, source=f"127.0.2.{k + 1}")
        hello = client_hello(f"s{k}.test")
        c.sendall(hello[:100])
        time.sleep(0.1)
        c.sendall(hello[100:])
        time.sleep(0.4)
        c.close()
        with sink.lock:
            pair = [chunks for _, chunks in sink.connections[-2:]]
        assert len(pair) == 2 and all(pair), pair
        mine = [chunks for chunks in pair if any(hello[11:43] in data for _, data in chunks)]
        assert len(mine) == 1 and mine[0][0][1].startswith(hello), "the tunnel's hello did not reach the server whole first"
        tunnel_first.append(mine[0][0][0] <= min(chunks[0][0] for chunks in pair))
        time.sleep(0.1)
    assert any(tunnel_first) and not all(tunnel_first), f"the tunnel's hello was first in {sum(tunnel_first)} of {rounds}"


def test_one_clients_unfinished_hello_does_not_take_the_spare_from_others(start_proxy, closing):
    """A client that sends three bytes of a hello and stops keeps its own spare (2 s at most), not another client's."""
    sink = closing(Sink())
    admin = free_port()
    p = start_proxy("--admin", f"127.0.0.1:{admin}", "--threads", "1", "--probe-timeout", "1", "--spot-check-rate", "0")
    hog, _ = tunnel(p.port, sink.port, source="127.0.0.9")
    hog.sendall(b"\x16\x03\x01")
    time.sleep(0.3)
    for k in range(4):
        v, _ = tunnel(p.port, sink.port, source="127.0.0.2")
        v.sendall(client_hello(f"v{k}.test"))
        time.sleep(0.3)
        v.close()
    counted = metrics(admin)
    assert value(counted, "chainwatch_spare_connections_total", use="probe") >= 1, counted
    hog.close()


def test_a_one_connection_service_that_greets_first_greets_the_client(start_proxy, closing):
    """A service that speaks first and serves one connection at a time (SMTP, FTP, a serial bridge): a spare it
    takes first reads the greeting and closes at once, so the service moves on to the tunnel. Before: the spare held
    the service's only slot and the client waited for its idle timeout, about half the time."""
    sink = closing(Sink(greeting=b"220 ready\r\n", one_at_a_time=True))
    for k in range(8):
        p = start_proxy("--spot-check-rate", "0")
        c, early = tunnel(p.port, sink.port)
        got, deadline = early, time.monotonic() + 3
        while b"220 ready" not in got and time.monotonic() < deadline:
            try:
                got += c.recv(4096)
            except socket.timeout:
                break
        assert b"220 ready" in got, (k, got)
        c.close()
        p.stop()


def test_one_clients_probe_does_not_take_the_spare_from_another(start_proxy, closing):
    """A client gets one spare per address (its first contact), used or not, and then none for 5 minutes; another
    client's first contact there still gets its own. (Before, a spare the probe used left its client free to get
    another on its next tunnel, and one successful probe, any client's, made the address "warm" for every client:
    this test's server never answers, so it shows the first of those, not the second.)"""
    sink = closing(Sink())
    admin = free_port()
    p = start_proxy("--admin", f"127.0.0.1:{admin}", "--threads", "1", "--probe-timeout", "1", "--spot-check-rate", "0")
    for source in ("127.0.3.1", "127.0.3.1", "127.0.3.2"):
        c, _ = tunnel(p.port, sink.port, source=source)
        c.sendall(client_hello(f"{source}.test"))
        time.sleep(0.3)
        c.close()
    counted = metrics(admin)
    assert value(counted, "chainwatch_spare_connections_total", use="probe") == 2, counted
    assert value(counted, "chainwatch_first_contacts_total", order="beside_no_spare") == 1, counted


def test_a_second_stack_of_one_client_gets_a_spare_of_its_own(start_proxy, closing):
    """Two browsers on one machine (one client address, two User-Agents in their CONNECTs) reach the same address:
    each one's first contact gets a spare, so neither's probe comes a round trip after its tunnel. The same stack
    again gets none (its spare was used); a client that makes up a User-Agent for every CONNECT gets 4 at most per
    address in 5 minutes."""
    sink = closing(Sink())
    admin = free_port()
    p = start_proxy("--admin", f"127.0.0.1:{admin}", "--threads", "1", "--probe-timeout", "1", "--spot-check-rate", "0")
    agents = ["Mozilla/5.0 Chrome/152.0", "Mozilla/5.0 Firefox/155.0", "Mozilla/5.0 Chrome/152.0"] + [f"made-up/{k}" for k in range(5)]
    for k, agent in enumerate(agents):
        c, _ = tunnel(p.port, sink.port, source="127.0.4.1", user_agent=agent)
        c.sendall(client_hello(f"s{k}.test"))
        time.sleep(0.3)
        c.close()
    counted = metrics(admin)
    # Chrome, Firefox, then two made-up agents (4 stacks); Chrome again and three more made-up ones: none.
    assert value(counted, "chainwatch_spare_connections_total", use="probe") == 4, counted
    assert value(counted, "chainwatch_first_contacts_total", order="beside_no_spare") == 4, counted


def test_no_spare_connections_opens_none(start_proxy, closing):
    """`--no-spare-connections`: the first contact's probe connects on its own (counted as beside_no_spare)."""
    sink = closing(Sink())
    admin = free_port()
    p = start_proxy("--admin", f"127.0.0.1:{admin}", "--probe-timeout", "1", "--spot-check-rate", "0", "--no-spare-connections")
    c, _ = tunnel(p.port, sink.port)
    c.sendall(client_hello("n.test"))
    time.sleep(0.3)
    c.close()
    counted = metrics(admin)
    assert value(counted, "chainwatch_first_contacts_total", order="beside_no_spare") == 1, counted
    assert value(counted, "chainwatch_spare_connections_total", use="probe") == 0, counted
    assert value(counted, "chainwatch_spare_connections_total", use="none") == 0, counted


def test_a_refused_transparent_connection_leaves_the_worker(start_proxy, tmp_path):
    """A connection straight to a --transparent listener (no redirect: its destination is the proxy itself) is reset.
    Before: the reset closed the client first, so the close that followed returned early: the connection was never
    counted closed, wrote no access line, and a stop waited its full grace."""
    admin, listener = free_port(), free_port()
    access = tmp_path / "access.jsonl"
    p = start_proxy("--admin", f"127.0.0.1:{admin}", "--transparent", f"127.0.0.1:{listener}", "--threads", "1",
                    "--access-log", str(access), "--spot-check-rate", "0")
    for _ in range(5):
        c = socket.create_connection(("127.0.0.1", listener))
        c.sendall(b"\x16\x03\x01\x00\x05hello")
        c.settimeout(2)
        try:
            assert c.recv(100) == b""
        except ConnectionResetError:
            pass
        c.close()
    deadline = time.monotonic() + 3
    while value(metrics(admin), "chainwatch_connections_open") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert value(metrics(admin), "chainwatch_connections_open") == 0, metrics(admin)
    t0 = time.monotonic()
    p.stop()
    assert time.monotonic() - t0 < 5, "the stop waited for connections that were gone"
    lines = [json.loads(l) for l in access.read_text().splitlines() if l.strip()]
    assert len(lines) == 5 and all(l["http"]["request"]["method"] == "TRANSPARENT" for l in lines), lines
