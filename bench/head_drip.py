#!/usr/bin/env python3
"""Proxy CPU for a plain-HTTP response head dripped by its upstream, 6 bytes per TCP segment (issue 12's quadratic
head parsing: each read re-copied and re-scanned the head from byte 0), and for a request head dripped by its
client one byte per send, 100 µs apart (issue 26: parsing was linear by then, but each byte cost a wakeup, a readv
and an event, about 4 µs; a side whose head trickles in now rests 10 ms between reads).

    CHAINWATCH_BIN=.build/release/chainwatch python3 bench/head_drip.py

Prints, per head size, the proxy's CPU seconds (all threads, the scheduler's count in /proc), the read system calls it made
(/proc/PID/io syscr) and the wall time."""
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Tests/e2e"))
import conftest  # noqa: E402
from helpers import TCPServer, raw_request  # noqa: E402
from test_hostile_clients import dripped_response_head  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402


def cpu_seconds(pid):
    """CPU time of all the process's threads, from the scheduler's own count in nanoseconds (/proc/PID/task/*/schedstat;
    /proc/PID/stat counts in clock ticks, 10 ms, coarser than what a dripped head costs now)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass   # a thread that ended meanwhile
    return total / 1e9


def read_calls(pid):
    return next(int(line.split()[1]) for line in open(f"/proc/{pid}/io") if line.startswith("syscr"))


def dripped_request_head(size):
    with tempfile.TemporaryDirectory() as d:
        proxy = conftest.Proxy(["--request-timeout", "120"], d)
        try:
            head = b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (size - 60) + b"\r\n\r\n"
            s = socket.create_connection(("127.0.0.1", proxy.port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            before, reads, started = cpu_seconds(proxy.pid), read_calls(proxy.pid), time.monotonic()
            for i in range(len(head)):
                s.send(head[i:i + 1])
                time.sleep(0.0001)
            s.settimeout(30)
            answer = s.recv(100)
            assert answer.startswith(b"HTTP/1.1 502"), answer   # nothing listens on port 9: the head was read whole
            print(f"{size:>6} B request head: proxy CPU {cpu_seconds(proxy.pid) - before:.3f} s, "
                  f"{read_calls(proxy.pid) - reads} reads, wall {time.monotonic() - started:.2f} s")
        finally:
            proxy.stop()


for size in (4_000, 16_000):
    dripped_request_head(size)


for size in (16_000, 32_000, 62_000):
    with tempfile.TemporaryDirectory() as d:
        server = TCPServer(dripped_response_head(size))
        proxy = conftest.Proxy([], d)
        try:
            before, started = cpu_seconds(proxy.pid), time.monotonic()
            request = f"GET http://127.0.0.1:{server.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            status, _, body = raw_request(proxy.port, request.encode(), timeout=60)
            assert status == 200 and body == b"ok", (status, body)
            print(f"{size:>6} B head: proxy CPU {cpu_seconds(proxy.pid) - before:.3f} s, wall {time.monotonic() - started:.2f} s")
        finally:
            proxy.stop()
            server.close()
