#!/usr/bin/env python3
"""Proxy CPU for a plain-HTTP response head dripped by its upstream, 6 bytes per TCP segment (issue 12's quadratic
head parsing: each read re-copied and re-scanned the head from byte 0).

    CHAINWATCH_BIN=.build/release/chainwatch python3 bench/head_drip.py

Prints, per head size, the proxy's CPU seconds (user + system, from /proc) and the wall time. Linear parsing
roughly doubles the CPU when the head doubles; quadratic parsing quadruples it."""
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "Tests/e2e"))
import conftest  # noqa: E402
from helpers import TCPServer, raw_request  # noqa: E402
from test_hostile_clients import dripped_response_head  # noqa: E402
import os  # noqa: E402


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
