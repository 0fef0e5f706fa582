"""No client decides a host's verdict for others (hostile clients, round three): a block that one client's own offer
caused blocks that tunnel alone; it does not mark the upstream known-bad, so the next, ordinary client is judged on
its own handshake instead of getting 403 for five minutes.

Run alone: make e2e ARGS="-k client_steering".
"""
from helpers import HTTPServer, OpenSSLServer, wait_alert_lines
from test_tls13_adversary import PAGE, closing, curl, pinned_policy, run, start  # noqa: F401 (fixtures)

STATUS_PAGE = b"s_server"   # openssl s_server -www's status page


def with_profile(path, profile):
    """The pinned block rule of test_tls13_adversary with a `profile:` line added."""
    text = path.read_text().replace("    action: block\n", f"    action: block\n    profile: {profile}\n", 1)
    path.write_text(text)
    return path


def test_an_offer_below_the_rules_tls_floor_blocks_its_own_tunnel_only(start_proxy, tmp_path, pki, closing):
    """`min_tls: "1.3"`: a client that offers TLS 1.2 at most is blocked (`tls_version`), and marks nobody. Before:
    every later CONNECT to the host got 403 (`evidence: cache`) for five minutes."""
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls=None))
    policy = with_profile(pinned_policy(tmp_path, pki, "block"), '{min_tls: "1.3"}')
    proxy = start(start_proxy, tmp_path, pki, "block", policy=policy)
    old = curl(proxy, server.port, "--tls-max", "1.2")
    assert STATUS_PAGE not in old.stdout, f"a TLS 1.2 tunnel passed a 1.3 floor: {old}"
    lines = wait_alert_lines(proxy.alert_log, server.port, 1)   # written by the alert thread: polled
    assert [l["event"]["reason"] for l in lines] == ["tls_version"], lines
    ordinary = curl(proxy, server.port, "-w", "%{http_connect}")
    assert STATUS_PAGE in ordinary.stdout, f"the ordinary client was refused: {ordinary}"
    assert len(wait_alert_lines(proxy.alert_log, server.port, 2, timeout=0.5)) == 1   # no 403 line follows


def test_a_hello_without_sni_to_a_multi_site_server_marks_nobody(start_proxy, tmp_path, pki, closing):
    """A server with two sites answers a hello without SNI with its default certificate (other.test's here), which
    fails genuine.test's rule: that tunnel is blocked, and the host is not marked: the next client, naming
    genuine.test, gets genuine.test's chain and the page."""
    server = closing(HTTPServer(blob=PAGE, certfile=str(pki / "otherhost.fullchain.pem"), keyfile=str(pki / "otherhost.key"),
                                tls="1.3", sites={"genuine.test": (pki / "genuine.fullchain.pem", pki / "genuine.key")}))
    proxy = start(start_proxy, tmp_path, pki, "block")
    no_sni = run(["openssl", "s_client", "-proxy", f"127.0.0.1:{proxy.port}", "-connect", f"genuine.test:{server.port}",
                  "-noservername", "-tls1_3", "-ign_eof"], input=b"GET /blob HTTP/1.0\r\n\r\n", timeout=8)
    assert PAGE not in no_sni.stdout, f"the default certificate passed genuine.test's pins: {no_sni}"
    lines = wait_alert_lines(proxy.alert_log, server.port, 1)   # written by the alert thread: polled
    assert lines and lines[0]["event"]["action"] == "block", lines
    ordinary = curl(proxy, server.port, path="/blob")
    assert PAGE in ordinary.stdout, f"the client naming the host was refused: {ordinary}; lines {lines}"
    later = wait_alert_lines(proxy.alert_log, server.port, 2, timeout=0.5)
    assert all(l["chainwatch"].get("evidence") != "cache" for l in later), later


def test_the_sni_cannot_pick_a_laxer_rule(start_proxy, tmp_path, pki, closing):
    """`CONNECT genuine.test` with SNI other.test is judged under genuine.test's rule (block), as `policy explain
    genuine.test` says, not under the defaults (alert) the SNI's name would pick. Before: the defaults, and the page
    passed with an alert line."""
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls="1.2"))
    proxy = start(start_proxy, tmp_path, pki, "block")
    other_name = run(["openssl", "s_client", "-proxy", f"127.0.0.1:{proxy.port}", "-connect", f"genuine.test:{server.port}",
                      "-servername", "other.test", "-tls1_2", "-ign_eof"], input=b"GET / HTTP/1.0\r\n\r\n", timeout=8)
    assert STATUS_PAGE not in other_name.stdout, f"the page passed under a laxer rule: {other_name}"
    lines = wait_alert_lines(proxy.alert_log, server.port, 1)   # written by the alert thread: polled
    assert lines and lines[0]["rule"]["name"] == "genuine" and lines[0]["event"]["action"] == "block", lines
