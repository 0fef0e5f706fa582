"""Live policy reload: SIGHUP and --watch, a bad file kept out, tunnels under load untouched."""
import os
import signal
import threading
import time

import pytest

from conftest import Proxy
from helpers import TCPServer, connect_via, echo_handler, recv_exactly
from test_detection import alert_lines, curl, pki, serve, write_policy  # noqa: F401 - pki is a fixture


def wait_for(predicate, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def reloadable(tmp_path, pki):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    policy = write_policy(tmp_path, pki, "alert")
    p = Proxy(["--policy", str(policy), "--hosts", str(hosts), "--alert-log", str(tmp_path / "alerts.jsonl"), "--watch"], tmp_path)
    p.policy = policy
    p.alert_log = tmp_path / "alerts.jsonl"
    yield p
    p.stop()


def test_sighup_applies_a_good_file_and_rejects_a_bad_one(reloadable, pki, tmp_path):
    p = reloadable
    server = serve(pki, "attacker", "1.2")
    try:
        p.action = "alert"
        r = curl(p, "genuine.test", server.port, "1.2")
        assert r.returncode == 0 and [l["event"]["action"] for l in alert_lines(p, server.port)] == ["alert"]

        good = p.policy.read_text()
        p.policy.write_text(good.replace("action: alert", "action: blok"))
        os.kill(p.pid, signal.SIGHUP)
        assert wait_for(lambda: "policy reload rejected" in p.output()), p.output()
        assert f"{p.policy}:3:11: error:" in p.output()
        r = curl(p, "genuine.test", server.port, "1.2")
        assert r.returncode == 0, "the old (alert) policy must stay in force"

        p.policy.write_text(good.replace("action: alert", "action: block"))
        os.kill(p.pid, signal.SIGHUP)
        assert wait_for(lambda: "reloaded (generation" in p.output())
        r = curl(p, "genuine.test", server.port, "1.2")
        assert r.returncode != 0 and b"s_server" not in r.stdout
        assert [l["event"]["action"] for l in alert_lines(p, server.port)] == ["alert", "alert", "block"]
    finally:
        server.close()


def test_watch_follows_the_file(reloadable):
    p = reloadable
    before = p.output().count("reloaded (generation")
    time.sleep(1.1)   # modification times have one-second granularity on some filesystems
    p.policy.write_text(p.policy.read_text() + "\n# touched\n")
    assert wait_for(lambda: p.output().count("reloaded (generation") > before, timeout=5), p.output()


def test_reload_under_load_drops_and_corrupts_nothing(reloadable):
    p = reloadable
    echo = TCPServer(echo_handler)
    errors = []
    stop = threading.Event()

    def client(i):
        try:
            s, status, _ = connect_via(p.port, f"127.0.0.1:{echo.port}", timeout=30)
            with s:
                assert status == 200
                n = 0
                while not stop.is_set() and n < 400:
                    payload = os.urandom(4096 + i)
                    s.sendall(payload)
                    assert recv_exactly(s, len(payload)) == payload
                    n += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{i}: {e!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for _ in range(10):
        os.kill(p.pid, signal.SIGHUP)
        time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join(60)
    echo.close()
    assert not errors, errors[:5]
    # Signals that arrive during a reload coalesce into one; most of the ten must have been applied.
    assert p.output().count("reloaded (generation") >= 5
