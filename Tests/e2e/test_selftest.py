"""`chainwatch selftest`: its own genuine, forged and stalling TLS servers on loopback, its own proxy (this binary),
and a client that validates nothing; and `--against` a running proxy, which must block or report a forgery and a
stalled handshake. The negative case shows the checks can fail: a proxy that only alerts, watched without its admin
listener, cannot prove it reported anything; nor can one that refuses the selftest's servers as destinations."""
import subprocess
import sys

import pytest

from conftest import BIN
from helpers import (free_port, interrupted_once_its_table_is_made, namespace_of_its_own, nft_tables, still_running, stop_process,
                     wait_for_port)

LIMIT = 90


def selftest(*args):
    proc = subprocess.run([BIN, "selftest", *args], capture_output=True, text=True, timeout=LIMIT)
    return proc.returncode, proc.stdout + proc.stderr


def block_policy(tmp_path):
    policy = tmp_path / "block.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: block\n  anchors: [system]\n")
    return policy


def test_selftest_proves_pass_block_alert_and_fail_closed():
    code, out = selftest()
    assert code == 0, out
    checks = [l for l in out.splitlines() if l.startswith(("ok ", "FAIL"))]
    labels = [l.split(":")[0][5:] for l in checks]
    for version in ["TLS 1.2", "TLS 1.3"]:
        for case in ["pass", "block", "known-bad", "alert", "fail-closed"]:
            assert f"{version} {case}" in labels, (version, case, out)
    assert len(checks) == 18 and all(l.startswith("ok ") for l in checks), out
    assert "block untrusted_chain" in out and "alert untrusted_chain" in out, out
    assert "block handshake_timeout" in out and "block probe_failed" in out, out
    assert out.rstrip().endswith("selftest: ok"), out


def test_selftest_works_in_a_private_directory_of_its_own():
    """Its certificates, keys and the proxy's logs go to a directory mkdtemp made (mode 0700, a name nobody can
    guess). Before: /tmp/chainwatch-selftest-PID, removed and made again with the default mode: another local user
    could make that path first (a link), and root would write through it."""
    import os
    import re
    import stat
    code, out = selftest("--keep")
    assert code == 0, out
    kept = re.search(r"kept: (\S+)", out)
    assert kept, out
    path = kept.group(1)
    try:
        assert not re.search(r"chainwatch-selftest-\d+$", path), f"a predictable name: {path}"
        info = os.lstat(path)
        assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700, oct(info.st_mode)
    finally:
        subprocess.run(["rm", "-rf", path], check=False)


def test_selftest_against_a_running_proxy_counts_its_findings(start_proxy):
    admin = free_port()
    # The built-in policy (system trust, alert); a short probe timeout, so that the stalled case's finding comes
    # within the selftest's wait (which that case always waits out).
    proxy = start_proxy("--admin", f"127.0.0.1:{admin}", "--probe-timeout", "2")
    code, out = selftest("--against", f"127.0.0.1:{proxy.port}", "--admin", f"127.0.0.1:{admin}", "--timeout", "4")
    assert code == 0, out
    assert out.count("ok   ") == 3 and out.count("reported (1 finding(s) counted)") == 3, out


def test_selftest_against_a_blocking_proxy_needs_no_admin_listener(start_proxy, tmp_path):
    policy = block_policy(tmp_path)
    proxy = start_proxy("--policy", str(policy), "--admin", "off", "--probe-timeout", "2")
    code, out = selftest("--against", f"127.0.0.1:{proxy.port}", "--admin", "off", "--timeout", "8")
    assert code == 0, out
    assert out.count("ok   ") == 3 and out.count("blocked:") == 3, out


def test_selftest_against_a_proxy_that_refuses_the_destination_proves_nothing(start_proxy, tmp_path):
    # Its 403s come from the destination rules, before any chain is seen: they must not count as blocks (before the
    # reachability check they did, and this printed "ok ... blocked" three times).
    policy = block_policy(tmp_path)
    proxy = start_proxy("--policy", str(policy), "--admin", "off", "--deny-destination", "127.0.0.0/8")
    code, out = selftest("--against", f"127.0.0.1:{proxy.port}", "--admin", "off", "--timeout", "8")
    assert code == 2, out
    assert "ok   " not in out and "does not open a tunnel to the selftest's server" in out, out
    assert "(the proxy answered 403)" in out and "--allow-destination" in out, out


def test_selftest_against_fails_when_nothing_shows_a_finding(start_proxy):
    proxy = start_proxy("--admin", "off", "--probe-timeout", "2")   # alerts only, and no admin listener to count them
    code, out = selftest("--against", f"127.0.0.1:{proxy.port}", "--admin", "off", "--timeout", "4")
    assert code == 1, out
    assert out.count(": passed unflagged:") == 3 and out.count("FAIL ") == 3 and out.rstrip().endswith("selftest: FAILED"), out


def test_selftest_against_nothing_cannot_run_and_says_why():
    """Nothing listens: the selftest cannot be set up (2, "cannot run"), as for a proxy that refuses the destination;
    it said FAILED (1) with the same reason on each of its checks."""
    port = free_port()
    code, out = selftest("--against", f"127.0.0.1:{port}", "--admin", "off", "--timeout", "2")
    assert code == 2, out
    assert "cannot run: cannot use 127.0.0.1:" in out and "Connection refused" in out and "FAIL" not in out, out


def test_selftest_against_a_web_server_that_is_no_proxy_says_so():
    """A plain web server at --against answers the CONNECT with an error of its own (Python's http.server: 501). That
    is no destination rule, so no advice to allow one: the selftest asks whether it is a proxy at all."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port("127.0.0.1", port, server)
        code, out = selftest("--against", f"127.0.0.1:{port}", "--admin", "off", "--timeout", "2")
    finally:
        stop_process(server)
    assert code == 2, out
    assert "answered the selftest's CONNECT with 501" in out and "is it an HTTP proxy?" in out, out
    assert "--allow-destination" not in out, out


def test_selftest_transparent_redirects_its_client_and_proves_the_loop_guard():
    """`selftest --transparent`, in a namespace the test made: the same ten cases once more through a --transparent
    listener its own nftables table redirects to (lines and access lines must say transparent), the listener itself
    refused as a destination, and its own connection redirected back reset by the loop guard. Its table is gone
    afterwards."""
    with namespace_of_its_own("cwself") as ns:
        proc = subprocess.run(["ip", "netns", "exec", ns, BIN, "selftest", "--transparent"], capture_output=True, text=True, timeout=LIMIT)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        checks = [l for l in out.splitlines() if l.startswith(("ok ", "FAIL"))]
        labels = [l.split(":")[0][5:] for l in checks]
        for version in ["TLS 1.2", "TLS 1.3"]:
            for case in ["pass", "block", "known-bad", "alert", "fail-closed"]:
                assert f"{version} {case}" in labels, (version, case, out)
            for case in ["pass", "block", "blocked again", "alert", "fail-closed"]:
                assert f"{version} (transparent) {case}" in labels, (version, case, out)
        assert "transparent loop guard" in labels and "transparent" in labels, out
        assert "the proxy reset its own connection redirected back" in out, out
        assert out.count("via transparent") == 6 and out.count("TRANSPARENT to 127.0.0.1:") == 8, out
        # 18 as without --transparent, 10 cases, 6 lines and 2 with none, 8 access lines, 2 for the listener itself
        assert len(checks) == 18 + 10 + 8 + 8 + 2 and all(l.startswith("ok ") for l in checks), out
        assert "chainwatch_selftest" not in nft_tables(ns)


def test_selftest_transparent_says_what_it_needs_without_root():
    """Not root: no nftables rule can be added. Status 2 (could not be set up) with the reason, before any
    certificate or server is made; not a failed check."""
    import os
    import shutil
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root to run the selftest as another user")
    proc = subprocess.run(["runuser", "-u", "nobody", "--", BIN, "selftest", "--transparent"], capture_output=True, text=True,
                          timeout=LIMIT, env={"PATH": os.environ["PATH"], "TMPDIR": "/tmp"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "needs root (CAP_NET_ADMIN)" in out and "ip netns exec" in out, out
    assert "selftest: ok" not in out and "proxy:" not in out, out


def test_selftest_transparent_interrupted_leaves_no_table_behind():
    """SIGTERM while it runs (after its table is made): the table is deleted and its proxy stopped before it dies of
    the signal. Before, both stayed: a redirect rule in the ruleset pointing at a listener that was gone, and an
    orphaned proxy."""
    import signal
    with namespace_of_its_own("cwsig") as ns:
        status, out, proxies = interrupted_once_its_table_is_made(ns, [BIN, "selftest", "--transparent"], "chainwatch_selftest", "run --listen")
        assert status == -signal.SIGTERM, (status, out)
        assert "chainwatch_selftest" not in nft_tables(ns)
        assert proxies and not still_running(proxies), proxies


def test_selftest_transparent_is_not_for_a_running_proxy():
    code, out = selftest("--transparent", "--against", "127.0.0.1:3128")
    assert code != 0 and "--transparent checks the selftest's own proxy" in out, out
