"""Detection end to end: forged chains made with the openssl CLI, served by concurrent TLS servers, fetched through the
real proxy by curl -k (a client that validates nothing: the one chainwatch protects) and openssl s_client -proxy.
TLS 1.2 shows the chain in the tunnel (passive); TLS 1.3 needs chainwatch's probe. Both actions."""
import json
import os
import pathlib
import subprocess
import time

import pytest

from conftest import BIN, Proxy
from helpers import HTTPServer, OpenSSLServer, wait_alert_lines



def pin(hexdigest):
    return ":".join(hexdigest[i:i + 2] for i in range(0, len(hexdigest), 2))


def write_policy(directory, pki, action):
    """The three-level comparison for genuine.test (root, intermediate, leaf subject) with the test root as the
    app-bundled anchor, plus defaults with the same action for everything else."""
    policy = directory / f"policy-{action}.yaml"
    policy.write_text(f"""version: 1
defaults:
  action: {action}
  anchors: [system]
  on_probe_error: {action}
rules:
  - name: genuine
    match: [genuine.test]
    action: {action}
    on_probe_error: {action}
    anchors: [system, {pki}/genuine-root.pem]
    pins:
      root:
        cert: ["{pin(pki.fps['genuine-root']['sha256'])}"]
      intermediate:
        spki: ["{pin(pki.fps['genuine-intermediate']['spki'])}"]
      leaf:
        subject: "CN=genuine.test,O=Chainwatch Test"
""")
    return policy


def start(tmp, pki, action, *extra):
    hosts = tmp / "hosts"
    hosts.write_text("127.0.0.1 genuine.test unpinned.test other.test\n")
    log = tmp / f"alerts-{action}.jsonl"
    p = Proxy(["--policy", str(write_policy(tmp, pki, action)), "--hosts", str(hosts), "--alert-log", str(log),
               "--probe-timeout", "3", *extra], tmp)
    p.alert_log = log
    return p


@pytest.fixture(scope="module", params=["block", "alert"])
def proxy(request, tmp_path_factory, pki):
    tmp = tmp_path_factory.mktemp(f"detect-{request.param}")
    p = start(tmp, pki, request.param)
    p.action = request.param
    yield p
    p.stop()


def alert_lines(proxy, port, wait=True, count=1):
    """The alert lines about upstream port `port` (each test uses its own server, so its own port), ECS-checked; with
    `wait`, polled (3 s at most) until there are `count`: the writer's thread writes after the client has its answer."""
    return wait_alert_lines(proxy.alert_log, port, count, timeout=3 if wait else 0)


PAGE = b"hello from upstream"


class Upstream(HTTPServer):
    """A concurrent HTTPS server (Python ssl, threads) presenting one chain in one TLS version. Concurrent like a real
    server: under block, the tunnel's handshake is held while chainwatch's own probe (TLS 1.3) connects beside it."""

    def __init__(self, certfile, keyfile, tls):
        super().__init__(certfile=str(certfile), keyfile=str(keyfile), tls=tls)


SERVED_PORTS = set()


def serve(pki, name, tls, chain=None, tmp=None):
    """Serves the leaf NAME with `chain` (default: its own intermediates) in TLS `tls`, on a port no earlier upstream
    of this module had: the module's proxy keeps verdicts, known-bad marks and alert lines by host and port, so a
    reused ephemeral port would carry an earlier test's verdict into this one."""
    full = pki / f"{name}.fullchain.pem"
    if chain is not None:
        full = pathlib.Path(str(chain) + ".full.pem")
        full.write_text((pki / f"{name}.pem").read_text() + pathlib.Path(chain).read_text())
    for _ in range(50):
        server = Upstream(full, pki / f"{name}.key", tls)
        if server.port not in SERVED_PORTS:
            break
        server.close()
    SERVED_PORTS.add(server.port)
    return server


def curl(proxy, host, port, tls):
    args = ["curl", "-sk", "--max-time", "10", "-x", proxy.url, f"https://{host}:{port}/"]
    args += ["--tlsv1.3"] if tls == "1.3" else ["--tls-max", "1.2"]
    return subprocess.run(args, capture_output=True, timeout=20)


GENUINE_CASES = ["genuine", "rekeyed"]
FORGED_CASES = [
    # (served certificate, host asked for, expected reason)
    ("attacker", "genuine.test", "untrusted_chain"),            # attacker root with identical subjects
    ("other-intermediate", "genuine.test", "intermediate_mismatch"),   # same root, another intermediate
    ("otherhost", "genuine.test", "hostname_mismatch"),          # a leaf for another host under the pinned intermediate
    ("genuine", "unpinned.test", "untrusted_chain"),             # unpinned host whose chain does not validate (system trust)
    ("expired", "genuine.test", "expired"),                      # an expired leaf
]


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("name", GENUINE_CASES)
def test_genuine_and_rekeyed_chains_pass_silently(proxy, pki, name, tls):
    server = serve(pki, name, tls)
    try:
        r = curl(proxy, "genuine.test", server.port, tls)
        assert r.returncode == 0 and PAGE in r.stdout, r.stderr
        time.sleep(0.3)
        assert alert_lines(proxy, server.port, wait=False) == []
    finally:
        server.close()


def expect_caught(proxy, port, r, reason, tls):
    lines = alert_lines(proxy, port)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["event"]["action"] == proxy.action
    assert line["event"]["reason"] == reason, line
    # The chain came from the tunnel (1.2) or a probe (1.3); a verdict reached before for the same certificates,
    # rule and name is reused and says so.
    assert line["chainwatch"]["evidence"] in (("passive" if tls == "1.2" else "probe"), "cache")
    assert line["tls"]["version"] == tls
    if proxy.action == "block":
        assert r.returncode != 0 and PAGE not in r.stdout, "the client got the forged server's page"
    else:
        assert r.returncode == 0 and PAGE in r.stdout, r.stderr
    return line


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("name,host,reason", FORGED_CASES)
def test_forged_chains_are_caught(proxy, pki, name, host, reason, tls):
    server = serve(pki, name, tls)
    try:
        r = curl(proxy, host, server.port, tls)
        line = expect_caught(proxy, server.port, r, reason, tls)
        assert line["tls"]["client"]["server_name"] == host
        assert line["tls"]["server"]["hash"]["sha256"] == pki.fps[name]["sha256"]
    finally:
        server.close()


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
def test_genuine_certificate_appended_to_forged_chain_does_not_fool_it(proxy, pki, tls, tmp_path):
    chain = tmp_path / "forged-plus-genuine.pem"
    chain.write_text((pki / "attacker.chain.pem").read_text() + (pki / "genuine-intermediate.pem").read_text()
                     + (pki / "genuine-root.pem").read_text())
    server = serve(pki, "attacker", tls, chain=chain)
    try:
        r = curl(proxy, "genuine.test", server.port, tls)
        expect_caught(proxy, server.port, r, "untrusted_chain", tls)
    finally:
        server.close()


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
def test_openssl_s_client_through_the_proxy(proxy, pki, tls):
    server = serve(pki, "attacker", tls)
    try:
        r = subprocess.run(["openssl", "s_client", "-proxy", f"127.0.0.1:{proxy.port}", "-connect", f"genuine.test:{server.port}",
                            "-servername", "genuine.test", f"-tls{tls.replace('.', '_')}"],
                           input=b"GET / HTTP/1.0\r\n\r\n", capture_output=True, timeout=20)
        lines = alert_lines(proxy, server.port)
        assert [l["event"]["reason"] for l in lines] == ["untrusted_chain"]
        if proxy.action == "block":
            assert PAGE not in r.stdout and b"Server certificate" not in r.stdout
        else:
            assert b"Server certificate" in r.stdout
    finally:
        server.close()


def test_known_bad_upstream_gets_403_at_once_under_block_only(proxy, pki):
    server = serve(pki, "attacker", "1.2")
    try:
        curl(proxy, "genuine.test", server.port, "1.2")
        r = subprocess.run(["curl", "-sk", "-x", proxy.url, "-o", "/dev/null", "-w", "%{http_connect}",
                            f"https://genuine.test:{server.port}/"], capture_output=True, timeout=20)
        if proxy.action == "block":
            assert r.stdout == b"403"   # refused before any connection to the upstream
            # One finding per mark: the line that marked the upstream says until when and how to clear it; the 403s
            # answered for the mark are counted on it, not written as findings of their own (issue 27).
            lines = alert_lines(proxy, server.port)
            time.sleep(0.3)
            assert alert_lines(proxy, server.port, wait=False) == lines and len(lines) == 1, lines
            mark = lines[0]["chainwatch"]["known_bad"]
            assert mark["clear"] == f"chainwatch ctl clear-known-bad genuine.test:{server.port}"
            assert 299 <= mark["seconds"] <= 300 and mark["until"] > lines[0]["@timestamp"]
            assert "403 until" in lines[0]["message"] and mark["clear"] in lines[0]["message"]
        else:
            assert r.stdout == b"200"   # alert never refuses: the second tunnel is judged (from the cache) and logged
            lines = alert_lines(proxy, server.port, count=2)
            assert [l["event"]["action"] for l in lines] == ["alert", "alert"]
            assert "known_bad" not in lines[0]["chainwatch"]
    finally:
        server.close()


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
def test_a_client_chosen_server_name_does_not_deny_the_host_to_others(proxy, pki, tls):
    """A ClientHello naming another server than the CONNECT host is judged for that name (here the defaults, whose
    anchors do not know the test root: untrusted_chain) and only its own tunnel is blocked. The CONNECT host is not
    marked bad for every client: the next ordinary client gets the page, judged on its own."""
    server = serve(pki, "genuine", tls)
    try:
        subprocess.run(["curl", "-sk", "--max-time", "10", "--tls-max", tls, "-x", proxy.url,
                        "--connect-to", f"other.test:{server.port}:genuine.test:{server.port}",
                        f"https://other.test:{server.port}/"], capture_output=True, timeout=20)
        lines = alert_lines(proxy, server.port)
        assert lines and lines[0]["tls"]["client"]["server_name"] == "other.test", lines
        assert lines[0]["destination"]["domain"] == "genuine.test" and lines[0]["event"]["action"] == proxy.action
        ordinary = curl(proxy, "genuine.test", server.port, tls)
        assert ordinary.returncode == 0 and PAGE in ordinary.stdout, (ordinary, alert_lines(proxy, server.port, wait=False))
        assert len(alert_lines(proxy, server.port, wait=False)) == 1, "the ordinary tunnel is clean"
    finally:
        server.close()


def test_interception_ca_in_trusted_anchors_is_still_caught_by_pins(tmp_path, pki):
    p = start(tmp_path, pki, "block", "--ca", str(pki / "attacker-root.pem"))
    p.action = "block"
    try:
        for tls in ("1.2", "1.3"):
            server = serve(pki, "attacker", tls)
            try:
                r = curl(p, "genuine.test", server.port, tls)
                line = expect_caught(p, server.port, r, "root_mismatch", tls)
                assert line["chainwatch"]["level"] == "root"
                assert line["chainwatch"]["chain"]["validated"] is True
            finally:
                server.close()
    finally:
        p.stop()


def test_probe_failure_blocks_under_block(tmp_path, pki):
    """An upstream that completes the tunnel's TLS 1.3 handshake but drops every other connection: chainwatch cannot
    see the chain, and a block rule's default for that is to block with probe_failed."""
    import socket
    import ssl
    import threading
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki / "genuine.fullchain.pem"), str(pki / "genuine.key"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]

    def serve_first_only():
        first = True
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if not first:
                conn.close()   # the probe: dropped before any handshake
                continue
            first = False
            threading.Thread(target=lambda c=conn: _serve_once(ctx, c), daemon=True).start()

    threading.Thread(target=serve_first_only, daemon=True).start()
    p = start(tmp_path, pki, "block")
    p.action = "block"
    try:
        r = curl(p, "genuine.test", port, "1.3")
        lines = alert_lines(p, port)
        assert [l["event"]["reason"] for l in lines] == ["probe_failed"]
        assert lines[0]["event"]["action"] == "block"
        assert r.returncode != 0 and PAGE not in r.stdout
    finally:
        listener.close()
        p.stop()


def _serve_once(ctx, conn):
    try:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.settimeout(10)
            tls.recv(65536)
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 19\r\nConnection: close\r\n\r\n" + PAGE)
    except OSError:
        pass


def test_alert_log_survives_rotation_and_is_flushed_on_sigterm(tmp_path, pki):
    p = start(tmp_path, pki, "alert")
    p.action = "alert"
    try:
        server = serve(pki, "expired", "1.2")
        curl(p, "genuine.test", server.port, "1.2")
        assert len(alert_lines(p, server.port)) == 1
        rotated = tmp_path / "rotated.jsonl"
        p.alert_log.rename(rotated)
        os.kill(p.pid, 10)   # SIGUSR1: reopen
        time.sleep(0.3)
        server2 = serve(pki, "expired", "1.2")
        curl(p, "genuine.test", server2.port, "1.2")
        assert len(alert_lines(p, server2.port)) == 1, "no line in the reopened file"
        assert len(rotated.read_text().splitlines()) == 1
        server3 = serve(pki, "expired", "1.2")
        curl(p, "genuine.test", server3.port, "1.2")
        assert p.stop() == 0
        assert len(alert_lines(p, server3.port, wait=False)) == 1, "line lost at shutdown"
        for s in (server, server2, server3):
            s.close()
    finally:
        p.stop()


def test_full_disk_for_the_alert_log_is_reported(tmp_path, pki):
    """A full disk is reported and traffic goes on; at exit the lines the file never took are not dropped silently
    (they were, with `stopped; 0 alert line(s) written` and exit status 0): after an error that counts them they are
    written whole to standard error, and the exit status is 1."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    p = Proxy(["--policy", str(write_policy(tmp_path, pki, "alert")), "--hosts", str(hosts), "--alert-log", "/dev/full"], tmp_path)
    server = serve(pki, "expired", "1.2")
    stopped = False
    try:
        r = curl(p, "genuine.test", server.port, "1.2")
        assert r.returncode == 0, "a full alert log must not break traffic"
        deadline = time.monotonic() + 3
        while b"No space left on device" not in p.output().encode() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "No space left on device" in p.output()
        status = p.stop()
        stopped = True
        out = p.output()
        assert status == 1, f"exit status {status} with an alert line unwritten:\n{out[-2000:]}"
        assert "1 line(s) could not be written before exit; they follow on standard error" in out, out[-2000:]
        kept = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        assert [k["event"]["reason"] for k in kept] == ["expired"], out[-2000:]
    finally:
        server.close()
        if not stopped:
            p.stop()


def test_a_line_cut_by_a_full_disk_is_not_split_across_a_rotation(tmp_path, pki):
    """A write that fills the disk part-way through a line left that part in the file and kept the rest as its own
    record: rotated then, the old file ended in half a line and the new one began with the other half, two broken
    records. The part written is cut off again, so each file ends at a line's end and the whole line goes to the
    new file. The disk fills here by RLIMIT_FSIZE: writes past it fail with EFBIG, the first one short."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    log = tmp_path / "alerts.jsonl"
    args = ["--policy", str(write_policy(tmp_path, pki, "alert")), "--hosts", str(hosts), "--alert-log", str(log)]
    first = serve(pki, "expired", "1.2")
    second = serve(pki, "expired", "1.2")
    p = Proxy(args, tmp_path, max_file_bytes=4500)   # room for one line (about 3.5 KB) and part of the next
    p.alert_log = log
    try:
        curl(p, "genuine.test", first.port, "1.2")
        assert len(alert_lines(p, first.port)) == 1
        size = log.stat().st_size
        assert 2300 < size < 4500, f"a line of {size} bytes does not fit the test's arithmetic"
        curl(p, "genuine.test", second.port, "1.2")
        deadline = time.monotonic() + 5
        while "write failed" not in p.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "File too large" in p.output()
        assert log.stat().st_size == size, "the part of the second line that was written is cut off again"
        rotated = tmp_path / "rotated.jsonl"
        log.rename(rotated)
        os.kill(p.pid, 10)   # SIGUSR1: reopen; the writer retries each second
        assert [l["destination"]["port"] for l in alert_lines(p, second.port)] == [second.port]
        assert p.stop() == 0
        old = [json.loads(raw) for raw in rotated.read_text().splitlines()]
        new = [json.loads(raw) for raw in log.read_text().splitlines()]
        assert [l["destination"]["port"] for l in old] == [first.port]
        assert [l["destination"]["port"] for l in new] == [second.port]
        assert rotated.read_text().endswith("\n") and log.read_text().endswith("\n")
    finally:
        first.close()
        second.close()
        p.stop()


def test_bad_policy_file_is_refused_with_file_line_and_problem(tmp_path):
    from conftest import BIN
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ndefaults:\n  action: blok\nrules: []\n")
    r = subprocess.run([BIN, "run", "--listen", "127.0.0.1:3999", "--policy", str(bad)], capture_output=True, timeout=10)
    assert r.returncode == 1
    assert f"{bad}:3:11: error:".encode() in r.stderr, r.stderr


def test_pin_writes_a_policy_that_passes_the_genuine_chain_and_blocks_a_forged_one(tmp_path, pki):
    """pin → file → policy check → run: the walk-through of the README."""
    from conftest import BIN
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    genuine = serve(pki, "genuine", "1.3")
    try:
        r = subprocess.run([BIN, "pin", "--action", "block", "--hosts", str(hosts), "--ca", str(pki / "genuine-root.pem"),
                            f"genuine.test:{genuine.port}"], capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        text = r.stdout.decode()
        assert pki.fps["genuine-root"]["spki"] not in text   # pins are written sha256/base64, not hex
        assert "CN=genuine.test,O=Chainwatch Test" in text
        assert "BACKUP PIN" in text
    finally:
        genuine.close()
    policy = tmp_path / "pinned.yaml"
    policy.write_text(text.replace(f"genuine.test:{genuine.port}", "genuine.test"))   # the rule for every port
    check = subprocess.run([BIN, "policy", "check", str(policy)], capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr

    log = tmp_path / "alerts.jsonl"
    # The interception CA is trusted too (--ca): only the pins can tell the forged chain apart.
    p = Proxy(["--policy", str(policy), "--hosts", str(hosts), "--alert-log", str(log), "--ca", str(pki / "attacker-root.pem")], tmp_path)
    p.alert_log, p.action = log, "block"
    try:
        for name, tls in [("genuine", "1.2"), ("rekeyed", "1.3"), ("genuine", "1.3")]:
            server = serve(pki, name, tls)
            try:
                r = curl(p, "genuine.test", server.port, tls)
                assert r.returncode == 0 and PAGE in r.stdout, (name, tls, r.stderr)
                time.sleep(0.2)
                assert alert_lines(p, server.port, wait=False) == []
            finally:
                server.close()
        for tls in ("1.2", "1.3"):
            server = serve(pki, "attacker", tls)
            try:
                r = curl(p, "genuine.test", server.port, tls)
                expect_caught(p, server.port, r, "root_mismatch", tls)
            finally:
                server.close()
    finally:
        p.stop()


def test_evidence_source_is_probe_then_cache_then_passive_for_a_new_chain(tmp_path, pki):
    p = start(tmp_path, pki, "alert")
    p.action = "alert"
    try:
        sources = []
        for tls in ("1.3", "1.2"):
            server = serve(pki, "otherhost", tls)
            try:
                curl(p, "genuine.test", server.port, tls)
                sources += [l["chainwatch"]["evidence"] for l in alert_lines(p, server.port)]
            finally:
                server.close()
        other = serve(pki, "other-intermediate", "1.2")
        try:
            curl(p, "genuine.test", other.port, "1.2")
            sources += [l["chainwatch"]["evidence"] for l in alert_lines(p, other.port)]
        finally:
            other.close()
        assert sources == ["probe", "cache", "passive"]
    finally:
        p.stop()


def test_alert_log_is_not_opened_through_a_symlink_and_is_not_left_writable_by_others(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "alerts.jsonl"
    link.symlink_to(target)
    r = subprocess.run([BIN, "run", "--listen", "127.0.0.1:1", "--alert-log", str(link)], capture_output=True, text=True,
                       timeout=15)
    assert r.returncode == 1 and "symbolic link" in r.stderr, r.stderr
    loose = tmp_path / "loose.jsonl"
    loose.write_text("")
    os.chmod(loose, 0o666)
    p = Proxy(["--alert-log", str(loose)], tmp_path)
    try:
        assert oct(loose.stat().st_mode & 0o777) == oct(0o644)
    finally:
        p.stop()


def test_certificates_ec_keys_are_decoded_through_openssls_builtin_method(start_proxy):
    """At start the proxy registers OpenSSL's built-in EC method for the keys of the certificates it decodes (3.0's
    provider decoders cost a P-256 leaf about 170 us of 200, bench/RESULTS.md) and says so at debug level; the other
    tests, whose chains are P-256, run on it."""
    proxy = start_proxy("--log-level", "debug")
    assert "EC keys in certificates are decoded through OpenSSL's built-in EC method" in proxy.output(), proxy.output()
