"""The TLS 1.3 block path (probe first, flight comparison) against what an adversarial review found: a ClientHello
in two segments, alert rules with a block disposition before one-connection servers, a client that gives up with a
reset, a client whose offer the server refuses. Each test states what should happen.

Run alone: make e2e ARGS="-k tls13_review" (or python3 -m pytest -q Tests/e2e/test_tls13_review.py).
"""
import socket
import ssl
import time

import pytest

from helpers import connect_via, read_alert_lines, wait_alert_lines
from test_tls13_adversary import (PAGE, STATUS_PAGE, closing, s_server, start, threaded)  # noqa: F401 (fixtures)

REQUEST = b"GET / HTTP/1.1\r\nHost: genuine.test\r\nConnection: close\r\n\r\n"


def tls_through(proxy, port, split_at=None, split_delay=0.3, timeout=8.0, alpn=None, reset=False):
    """A Python TLS 1.3 client over a CONNECT tunnel driven by memory BIOs, so the test controls the TCP segments:
    with `split_at`, the ClientHello's first `split_at` bytes go in one write, the rest `split_delay` s later.
    Returns (outcome, page bytes, seconds): outcome is "page", "closed" (the proxy closed), or "stalled" (nothing
    within `timeout`)."""
    t0 = time.monotonic()
    sock, status, _ = connect_via(proxy.port, f"genuine.test:{port}")
    assert status == 200
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if alpn:
        ctx.set_alpn_protocols(alpn)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="genuine.test")
    first = True
    page = b""
    sent_request = False
    deadline = t0 + timeout
    try:
        while time.monotonic() < deadline:
            try:
                if not sent_request:
                    tls.do_handshake()
                    tls.write(REQUEST)
                    sent_request = True
                page += tls.read(65536)
                if PAGE in page or STATUS_PAGE in page:
                    return "page", page, time.monotonic() - t0
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return ("page" if page else "closed"), page, time.monotonic() - t0
            data = outgoing.read()
            if data:
                if first and split_at:
                    sock.sendall(data[:split_at])
                    time.sleep(split_delay)
                    sock.sendall(data[split_at:])
                else:
                    sock.sendall(data)
                first = False
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                return "closed", page, time.monotonic() - t0
            if not chunk:
                incoming.write_eof()
                try:
                    page += tls.read(65536)
                except ssl.SSLError:
                    pass
                return ("page" if PAGE in page or STATUS_PAGE in page else "closed"), page, time.monotonic() - t0
            incoming.write(chunk)
        return "stalled", page, time.monotonic() - t0
    finally:
        if reset:   # give up with a reset, not a FIN
            import struct
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


# 1. A ClientHello that reaches the proxy in two TCP segments (e.g. a post-quantum ClientHello larger than one MSS).

@pytest.mark.parametrize("split_at", [None, 60], ids=["whole", "split"])
def test_split_client_hello_to_genuine_server_under_block(start_proxy, tmp_path, pki, closing, split_at):
    """Should: the page, promptly, no alert line. The first segment is relayed upstream before the hello is whole, so
    the machine refuses the redial, but the inspection still probes "first" and swallows the tunnel's ServerHello
    meanwhile; nothing decides it afterwards."""
    server = closing(threaded(pki / "genuine.fullchain.pem", pki / "genuine.key"))
    proxy = start(start_proxy, tmp_path, pki, "block", probe_timeout=2)
    outcome, page, elapsed = tls_through(proxy, server.port, split_at=split_at, timeout=8)
    lines = read_alert_lines(proxy.alert_log, server.port)
    assert outcome == "page", (f"{outcome} after {elapsed:.1f} s; alert lines "
                               f"{[(l['event']['action'], l['event']['reason']) for l in lines]}")
    assert lines == []


def test_split_client_hello_to_forger_under_block_is_alerted(start_proxy, tmp_path, pki, closing):
    """Control (passes): a forged chain is blocked by the probe-first probe itself, split hello or not."""
    server = closing(threaded(pki / "attacker.fullchain.pem", pki / "attacker.key"))
    proxy = start(start_proxy, tmp_path, pki, "block", probe_timeout=2)
    outcome, page, elapsed = tls_through(proxy, server.port, split_at=60, timeout=8)
    lines = wait_alert_lines(proxy.alert_log, server.port, 1, timeout=1)
    assert outcome == "closed", f"{outcome} after {elapsed:.1f} s"
    assert [l["event"]["reason"] for l in lines] == ["root_mismatch"]


# 2. A rule that alerts on the chain but blocks something else (`non_tls: block`, `sni_mismatch: block`,
# `on_probe_error: block`) holds the server's bytes, yet gets no probe first (that needs `action: block`): against a
# server that takes one connection at a time, the probe waits behind the held tunnel.

def alert_rule_with_block_setting(tmp_path, pki, setting):
    """The genuine root as the rule's only anchor."""
    path = tmp_path / f"policy-alert-{setting.split(':')[0]}.yaml"
    path.write_text(f"""version: 1
defaults:
  action: alert
  anchors: [system]
rules:
  - name: genuine
    match: [genuine.test]
    action: alert
    {setting}
    anchors: [{pki}/genuine-root.pem]
""")
    return path


@pytest.mark.parametrize("setting", ["non_tls: block", "sni_mismatch: block", "on_probe_error: block"])
def test_alert_rule_with_a_block_setting_and_one_at_a_time_server(start_proxy, tmp_path, pki, closing, setting):
    """Should: the genuine page, promptly, no alert line (the chain is genuine, nothing is non-TLS, the SNI matches).
    Before the fix: the client waits the whole --probe-timeout and a probe_failed line is written (blocked outright with
    on_probe_error: block)."""
    server = closing(s_server(pki, "genuine"))
    proxy = start(start_proxy, tmp_path, pki, "alert", probe_timeout=2,
                  policy=alert_rule_with_block_setting(tmp_path, pki, setting))
    outcome, page, elapsed = tls_through(proxy, server.port, timeout=8)
    time.sleep(0.3)
    lines = read_alert_lines(proxy.alert_log, server.port)
    summary = [(l["event"]["action"], l["event"]["reason"]) for l in lines]
    assert outcome == "page" and elapsed < 1.5 and lines == [], f"{outcome} after {elapsed:.1f} s; {summary}"


# 3. Behave, then cut the flight short: after a genuine tunnel and its probe are cached, the server's flight stops
# after its first `keep` bytes (the ServerHello and part of the encrypted flight), then the server stalls or closes.

class Truncator:
    """Relays to a backend, passing only the backend's first `keep` bytes back; then stalls (`close=False`, bounded
    by `hold` s) or closes."""

    def __init__(self, backend_port, keep, close, hold=10.0):
        from helpers import TCPServer
        self.backend_port, self.keep, self.close_early, self.hold = backend_port, keep, close, hold
        self.server = TCPServer(self._handle)
        self.port = self.server.port

    def _handle(self, conn):
        import threading
        up = socket.create_connection(("127.0.0.1", self.backend_port), timeout=5)
        def upward():
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    up.sendall(data)
            except OSError:
                pass
        threading.Thread(target=upward, daemon=True).start()
        sent = 0
        up.settimeout(5)
        try:
            while sent < self.keep:
                data = up.recv(self.keep - sent)
                if not data:
                    break
                conn.sendall(data)
                sent += len(data)
            if not self.close_early:
                time.sleep(self.hold)
        finally:
            up.close()

    def close(self):
        self.server.close()


@pytest.mark.parametrize("close", [False, True], ids=["stalls", "closes"])
def test_flight_cut_short_after_a_cached_probe(start_proxy, tmp_path, pki, closing, close):
    """Control (passes): under block the client gets no server byte, its tunnel is closed within two probe
    timeouts, and an alert line says why."""
    from interceptor import BehaveThenForge, Interceptor
    genuine = closing(threaded(pki / "genuine.fullchain.pem", pki / "genuine.key"))
    cut = closing(Truncator(genuine.port, keep=300, close=close))
    policy = BehaveThenForge()
    interceptor = closing(Interceptor({"genuine": genuine.port, "forger": cut.port}, policy))
    proxy = start(start_proxy, tmp_path, pki, "block", probe_timeout=1)
    outcome, _, _ = tls_through(proxy, interceptor.port)
    assert outcome == "page"
    time.sleep(0.3)
    policy.forge_from(len(interceptor.connections))
    outcome, page, elapsed = tls_through(proxy, interceptor.port, timeout=9)
    lines = wait_alert_lines(proxy.alert_log, interceptor.port, 1, timeout=4)
    summary = [(l["event"]["action"], l["event"]["reason"], l["chainwatch"].get("detail", "")[:90]) for l in lines]
    print(outcome, round(elapsed, 2), summary, interceptor.connections)
    assert outcome == "closed" and elapsed < 5, f"{outcome} after {elapsed:.1f} s; {summary}"
    assert len(lines) == 1, summary


class ForgeOne:
    """Genuine for every connection but the one numbered `index` (set by the test)."""

    def __init__(self):
        self.index = None

    def __call__(self, index, hello):
        return "forger" if index == self.index else "genuine"


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_client_giving_up_on_a_stalled_flight_is_still_logged(start_proxy, tmp_path, pki, closing, reset):
    """The tunnel's server stalls after part of its flight (the cached probe saw the whole); the client gives up
    before --probe-timeout. README: the inspection "outlives its tunnel when a probe is in flight, so evidence is
    judged and logged even when the client has gone". Should: an alert line (evidence_mismatch) for that tunnel.
    Before the fix: with a FIN the tunnel stays open until the verdict and the line comes (passes); with a reset, abandon()
    re-probes (dropping the good cached probe), the fresh probe's answer arms the flight timer, which holds the
    inspection weakly: the inspection is freed and no line is ever written (fails)."""
    from interceptor import Interceptor
    genuine = closing(threaded(pki / "genuine.fullchain.pem", pki / "genuine.key"))
    cut = closing(Truncator(genuine.port, keep=300, close=False, hold=6))
    choose = ForgeOne()
    interceptor = closing(Interceptor({"genuine": genuine.port, "forger": cut.port}, choose))
    proxy = start(start_proxy, tmp_path, pki, "block", probe_timeout=2)
    outcome, _, _ = tls_through(proxy, interceptor.port)
    assert outcome == "page"
    time.sleep(0.3)
    choose.index = interceptor._count   # the next connection (the dropped first one counts too)
    outcome, page, elapsed = tls_through(proxy, interceptor.port, timeout=0.7, reset=reset)   # the client gives up
    assert outcome == "stalled"
    lines = wait_alert_lines(proxy.alert_log, interceptor.port, 1, timeout=6)
    summary = [(l["event"]["action"], l["event"]["reason"]) for l in lines]
    print(summary, interceptor.connections)
    assert len(lines) == 1, f"{summary}; interceptor saw {interceptor.connections}"


# 4. The probe mirrors the client's offer, so a client whose offer the server turns down (TLS 1.3 only to a TLS 1.2
# server, suites or groups it lacks) makes the probe fail: probe_failed marks the upstream known-bad for everyone.

def test_one_clients_unacceptable_offer_blocks_the_upstream_for_everyone(start_proxy, tmp_path, pki, closing):
    """Should: the TLS-1.3-only client fails on its own (the server would refuse it anyway), and the next, ordinary
    client gets the page. Before the fix: the first tunnel is blocked with probe_failed ("tlsv1 alert protocol version") and
    every CONNECT to that upstream gets 403 for 5 minutes: any client behind the proxy can cut a host off."""
    from helpers import OpenSSLServer
    from test_tls13_adversary import curl
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls="1.2"))
    proxy = start(start_proxy, tmp_path, pki, "block")
    curl(proxy, server.port, "--tlsv1.3")                     # a client that only speaks TLS 1.3
    ordinary = curl(proxy, server.port, "-w", "%{http_connect}")
    lines = read_alert_lines(proxy.alert_log, server.port)
    summary = [(l["event"]["action"], l["event"]["reason"], l["chainwatch"].get("detail", "")[:60]) for l in lines]
    assert STATUS_PAGE in ordinary.stdout, f"the ordinary client got {ordinary}; alert lines {summary}"
