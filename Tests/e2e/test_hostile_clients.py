"""Issue 12's findings on the client and operator side, each a regression test: a second instance on a port in use,
head parsing that is linear in the head's length and bounded in time, half-closed clients."""
import subprocess

from conftest import BIN


def test_second_instance_on_a_port_in_use_refuses_to_start(start_proxy, tmp_path):
    """SO_REUSEPORT let a second process (same user) bind the port silently and take its share of the connections
    under its own policy. Only the proxy's own loops may share its port."""
    first = start_proxy()
    r = subprocess.run([BIN, "run", "--listen", f"127.0.0.1:{first.port}", "--alert-log", str(tmp_path / "b.jsonl")],
                       capture_output=True, timeout=10)
    assert r.returncode != 0
    assert b"another process listens there" in r.stderr, r.stderr
    assert first.proc.poll() is None   # the first is untouched
