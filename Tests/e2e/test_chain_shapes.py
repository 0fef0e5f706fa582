"""Chains as real servers send them, against the pinned rule `genuine` (root certificate, intermediate SPKI, leaf
subject): with the root, out of order, with extra certificates, and with a cross-signed root. Each is genuine and must
raise nothing, over TLS 1.2 (read in the tunnel) and TLS 1.3 (the probe), under block and alert: the pins are compared
with the path OpenSSL builds to the anchors, never with the order or the set the server sent."""
import subprocess

import pytest

from helpers import HTTPServer, assert_no_alert_lines, curl_genuine, read_alert_lines, wait_alert_lines
from test_tls13_adversary import closing, pinned_policy, start  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def cross_signed_root(pki, tmp_path_factory):
    """The genuine root's subject and key, issued by another (untrusted) root: what a server sends to reach older
    clients through a legacy root."""
    d = tmp_path_factory.mktemp("cross")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(d / "legacy.key"), "-out", str(d / "legacy.pem"), "-days", "365",
                    "-subj", "/O=Legacy CA/CN=Legacy Root"], check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-new", "-key", str(pki / "genuine-root.key"), "-subj",
                    "/O=Chainwatch Test/CN=Chainwatch Test Root", "-out", str(d / "cross.csr")], check=True)
    (d / "cross.ext").write_text("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
                                 "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    subprocess.run(["openssl", "x509", "-req", "-in", str(d / "cross.csr"), "-CA", str(d / "legacy.pem"), "-CAkey",
                    str(d / "legacy.key"), "-set_serial", "4242", "-days", "365", "-extfile", str(d / "cross.ext"),
                    "-out", str(d / "cross.pem")], check=True, capture_output=True)
    return d / "cross.pem"


SHAPES = {
    "with the root": ["genuine.pem", "genuine-intermediate.pem", "genuine-root.pem"],
    "out of order": ["genuine.pem", "genuine-root.pem", "genuine-intermediate.pem"],
    "extra certificates": ["genuine.pem", "otherhost.pem", "attacker-intermediate.pem", "genuine-intermediate.pem"],
    "cross-signed root": ["genuine.pem", "genuine-intermediate.pem", "CROSS"],
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_genuine_chain_shapes_raise_nothing(start_proxy, tmp_path, pki, cross_signed_root, closing, shape, tls, action):
    chain = tmp_path / "chain.pem"
    chain.write_text("".join((cross_signed_root if name == "CROSS" else pki / name).read_text() for name in SHAPES[shape]))
    server = closing(HTTPServer(certfile=str(chain), keyfile=str(pki / "genuine.key"), tls=tls))
    proxy = start(start_proxy, tmp_path, pki, action)
    r = curl_genuine(proxy, server.port, pki / "genuine-root.pem", tls)
    assert r.returncode == 0 and r.stdout == b"hello from upstream\n", r.stderr
    assert_no_alert_lines(proxy, server.port)


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_server_without_its_intermediate_passes_once_another_sent_it(start_proxy, tmp_path, pki, closing, tls, action):
    """`whole` sends leaf and intermediate; `bare` only its leaf (no AIA fetching here, as in a browser that has not
    seen the intermediate). Once `whole` was seen, `bare` validates through the learned intermediate. Under alert,
    `bare` first is flagged (nothing can complete it yet), and seen again after `whole` it is not: its cached verdict
    does not outlive what the pool learned."""
    whole = closing(HTTPServer(certfile=str(pki / "genuine.fullchain.pem"), keyfile=str(pki / "genuine.key"), tls=tls))
    bare = closing(HTTPServer(certfile=str(pki / "genuine.pem"), keyfile=str(pki / "genuine.key"), tls=tls))
    bundle = tmp_path / "root-and-intermediate.pem"   # curl's own trust: it needs the intermediate too
    bundle.write_text((pki / "genuine-root.pem").read_text() + (pki / "genuine-intermediate.pem").read_text())
    proxy = start(start_proxy, tmp_path, pki, action)
    if action == "alert":
        assert curl_genuine(proxy, bare.port, bundle, tls).returncode == 0
        lines = wait_alert_lines(proxy.alert_log, bare.port, 1, timeout=5)
        assert [l["event"]["reason"] for l in lines] == ["untrusted_chain"]
    r = curl_genuine(proxy, whole.port, bundle, tls)
    assert r.returncode == 0, r.stderr
    for _ in range(2):
        r = curl_genuine(proxy, bare.port, bundle, tls)
        assert r.returncode == 0 and r.stdout == b"hello from upstream\n", r.stderr
    assert_no_alert_lines(proxy, whole.port)
    assert len(read_alert_lines(proxy.alert_log, bare.port)) == (1 if action == "alert" else 0)
