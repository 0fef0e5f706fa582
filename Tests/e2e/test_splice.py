"""Bulk tunnels after the verdict move by splice(2): socket -> pipe -> socket in the kernel. These tests watch the
proxy's own descriptors (a pipe per spliced direction in /proc/PID/fd) so they know the pump ran, and check that it
loses, adds and reorders no byte, passes half-closes and resets on, and leaves no pipe behind. The same transfers
under --no-splice show no pipe, so the descriptor check can fail."""
import hashlib
import os
import socket
import threading
import time

import pytest

from conftest import Proxy
from helpers import TCPServer, connect_via, recv_exactly

MIB = 1 << 20


def pattern(size):
    """Deterministic bytes whose every 4 KiB block differs (a reordered or repeated block changes the digest)."""
    block = bytes(range(256)) * 16
    return b"".join(i.to_bytes(8, "big") + block[8:] for i in range(size // len(block)))


def pipes(proxy):
    d = f"/proc/{proxy.pid}/fd"
    found = []
    for name in os.listdir(d):
        try:
            if os.readlink(os.path.join(d, name)).startswith("pipe:"):
                found.append(name)
        except FileNotFoundError:
            pass
    return found


@pytest.fixture(scope="module", params=["splice", "copy"])
def proxy(request, tmp_path_factory):
    args = ["--idle-timeout", "30"] + (["--no-splice"] if request.param == "copy" else [])
    p = Proxy(args, tmp_path_factory.mktemp("proxy"))
    time.sleep(0.2)
    p.mode = request.param
    p.baseline_pipes = len(pipes(p))
    yield p
    p.stop()


def tunnel(proxy, server):
    """A CONNECT tunnel to `server`, and the bytes the server (which speaks first) sent with the proxy's 200."""
    s, status, _, early = connect_via(proxy.port, f"127.0.0.1:{server.port}", early=True)
    assert status == 200
    return s, early


def receive_all(sock):
    h = hashlib.sha256()
    n = 0
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return h.hexdigest(), n
        h.update(chunk)
        n += len(chunk)


def test_download_is_byte_exact_and_spliced_while_the_client_stalls(proxy):
    payload = pattern(32 * MIB)
    sent = threading.Event()

    def handler(conn):
        conn.sendall(payload)
        sent.set()

    server = TCPServer(handler)
    try:
        s, first = tunnel(proxy, server)
        while len(first) < MIB:   # past the first 64 KiB copied eagerly, then stall with the rest in flight
            first += s.recv(MIB - len(first))
        time.sleep(0.5)
        during = len(pipes(proxy)) - proxy.baseline_pipes
        digest, n = receive_all(s)
        s.close()
        assert sent.wait(10)
        assert first == payload[:len(first)]
        rest = payload[len(first):]
        assert n == len(rest)
        assert digest == hashlib.sha256(rest).hexdigest()
        if proxy.mode == "splice":
            assert during >= 1, "no pipe while a bulk download was in flight: the splice pump did not run"
        else:
            assert during == 0
    finally:
        server.close()


def test_both_directions_at_once_with_half_close(proxy):
    up = pattern(24 * MIB)
    down = os.urandom(16 * MIB)

    def handler(conn):
        got = {}

        def reader():
            try:
                got["digest"] = receive_all(conn)
            except OSError:
                # Not the tunnel's connection: chainwatch's spare connection beside it (the probe's, opened at the
                # CONNECT), which closes unread, so with a reset, when this server speaks first.
                pass
        t = threading.Thread(target=reader)
        t.start()
        try:
            conn.sendall(down)
        finally:
            t.join(60)   # the reader ends before this connection is closed (a reset spare: sendall raised)
        digest, n = got["digest"]
        conn.sendall(f"{digest} {n}".encode())   # after the client's EOF: the other direction still works

    server = TCPServer(handler)
    try:
        s, early = tunnel(proxy, server)
        received = []

        def reader():
            received.append(early + receive_all_bytes(s))
        t = threading.Thread(target=reader)
        t.start()
        s.sendall(up)
        s.shutdown(socket.SHUT_WR)
        t.join(60)
        s.close()
        data = received[0]
        assert data[:len(down)] == down
        assert data[len(down):].decode() == f"{hashlib.sha256(up).hexdigest()} {len(up)}"
    finally:
        server.close()


def receive_all_bytes(sock):
    parts = []
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def test_upstream_reset_during_splice_resets_the_client(proxy):
    def handler(conn):
        conn.sendall(pattern(4 * MIB))
        time.sleep(0.3)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()   # RST

    server = TCPServer(handler)
    try:
        s, early = tunnel(proxy, server)
        got = [early]
        with pytest.raises(ConnectionResetError):
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break   # a clean EOF would be a lie: the upstream did not end normally
                got.append(chunk)
        # Everything sent before the reset (0.3 s before it) arrived whole, and only then the reset.
        assert b"".join(got) == pattern(4 * MIB)
        s.close()
    finally:
        server.close()


def test_quiet_tunnel_gives_its_pipe_back_and_splices_the_next_burst(proxy):
    """Pipes are a per-user kernel budget: a spliced direction that stays quiet (2 s) releases its pipe and reads
    through the proxy again; the next burst is byte-exact."""
    bursts = [pattern(8 * MIB), os.urandom(8 * MIB)]
    go = threading.Event()

    def handler(conn):
        conn.sendall(bursts[0])
        go.wait(20)
        conn.sendall(bursts[1])

    server = TCPServer(handler)
    try:
        s, first = tunnel(proxy, server)
        first += recv_exactly(s, len(bursts[0]) - len(first))
        assert first == bursts[0]
        time.sleep(3)
        quiet = len(pipes(proxy)) - proxy.baseline_pipes
        go.set()
        second = receive_all_bytes(s)
        s.close()
        assert second == bursts[1]
        assert quiet == 0, "a quiet tunnel kept its pipe"
    finally:
        server.close()


def test_no_pipe_left_after_tunnels_close(proxy):
    """Runs last in this module: every pipe a pump made is closed with its tunnel."""
    deadline = time.monotonic() + 10
    while len(pipes(proxy)) > proxy.baseline_pipes and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(pipes(proxy)) == proxy.baseline_pipes
