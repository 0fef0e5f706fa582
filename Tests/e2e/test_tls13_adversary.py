"""TLS 1.3 against an adversary who knows chainwatch probes: the outcomes the probe design must reach.

The servers are `openssl s_server` (one connection at a time, `-www` status page) or the threaded Python HTTPS server
of helpers.py (concurrent), presenting the genuine chain or the attacker's (same subjects, another CA) from
make-pki.sh. Interceptors (interceptor.py) sit in front of them and pick a backend per connection. The proxy trusts the
attacker's CA (`--ca`: an interception CA installed on the machine), so only the pins of the rule `genuine` tell the
chains apart: a forged chain is `root_mismatch`, or `evidence_mismatch` when a tunnel disagrees with the evidence it
would rely on. Clients are curl -k and openssl s_client (neither validates: chainwatch is what protects them).

Scenarios: 1 a fingerprinting interceptor that spares probes, 2 one that behaves until a probe is cached, 3 servers
that take one connection at a time, 4 HelloRetryRequest, 5 probes that fail (fail closed), 6 RSA and ECDSA leaves on
one server, 7 resumption and 0-RTT."""
import subprocess
import threading
import time

import pytest

from conftest import BIN
from helpers import (HTTPServer, OpenSSLServer, TCPServer, colon_hex, read_alert_lines, wait_alert_lines)
from interceptor import BehaveThenForge, Interceptor, spare_openssl_defaults


# A forged chain under the pinned rule (its root is not the pinned one), or a tunnel not covered by its evidence.
CAUGHT = {"root_mismatch", "evidence_mismatch"}
REQUEST = b"GET / HTTP/1.0\r\n\r\n"
STATUS_PAGE = b"<HTML><BODY"        # what `openssl s_server -www` answers
PAGE = b"hello from upstream"      # what the Python server answers on /
# What curl -v prints when the server's first flight reaches it.
CURL_SERVER_HELLO = b"(IN), TLS handshake, Server hello"


@pytest.fixture(scope="module")
def rsa_leaf(pki, tmp_path_factory):
    """An RSA 2048 leaf for genuine.test (subject and SANs of `genuine`) under the genuine intermediate; returns
    (cert, key, fullchain)."""
    d = tmp_path_factory.mktemp("rsa-leaf")
    ext = d / "leaf.ext"
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:genuine.test,IP:127.0.0.1\n"
                   "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "rsa.key"), "-out", str(d / "rsa.csr"),
        "-subj", "/O=Chainwatch Test/CN=genuine.test")
    run("openssl", "x509", "-req", "-in", str(d / "rsa.csr"), "-CA", str(pki / "genuine-intermediate.pem"),
        "-CAkey", str(pki / "genuine-intermediate.key"), "-set_serial", "0x2100", "-days", "3650", "-sha256",
        "-extfile", str(ext), "-out", str(d / "rsa.pem"))
    (d / "rsa.fullchain.pem").write_text((d / "rsa.pem").read_text() + (pki / "genuine.chain.pem").read_text())
    return d / "rsa.pem", d / "rsa.key", d / "rsa.fullchain.pem"


@pytest.fixture
def closing():
    """Registers servers and interceptors; closes them (each stops its own processes by PID) at teardown."""
    things = []

    def add(thing):
        things.append(thing)
        return thing
    yield add
    for thing in reversed(things):
        thing.close()


def pinned_policy(directory, pki, action, on_probe_error="same"):
    """The pinned rule `genuine` of test_detection (root certificate, intermediate SPKI, leaf subject; the test root
    an anchor). `on_probe_error`: a disposition, "same" for the rule's action, or None to leave the key out (`defaults`
    never sets it)."""
    disposition = action if on_probe_error == "same" else on_probe_error
    probe_line = f"    on_probe_error: {disposition}\n" if disposition else ""
    path = directory / f"policy-{action}-{disposition}.yaml"
    path.write_text(f"""version: 1
defaults:
  action: alert
  anchors: [system]
rules:
  - name: genuine
    match: [genuine.test]
    action: {action}
{probe_line}    anchors: [system, {pki}/genuine-root.pem]
    pins:
      root:
        cert: ["{colon_hex(pki.fps['genuine-root']['sha256'])}"]
      intermediate:
        spki: ["{colon_hex(pki.fps['genuine-intermediate']['spki'])}"]
      leaf:
        subject: "CN=genuine.test,O=Chainwatch Test"
""")
    return path


def hosts_file(directory):
    hosts = directory / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    return hosts


def start(start_proxy, tmp, pki, action, on_probe_error="same", probe_timeout=2, policy=None, extra=()):
    """The proxy with the pinned policy, genuine.test → 127.0.0.1, the attacker's CA trusted; `extra`: more options."""
    policy = policy or pinned_policy(tmp, pki, action, on_probe_error)
    # --grace 1: a tunnel left hanging by a failure does not hold the proxy's shutdown for the default 10 s.
    p = start_proxy("--policy", str(policy), "--hosts", str(hosts_file(tmp)), "--ca", str(pki / "attacker-root.pem"),
                    "--probe-timeout", str(probe_timeout), "--grace", "1", *extra)
    p.action = action
    return p


def s_server(pki, name, chain=None, **kw):
    """`openssl s_server -tls1_3` with leaf NAME and its intermediates (or `chain`)."""
    return OpenSSLServer(pki / f"{name}.pem", pki / f"{name}.key", chain=chain or pki / f"{name}.chain.pem", tls="1.3", **kw)


def threaded(fullchain, key, blob=b"", **kw):
    """The concurrent Python HTTPS server (TLS 1.3 only); GET /blob answers `blob`."""
    return HTTPServer(blob=blob, certfile=str(fullchain), keyfile=str(key), tls="1.3", **kw)


class Ran:
    """A finished client: returncode (None: killed at its time limit), stdout, stderr, elapsed seconds."""

    def __init__(self, returncode, stdout, stderr, elapsed):
        self.returncode, self.stdout, self.stderr, self.elapsed = returncode, stdout, stderr, elapsed

    def __repr__(self):
        return (f"<rc={self.returncode} {self.elapsed:.1f}s stdout={self.stdout[:120]!r} "
                f"stderr={self.stderr[-300:]!r}>")


def run(args, input=b"", timeout=10):
    """Runs a client to its end or kills it (by PID, subprocess.run does) after `timeout` seconds."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([str(a) for a in args], input=input, capture_output=True, timeout=timeout)
        return Ran(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)
    except subprocess.TimeoutExpired as e:
        return Ran(None, e.stdout or b"", e.stderr or b"", time.monotonic() - t0)


def curl(proxy, port, *options, path="/", max_time=6):
    return run(["curl", "-sk", "--max-time", max_time, "-x", proxy.url, *options, f"https://genuine.test:{port}{path}"],
               timeout=max_time + 4)


def s_client(proxy, port, *options, input=REQUEST, timeout=8):
    """openssl s_client through the proxy (CONNECT genuine.test:PORT, SNI genuine.test, TLS 1.3 only)."""
    return run(["openssl", "s_client", "-proxy", f"127.0.0.1:{proxy.port}", "-connect", f"genuine.test:{port}",
                "-servername", "genuine.test", "-tls1_3", *options], input=input, timeout=timeout)


def expect_caught(proxy, port, ran, page, count=1, reasons=CAUGHT, rule="genuine", context=None):
    """`count` alert lines about `port`, the last with the proxy's action, a reason in `reasons` and the rule; under
    block the client got no page, under alert it got it. Returns the last line. `context()`: more for the messages."""
    lines = wait_alert_lines(proxy.alert_log, port, count, timeout=4)
    summary = [(l["event"]["action"], l["event"]["reason"], l.get("chainwatch", {}).get("evidence")) for l in lines]
    if context:
        summary = f"{summary}; {context()}"
    if proxy.action == "block":
        assert page not in ran.stdout, f"the client got the page under block; alert lines {summary}; client {ran}"
    else:
        assert page in ran.stdout, f"no page under alert; alert lines {summary}; client {ran}"
    assert len(lines) == count, f"expected {count} alert line(s), got {summary}; client {ran}"
    line = lines[-1]
    assert line["event"]["action"] == proxy.action, summary
    assert line["event"]["reason"] in reasons, summary
    assert line["rule"]["name"] == rule
    return line


def expect_silent_pass(proxy, port, ran, page):
    """The client got the page and no alert line about `port` came (after a short settle for alert-mode probes)."""
    assert page in ran.stdout, f"no page; alert lines {read_alert_lines(proxy.alert_log, port)}; client {ran}"
    time.sleep(0.5)
    lines = read_alert_lines(proxy.alert_log, port)
    assert lines == [], [(l["event"]["action"], l["event"]["reason"], l["chainwatch"].get("detail")) for l in lines]


# 1. A fingerprinting interceptor: probes that look like OpenSSL's default offer get the genuine server, everything
# else the forger. The probe must offer what the client offered, so it is forged too.

FINGERPRINT_CLIENTS = {
    # curl's offer differs from OpenSSL's default in its groups only.
    "curl": lambda proxy, port: curl(proxy, port, "--curves", "X25519:P-256"),
    "s_client": lambda proxy, port: s_client(
        proxy, port, "-ign_eof", "-groups", "X25519:P-256", "-ciphersuites", "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256",
        "-sigalgs", "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256:rsa_pkcs1_sha256"),
}


@pytest.mark.parametrize("action", ["block", "alert"])
@pytest.mark.parametrize("client", sorted(FINGERPRINT_CLIENTS))
def test_fingerprinting_interceptor_cannot_spare_the_probe(start_proxy, tmp_path, pki, closing, action, client):
    genuine = closing(s_server(pki, "genuine"))
    forger = closing(s_server(pki, "attacker"))
    interceptor = closing(Interceptor({"genuine": genuine.port, "forger": forger.port}, spare_openssl_defaults))
    proxy = start(start_proxy, tmp_path, pki, action)
    ran = FINGERPRINT_CLIENTS[client](proxy, interceptor.port)
    line = expect_caught(proxy, interceptor.port, ran, STATUS_PAGE, context=lambda: f"interceptor saw {interceptor.connections}")
    seen = list(interceptor.connections)
    client_ja4 = line.get("chainwatch", {}).get("client", {}).get("ja4")
    probe_ja4 = line.get("chainwatch", {}).get("probe", {}).get("ja4")
    assert isinstance(client_ja4, str) and client_ja4.startswith("t13"), f"chainwatch.client.ja4 = {client_ja4!r}"
    assert isinstance(probe_ja4, str) and probe_ja4.startswith("t13"), f"chainwatch.probe.ja4 = {probe_ja4!r}"
    assert client_ja4 == probe_ja4
    # On the wire: no connection looked like OpenSSL's default offer, and the probe's JA4 is the client's.
    assert [c for c in seen if c["openssl_default"]] == [], f"the interceptor spared a probe: {seen}"
    assert len({c["ja4"] for c in seen}) == 1, f"the probe's offer differs from the client's: {seen}"
    # The next tunnel from the same client is caught too. Under block it is refused at once as a known-bad upstream:
    # a 403 and no new finding (issue 27: refusals are counted on the mark, not written as lines), and the interceptor
    # never sees it. Under alert it is a second line.
    connections = len(interceptor.connections)
    again = FINGERPRINT_CLIENTS[client](proxy, interceptor.port)
    if action == "block":
        assert STATUS_PAGE not in again.stdout, again
        # curl -s: exit 56 (the CONNECT was answered with an error); s_client: "HTTP CONNECT failed, reason= 403".
        assert again.returncode == 56 or b"403 Forbidden" in again.stderr, again
        time.sleep(0.3)
        expect_caught(proxy, interceptor.port, again, STATUS_PAGE, count=1)
        assert len(interceptor.connections) == connections, interceptor.connections
    else:
        expect_caught(proxy, interceptor.port, again, STATUS_PAGE, count=2,
                      context=lambda: f"interceptor saw {interceptor.connections}")


# 2. Behave, then forge: genuine while the first probe is taken and cached, forged afterwards. The first forged tunnel
# is caught: its flight (the forger adds its root, so it is longer) disagrees with the cached probe's.

@pytest.mark.parametrize("action", ["block", "alert"])
def test_behave_then_forge_is_caught_on_the_first_forged_tunnel(start_proxy, tmp_path, pki, closing, action):
    longer = tmp_path / "attacker-with-root.pem"
    longer.write_text((pki / "attacker.fullchain.pem").read_text() + (pki / "attacker-root.pem").read_text())
    # Concurrent servers: this test is about the cache, not about servers that serve one connection at a time.
    genuine = closing(threaded(pki / "genuine.fullchain.pem", pki / "genuine.key", blob=b"genuine page"))
    forger = closing(threaded(longer, pki / "attacker.key", blob=b"forged page"))
    policy = BehaveThenForge()
    interceptor = closing(Interceptor({"genuine": genuine.port, "forger": forger.port}, policy))
    # No spot checks: this is the cache's re-probe. A check drawn (λ = 0.4) in the few milliseconds between the second
    # tunnel's use of the cached probe and the re-probe's answer would meet the forger too, and write a second line.
    proxy = start(start_proxy, tmp_path, pki, action, extra=("--spot-check-rate", "0"))

    first = curl(proxy, interceptor.port, path="/blob")
    assert b"genuine page" in first.stdout, f"the genuine tunnel failed: {first}; {read_alert_lines(proxy.alert_log)}"
    deadline = time.monotonic() + 5   # the tunnel and its probe (beside the traffic under alert)
    while len(interceptor.connections) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert read_alert_lines(proxy.alert_log, interceptor.port) == []
    policy.forge_from(len(interceptor.connections))

    second = curl(proxy, interceptor.port, path="/blob")
    expect_caught(proxy, interceptor.port, second, b"forged page", context=lambda: f"interceptor saw {interceptor.connections}")
    # The verdict is about the forger: the second tunnel (or a probe for it) reached it.
    assert [c for c in interceptor.connections if c["index"] >= policy.first_forged], interceptor.connections


# 3. Servers that serve one connection at a time (`openssl s_server`): the probe must not wait behind the client's
# held handshake, nor the client behind the probe.

def test_one_at_a_time_genuine_server_passes_well_within_the_probe_timeout(start_proxy, tmp_path, pki, closing):
    server = closing(s_server(pki, "genuine"))
    proxy = start(start_proxy, tmp_path, pki, "block", probe_timeout=5)
    ran = curl(proxy, server.port, max_time=10)
    expect_silent_pass(proxy, server.port, ran, STATUS_PAGE)
    assert ran.elapsed < 3, f"took {ran.elapsed:.1f} s (probe timeout 5 s)"


def test_one_at_a_time_forging_server_is_blocked(start_proxy, tmp_path, pki, closing):
    server = closing(s_server(pki, "attacker"))
    proxy = start(start_proxy, tmp_path, pki, "block", probe_timeout=5)
    ran = curl(proxy, server.port, max_time=10)
    expect_caught(proxy, server.port, ran, STATUS_PAGE)


# 4. HelloRetryRequest: the server accepts P-256 only, the clients send an x25519 key share first. The HRR carries no
# certificate: it must reach the client, or the handshake deadlocks.

HRR_CLIENTS = {
    "curl": lambda proxy, port: curl(proxy, port),
    "s_client": lambda proxy, port: s_client(proxy, port, "-ign_eof", "-groups", "X25519:P-256", timeout=6),
}


@pytest.mark.parametrize("client", sorted(HRR_CLIENTS))
def test_hello_retry_request_to_genuine_server_passes(start_proxy, tmp_path, pki, closing, client):
    server = closing(s_server(pki, "genuine", extra=["-groups", "P-256"]))
    proxy = start(start_proxy, tmp_path, pki, "block")
    ran = HRR_CLIENTS[client](proxy, server.port)
    expect_silent_pass(proxy, server.port, ran, STATUS_PAGE)


@pytest.mark.parametrize("client", sorted(HRR_CLIENTS))
def test_hello_retry_request_from_forger_is_blocked_promptly(start_proxy, tmp_path, pki, closing, client):
    server = closing(s_server(pki, "attacker", extra=["-groups", "P-256"]))
    proxy = start(start_proxy, tmp_path, pki, "block")
    ran = HRR_CLIENTS[client](proxy, server.port)
    expect_caught(proxy, server.port, ran, STATUS_PAGE)
    assert ran.returncode is not None and ran.elapsed < 3, f"the client was left waiting: {ran}"


# 5. Fail closed: the server completes the first connection (the tunnel) and drops every later one (the probe).

class SlowToAnswer:
    """A TLS 1.3 server (genuine chain) that waits `delay` seconds before each handshake, then answers with PAGE:
    slower than a short --probe-timeout, so every probe fails while a patient client gets the page."""

    def __init__(self, pki, delay=0.8):
        import ssl
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(pki / "genuine.fullchain.pem"), str(pki / "genuine.key"))
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        self.delay = delay
        self.server = TCPServer(self._handle)
        self.port = self.server.port

    def _handle(self, conn):
        time.sleep(self.delay)
        conn.settimeout(10)
        try:
            with self.ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(65536)
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 19\r\nConnection: close\r\n\r\n" + PAGE)
        except OSError:
            pass   # the probe gave up, or a blocked tunnel was closed

    def close(self):
        self.server.close()


def pin_policy(tmp_path, pki, closing):
    """`chainwatch pin --action block` against a genuine server, its rule made to match every port of genuine.test."""
    genuine = closing(s_server(pki, "genuine"))
    r = subprocess.run([BIN, "pin", "--action", "block", "--hosts", str(hosts_file(tmp_path)), "--ca",
                        str(pki / "genuine-root.pem"), f"genuine.test:{genuine.port}"], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    policy = tmp_path / "pinned.yaml"
    policy.write_text(text.replace(f"genuine.test:{genuine.port}", "genuine.test"))
    return policy, f"genuine-test-{genuine.port}"


@pytest.mark.parametrize("written_by", ["pin", "hand"])
def test_failed_probe_blocks_under_a_block_rule_by_default(start_proxy, tmp_path, pki, closing, written_by):
    if written_by == "pin":
        policy, rule = pin_policy(tmp_path, pki, closing)
    else:
        policy, rule = pinned_policy(tmp_path, pki, "block", on_probe_error=None), "genuine"
    server = closing(SlowToAnswer(pki))
    proxy = start(start_proxy, tmp_path, pki, "block", policy=policy, probe_timeout=0.3)
    ran = curl(proxy, server.port, "-v")
    line = expect_caught(proxy, server.port, ran, PAGE, reasons={"probe_failed"}, rule=rule)
    assert CURL_SERVER_HELLO not in ran.stderr, "server bytes reached the client"
    assert line["tls"]["client"]["server_name"] == "genuine.test"


def test_failed_probe_with_on_probe_error_alert_lets_traffic_flow(start_proxy, tmp_path, pki, closing):
    server = closing(SlowToAnswer(pki))
    proxy = start(start_proxy, tmp_path, pki, "block", on_probe_error="alert", probe_timeout=0.3)
    ran = curl(proxy, server.port)
    proxy.action = "alert"   # what the line says and what the client sees
    expect_caught(proxy, server.port, ran, PAGE, reasons={"probe_failed"})


# 6. One server, an RSA and an ECDSA leaf (same subject, same intermediate); each client accepts one key type only.

SIGALGS = {
    "ecdsa": ("ecdsa_secp256r1_sha256", b"Server public key is 256 bit"),
    "rsa": ("rsa_pss_rsae_sha256:rsa_pkcs1_sha256", b"Server public key is 2048 bit"),
}


@pytest.mark.parametrize("server_kind", ["s_server", "threaded"])
@pytest.mark.parametrize("sigalgs", sorted(SIGALGS))
def test_rsa_and_ecdsa_leaves_both_pass(start_proxy, tmp_path, pki, rsa_leaf, closing, server_kind, sigalgs):
    rsa_cert, rsa_key, rsa_fullchain = rsa_leaf
    if server_kind == "s_server":
        server = closing(OpenSSLServer(rsa_cert, rsa_key, chain=pki / "genuine.chain.pem", tls="1.3", extra=[
            "-dcert", pki / "genuine.pem", "-dkey", pki / "genuine.key", "-dcert_chain", pki / "genuine.chain.pem"]))
        page = STATUS_PAGE
    else:
        server = closing(threaded(rsa_fullchain, rsa_key, more_certs=[(pki / "genuine.fullchain.pem", pki / "genuine.key")]))
        page = PAGE
    proxy = start(start_proxy, tmp_path, pki, "block")
    algorithms, key_line = SIGALGS[sigalgs]
    ran = s_client(proxy, server.port, "-ign_eof", "-sigalgs", algorithms)
    expect_silent_pass(proxy, server.port, ran, page)
    assert key_line in ran.stdout, "the server did not pick the leaf the client asked for"


def test_a_client_that_leaves_the_server_one_key_type_does_not_get_the_host_refused_to_others(start_proxy, tmp_path,
                                                                                               pki, rsa_leaf, closing):
    """The rule pins the ECDSA leaf's key; the server also has an RSA leaf (a real pair: same name, same issuer). A
    client offering RSA signatures only gets the RSA chain, which fails the pin: its tunnel is blocked. That verdict
    follows from the client's offer, not from the host, so it marks the host known-bad for no one: the next client,
    with an ordinary offer, is judged on its own chain and gets the page. Before, it got 403 for five minutes."""
    rsa_cert, rsa_key, rsa_fullchain = rsa_leaf
    policy = tmp_path / "leaf-key-pin.yaml"
    policy.write_text(f"""version: 1
defaults:
  action: alert
  anchors: [system]
rules:
  - name: genuine
    match: [genuine.test]
    action: block
    anchors: [{pki}/genuine-root.pem]
    pins:
      leaf:
        spki: ["{colon_hex(pki.fps['genuine']['spki'])}"]
""")
    server = closing(threaded(rsa_fullchain, rsa_key, more_certs=[(pki / "genuine.fullchain.pem", pki / "genuine.key")]))
    proxy = start(start_proxy, tmp_path, pki, "block", policy=policy)
    rsa_only = s_client(proxy, server.port, "-ign_eof", "-sigalgs", SIGALGS["rsa"][0])
    line = expect_caught(proxy, server.port, rsa_only, PAGE, reasons={"spki_mismatch"})
    assert line["tls"]["server"]["x509"]["public_key_algorithm"] == "rsa", line["tls"]["server"]
    ordinary = curl(proxy, server.port)
    assert PAGE in ordinary.stdout, f"the next client was refused: {ordinary}"
    assert len(read_alert_lines(proxy.alert_log, server.port)) == 1


# 7. Resumption and 0-RTT: a resumed handshake shows no certificate at all; the chain still comes from a probe.

def genuine_server(pki, kind):
    if kind == "s_server":
        return s_server(pki, "genuine"), STATUS_PAGE
    return threaded(pki / "genuine.fullchain.pem", pki / "genuine.key"), PAGE


@pytest.mark.parametrize("server_kind", ["s_server", "threaded"])
def test_resumed_session_to_genuine_server_passes(start_proxy, tmp_path, pki, closing, server_kind):
    server, page = genuine_server(pki, server_kind)
    closing(server)
    proxy = start(start_proxy, tmp_path, pki, "block")
    session = tmp_path / "session.pem"
    first = s_client(proxy, server.port, "-ign_eof", "-sess_out", session)
    expect_silent_pass(proxy, server.port, first, page)
    assert session.exists() and session.stat().st_size > 0, "no session to resume"
    resumed = s_client(proxy, server.port, "-ign_eof", "-sess_in", session)
    assert b"Reused, TLSv1.3" in resumed.stdout, f"not resumed: {resumed}"
    expect_silent_pass(proxy, server.port, resumed, page)


def test_early_data_to_genuine_server_passes(start_proxy, tmp_path, pki, closing):
    # Without -www (which refuses -early_data) s_server ends at the end of its input: keep it open.
    server = closing(s_server(pki, "genuine", www=False, keep_stdin=True, extra=["-early_data"]))
    proxy = start(start_proxy, tmp_path, pki, "block")
    session = tmp_path / "session.pem"
    # The first connection stays open until its tickets (which allow early data) are written to the session file.
    client = subprocess.Popen(["openssl", "s_client", "-proxy", f"127.0.0.1:{proxy.port}", "-connect", f"genuine.test:{server.port}",
                               "-servername", "genuine.test", "-tls1_3", "-sess_out", str(session)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        client.stdin.write(REQUEST)
        client.stdin.flush()
        deadline = time.monotonic() + 8
        while not (session.exists() and session.stat().st_size > 0) and time.monotonic() < deadline and client.poll() is None:
            time.sleep(0.05)
        time.sleep(0.2)   # the second ticket
        out, _ = client.communicate(timeout=5)   # closes its input: s_client ends
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert session.exists() and session.stat().st_size > 0, f"no session from the first connection: {out[-400:]!r}; " \
        f"alerts {[(l['event']['action'], l['event']['reason']) for l in read_alert_lines(proxy.alert_log)]}"
    early = tmp_path / "early.txt"
    early.write_bytes(REQUEST)
    ran = s_client(proxy, server.port, "-sess_in", session, "-early_data", early, input=b"")
    assert b"Early data was accepted" in ran.stdout, f"0-RTT did not happen: {ran}"
    time.sleep(0.5)
    assert read_alert_lines(proxy.alert_log, server.port) == []


@pytest.mark.parametrize("server_kind", ["s_server", "threaded"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_forger_behind_a_resumed_session_is_caught(start_proxy, tmp_path, pki, closing, action, server_kind):
    if server_kind == "s_server":
        forger, page = closing(s_server(pki, "attacker")), STATUS_PAGE
    else:
        forger, page = closing(threaded(pki / "attacker.fullchain.pem", pki / "attacker.key")), PAGE
    proxy = start(start_proxy, tmp_path, pki, action)
    session = tmp_path / "session.pem"
    if action == "block":
        # The session came from the forger before (on path, but not through chainwatch: under block it gets none).
        direct = run(["openssl", "s_client", "-connect", f"127.0.0.1:{forger.port}", "-servername", "genuine.test",
                      "-tls1_3", "-ign_eof", "-sess_out", session], input=REQUEST)
        assert page in direct.stdout and session.exists(), direct
        resumed = s_client(proxy, forger.port, "-ign_eof", "-sess_in", session)
        expect_caught(proxy, forger.port, resumed, page)
    else:
        first = s_client(proxy, forger.port, "-ign_eof", "-sess_out", session)
        expect_caught(proxy, forger.port, first, page)
        assert session.exists()
        resumed = s_client(proxy, forger.port, "-ign_eof", "-sess_in", session)
        assert b"Reused, TLSv1.3" in resumed.stdout, f"not resumed: {resumed}"
        expect_caught(proxy, forger.port, resumed, page, count=2)
