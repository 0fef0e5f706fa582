"""The second adversarial review of the TLS 1.3 block path (client bytes held until a whole ClientHello; probe first
for every rule that holds server bytes; probe_failed no longer marks the upstream bad): non-TLS clients whose first
bytes look like TLS, a server that refuses the client's version, servers that speak first, many first contacts at
once, a server that refuses the probe's offer. Each test states what should happen."""
import os
import socket
import struct
import subprocess
import time

import pytest

from helpers import HTTPServer, OpenSSLServer, TCPServer, connect_via, read_alert_lines, wait_alert_lines
from test_tls13_adversary import closing  # noqa: F401 (fixtures)


def hosts_file(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("127.0.0.1 genuine.test\n")
    return path


def policy(tmp_path, pki, action, non_tls=None):
    """Every host: `action`, the test root an anchor beside the system roots."""
    extra = f"  non_tls: {non_tls}\n" if non_tls else ""
    path = tmp_path / f"policy-{action}-{non_tls}.yaml"
    path.write_text(f"version: 1\ndefaults:\n  action: {action}\n  anchors: [system, {pki}/genuine-root.pem]\n{extra}rules: []\n")
    return path


def proxy_with(start_proxy, tmp_path, pki, which, *more):
    """`which`: "builtin" (no --policy: the built-in alert-only policy), or an action for `policy`."""
    args = ["--hosts", str(hosts_file(tmp_path)), "--probe-timeout", "2", "--grace", "1", *more]
    if which != "builtin":
        args += ["--policy", str(policy(tmp_path, pki, which))]
    return start_proxy(*args)


def answer_first_bytes(conn):
    """A client-speaks-first protocol whose server answers whatever first bytes it got."""
    data = conn.recv(100)
    if data:
        conn.sendall(b"got " + data)
        time.sleep(0.5)


# 1. A non-TLS client whose first bytes happen to look like the start of a TLS record (0x16 or 0x15, then 0x03) and
# that then waits for its server. Client bytes are held for a whole ClientHello only under rules that hold the
# server's bytes, and for a second at most: under alert they flow at once ("alert: bytes flow at once"), under block
# after that second; the server's answer then decides not_tls.

@pytest.mark.parametrize("first", [b"\x16", b"\x16\x03", b"\x15\x03\x01", b"\x16\x03\x01\x00\x10abc"],
                         ids=["16", "1603", "150301", "record-header-short"])
@pytest.mark.parametrize("which", ["builtin", "alert", "block"])
def test_few_tls_looking_client_bytes_reach_the_server(start_proxy, tmp_path, pki, which, first):
    """Should: the server's answer (at once under alert rules, within the client hold's second under block). Before
    the fix: nothing, the tunnel stalled until the idle timeout."""
    server = TCPServer(answer_first_bytes)
    try:
        proxy = proxy_with(start_proxy, tmp_path, pki, which)
        sock, status, _ = connect_via(proxy.port, f"127.0.0.1:{server.port}", timeout=3)
        assert status == 200
        sock.sendall(first)
        t0 = time.monotonic()
        try:
            answer = sock.recv(100)
        except socket.timeout:
            answer = None
        sock.close()
        assert answer == b"got " + first, f"no answer from the server after {time.monotonic() - t0:.1f} s: {answer!r}"
    finally:
        server.close()


def test_plain_non_tls_client_bytes_still_flow(start_proxy, tmp_path, pki):
    """Control (passes): a first byte that is not 0x16/0x15 is not_tls at once and flows."""
    server = TCPServer(answer_first_bytes)
    try:
        proxy = proxy_with(start_proxy, tmp_path, pki, "builtin")
        sock, status, _ = connect_via(proxy.port, f"127.0.0.1:{server.port}", timeout=3)
        sock.sendall(b"x")
        assert sock.recv(100) == b"got x"
        sock.close()
    finally:
        server.close()


# 2. Under a rule that holds server bytes, a TLS 1.2-only client to a TLS 1.3-only server: the server answers with a
# protocol_version alert and closes. The alert carries no certificate; held, it left the client waiting with no line.
# It passes, as it does under alert, and the client fails at once.

@pytest.mark.parametrize("which", ["block"])
def test_tls12_client_to_tls13_only_server_under_block_gets_an_answer(start_proxy, tmp_path, pki, closing, which):
    """Should: curl fails at once (the server's alert, or the tunnel closed) and, if blocked, a line says why.
    Before the fix: curl timed out after --max-time, no line."""
    server = closing(HTTPServer(certfile=str(pki / "genuine.fullchain.pem"), keyfile=str(pki / "genuine.key"), tls="1.3"))
    proxy = proxy_with(start_proxy, tmp_path, pki, which)
    t0 = time.monotonic()
    ran = subprocess.run(["curl", "-sS", "--max-time", "5", "--tls-max", "1.2", "--cacert", str(pki / "genuine-root.pem"),
                          "-x", proxy.url, f"https://genuine.test:{server.port}/"], capture_output=True, timeout=15)
    elapsed = time.monotonic() - t0
    assert ran.returncode != 0
    assert elapsed < 3, (f"curl waited {elapsed:.1f} s: {ran.stderr[-120:]!r}; alert lines "
                         f"{[(l['event']['action'], l['event']['reason']) for l in read_alert_lines(proxy.alert_log)]}")


# Controls around the changes (all pass).

def test_server_speaks_first_under_every_policy(start_proxy, tmp_path, pki):
    """An SMTP-like banner before any client byte flows (not_tls at the server's first byte)."""
    def smtp(conn):
        conn.sendall(b"220 ready\r\n")
        line = conn.recv(100)
        if line:
            conn.sendall(b"221 " + line)
    server = TCPServer(smtp)
    try:
        for which in ("builtin", "alert", "block"):
            directory = tmp_path / which
            directory.mkdir()
            proxy = proxy_with(start_proxy, directory, pki, which)
            sock, status, _, early = connect_via(proxy.port, f"127.0.0.1:{server.port}", timeout=3, early=True)
            banner = early or sock.recv(100)
            assert banner == b"220 ready\r\n", which
            sock.sendall(b"QUIT\r\n")
            assert sock.recv(100) == b"221 QUIT\r\n", which
            sock.close()
    finally:
        server.close()


def test_many_first_contacts_to_a_new_tls13_host_under_block(start_proxy, tmp_path, pki, closing):
    """20 curls at once to a TLS 1.3 host no probe has seen: every one gets the page, promptly."""
    server = closing(HTTPServer(certfile=str(pki / "genuine.fullchain.pem"), keyfile=str(pki / "genuine.key"), tls="1.3"))
    # The test root installed into a copy of the OS store (not named by the policy): every tunnel, judged, raises
    # local_root, so the log shows that each of the 20 was judged (an alert, which passes under block).
    bundle = tmp_path / "os-store.crt"
    bundle.write_text(open("/etc/ssl/certs/ca-certificates.crt").read() + (pki / "genuine-root.pem").read_text())
    block = tmp_path / "policy-block-system.yaml"
    block.write_text("version: 1\ndefaults:\n  action: block\n  anchors: [system]\nrules: []\n")
    proxy = start_proxy("--hosts", str(hosts_file(tmp_path)), "--probe-timeout", "2", "--grace", "1",
                        "--policy", str(block), env={"SSL_CERT_FILE": str(bundle)})
    procs = [subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "8", "--cacert",
                               str(pki / "genuine-root.pem"), "-x", proxy.url, f"https://genuine.test:{server.port}/"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(20)]
    codes = [p.communicate(timeout=15)[0] for p in procs]
    assert codes == [b"200"] * 20
    lines = wait_alert_lines(proxy.alert_log, server.port, 20, timeout=3)
    assert [l["event"]["reason"] for l in lines] == ["local_root"] * 20


def _client_hello(server_name="genuine.test"):
    """A TLS 1.3 ClientHello whose only cipher suite is TLS_AES_128_CCM_SHA256 (an X25519 key share): the probe
    repeats it (its hello is the client's) but cannot perform that suite, so a server that takes it fails the probe.
    (Until 2026-11-28 this hello offered X448 only, which the probe could not perform then.)"""
    def ext(t, body):
        return struct.pack(">HH", t, len(body)) + body

    def v16(b):
        return struct.pack(">H", len(b)) + b
    name = server_name.encode()
    exts = ext(0, v16(b"\x00" + struct.pack(">H", len(name)) + name))
    exts += ext(10, v16(b"\x00\x1d"))
    exts += ext(13, v16(b"\x04\x03\x08\x04\x04\x01\x05\x03\x08\x05\x05\x01"))
    exts += ext(43, b"\x02\x03\x04")
    exts += ext(45, b"\x01\x01")
    exts += ext(51, v16(struct.pack(">HH", 0x1d, 32) + os.urandom(32)))
    body = b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) + v16(b"\x13\x04") + b"\x01\x00" + v16(exts)
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def test_server_refusing_the_probes_offer_blocks_that_tunnel_alone(start_proxy, tmp_path, pki, closing):
    """Under block: the client whose offer the probe cannot perform (TLS_AES_128_CCM_SHA256 only, which the server
    takes) is blocked (probe_failed, fail closed, as documented), promptly; the next client (curl, AES-GCM) is not
    refused with 403 and gets the page."""
    backend = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls="1.3",
                                    extra=["-ciphersuites", "TLS_AES_128_CCM_SHA256:TLS_AES_128_GCM_SHA256"]))
    proxy = proxy_with(start_proxy, tmp_path, pki, "block")
    sock, status, _ = connect_via(proxy.port, f"genuine.test:{backend.port}", timeout=5)
    sock.sendall(_client_hello())
    assert sock.recv(100) == b""
    sock.close()
    lines = wait_alert_lines(proxy.alert_log, backend.port, 1)
    assert [(l["event"]["action"], l["event"]["reason"]) for l in lines] == [("block", "probe_failed")]
    assert "1304" in lines[0]["chainwatch"]["detail"].lower(), lines[0]["chainwatch"]["detail"]
    ran = subprocess.run(["curl", "-s", "--max-time", "5", "--cacert", str(pki / "genuine-root.pem"), "-x", proxy.url,
                          f"https://genuine.test:{backend.port}/"], capture_output=True, timeout=10)
    assert b"<HTML><BODY" in ran.stdout
