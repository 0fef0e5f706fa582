"""The access log (--access-log): one ECS line per tunnel and per plain-HTTP request as it ends, findings or not,
with the alert log's guarantees (its own writer thread, reopened on SIGUSR1, nothing lost at SIGTERM)."""
import json
import os
import signal
import time

from helpers import HTTPServer as PlainServer, connect_via, ecs_problems, raw_request
from test_detection import curl, pki, serve, write_policy  # noqa: F401 (fixture)


def access_lines(path, count, timeout=3.0):
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            for line in lines:
                assert not ecs_problems(line), (ecs_problems(line), line)
            return lines
        time.sleep(0.05)


def test_every_tunnel_and_request_gets_one_line(start_proxy, tmp_path, pki):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    log = tmp_path / "access.jsonl"
    p = start_proxy("--policy", str(write_policy(tmp_path, pki, "block")), "--hosts", str(hosts), "--access-log", str(log))
    genuine = serve(pki, "genuine", "1.3")
    forged = serve(pki, "attacker", "1.2")
    web = PlainServer(blob=b"b" * 2000)
    try:
        r = curl(p, "genuine.test", genuine.port, "1.3")
        assert r.returncode == 0
        assert curl(p, "genuine.test", forged.port, "1.2").returncode != 0
        got, _, _ = raw_request(p.port, f"CONNECT genuine.test:{forged.port} HTTP/1.1\r\n\r\n".encode())   # known bad
        assert got == 403
        request = f"GET http://127.0.0.1:{web.port}/blob HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        got, _, body = raw_request(p.port, (request + request.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")).encode())
        lines = access_lines(log, 5)
        assert len(lines) == 5, lines
        ok, blocked, known_bad, first, second = lines
        assert ok["event"]["action"] == "tunnel" and ok["chainwatch"]["verdict"] == "pass"
        assert ok["chainwatch"]["evidence"] in ("probe", "cache") and ok["tls"]["version"] == "1.3"
        assert ok["tls"]["client"]["server_name"] == "genuine.test" and ok["destination"]["port"] == genuine.port
        assert ok["source"]["bytes"] > 300 and ok["destination"]["bytes"] > len(b"hello from upstream")
        assert ok["network"]["bytes"] == ok["source"]["bytes"] + ok["destination"]["bytes"]
        assert ok["event"]["outcome"] == "success" and ok["chainwatch"]["close"]["reason"] == "closed"
        assert ok["http"]["request"]["method"] == "CONNECT" and ok["http"]["response"]["status_code"] == 200
        assert ok["event"]["duration"] > 0
        assert blocked["chainwatch"]["verdict"] == "block" and blocked["event"]["reason"] == "untrusted_chain"
        assert blocked["chainwatch"]["close"]["reason"] == "blocked" and blocked["event"]["outcome"] == "failure"
        assert "denied" in blocked["event"]["type"]
        assert known_bad["event"]["action"] == "refused" and known_bad["http"]["response"]["status_code"] == 403
        assert "untrusted_chain" in known_bad["message"]
        for line in (first, second):   # a keep-alive client: one line per request
            assert line["event"]["action"] == "http" and line["url"]["original"] == f"http://127.0.0.1:{web.port}/blob"
            assert line["http"]["request"]["method"] == "GET" and line["destination"]["bytes"] > 2000
        assert first["chainwatch"]["tunnel_id"] == second["chainwatch"]["tunnel_id"]
    finally:
        genuine.close()
        forged.close()
        web.close()


def test_reopened_on_sigusr1_and_flushed_at_sigterm(start_proxy, tmp_path):
    log = tmp_path / "access.jsonl"
    web = PlainServer(blob=b"b" * 2000)
    p = start_proxy("--access-log", str(log))
    try:
        def get():
            got, _, _ = raw_request(p.port, f"GET http://127.0.0.1:{web.port}/blob HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            assert got == 200
        get()
        assert len(access_lines(log, 1)) == 1
        rotated = tmp_path / "access.1.jsonl"
        log.rename(rotated)
        os.kill(p.pid, signal.SIGUSR1)
        time.sleep(0.3)
        for _ in range(20):
            get()
        assert p.stop() == 0
        assert len(rotated.read_text().splitlines()) == 1
        assert len(access_lines(log, 20, timeout=0)) == 20, "a line lost at shutdown"
    finally:
        web.close()


def test_a_tunnel_idle_past_its_timeout_says_so(start_proxy, tmp_path):
    from helpers import TCPServer
    log = tmp_path / "access.jsonl"
    silent = TCPServer(lambda conn: time.sleep(5))
    p = start_proxy("--access-log", str(log), "--idle-timeout", "1")
    try:
        s, status, _ = connect_via(p.port, f"127.0.0.1:{silent.port}")
        assert status == 200
        s.settimeout(5)
        assert s.recv(10) == b""
        line = access_lines(log, 1)[0]
        assert line["chainwatch"]["close"]["reason"] == "idle" and line["event"]["action"] == "tunnel"
        assert line["event"]["duration"] >= 1_000_000_000
        s.close()
    finally:
        silent.close()


def test_a_tunnel_cut_at_shutdown_gets_its_line(start_proxy, tmp_path):
    """A tunnel still open when the grace period ends (a long exfiltration, say) is closed by its loop and gets its
    access line, `shutdown`, with the bytes it moved. Before: the loops stopped under it and it had no line."""
    from helpers import TCPServer, echo_handler
    log = tmp_path / "access.jsonl"
    echo = TCPServer(echo_handler)
    p = start_proxy("--access-log", str(log), "--grace", "1")
    try:
        s, status, _ = connect_via(p.port, f"127.0.0.1:{echo.port}")
        assert status == 200
        s.sendall(b"x" * 1000)
        s.settimeout(5)
        got = b""
        while len(got) < 1000:
            got += s.recv(4096)
        t0 = time.monotonic()
        assert p.stop() == 0
        assert time.monotonic() - t0 < 8
        lines = access_lines(log, 1, timeout=0)
        assert len(lines) == 1, lines
        line = lines[0]
        assert line["chainwatch"]["close"]["reason"] == "shutdown" and line["event"]["action"] == "tunnel", line
        s.close()
    finally:
        echo.close()
