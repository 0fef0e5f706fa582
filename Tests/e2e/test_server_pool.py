"""A pool of genuine servers behind one address whose members answer the same offer with different flights: a
certificate rollout half done, one member's leaf carrying one more name (same key, subject, intermediate and root),
behind a balancer that alternates members per connection. Every chain is genuine and passes the pinned rule, so no
connection may be blocked or make a line.

Before the prober kept a pool's earlier flights and a tunnel could be probed afresh more than once, a tunnel that met
the other member than the cached probe was probed once more, and the fresh probe, the balancer's next connection, met
the other member again: `evidence_mismatch` (an adversarial try at random: 3 lines in 10 connections for curl).

Run alone: make e2e ARGS="-k server_pool".
"""
import subprocess
import sys

import pytest

from helpers import read_alert_lines
from interceptor import Interceptor
from test_tls13_adversary import PAGE, closing, curl, run, start, threaded  # noqa: F401 (fixtures)
from test_probe_is_the_client import cffi


@pytest.fixture(scope="module")
def renewed(pki, tmp_path_factory):
    """genuine.test's leaf reissued with one more name (its key, subject and intermediate): a longer Certificate."""
    d = tmp_path_factory.mktemp("renewed")
    ext = d / "leaf.ext"
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:genuine.test,DNS:www.genuine.test,IP:127.0.0.1\n"
                   "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n")
    subject = subprocess.run(["openssl", "x509", "-in", str(pki / "genuine.pem"), "-noout", "-subject", "-nameopt", "compat"],
                             check=True, capture_output=True, text=True).stdout.strip().removeprefix("subject=")
    subprocess.run(["openssl", "req", "-new", "-key", str(pki / "genuine.key"), "-subj", subject, "-out", str(d / "leaf.csr")],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(d / "leaf.csr"), "-CA", str(pki / "genuine-intermediate.pem"),
                    "-CAkey", str(pki / "genuine-intermediate.key"), "-set_serial", "0x2200", "-days", "3650", "-sha256",
                    "-extfile", str(ext), "-out", str(d / "renewed.pem")], check=True, capture_output=True)
    (d / "renewed.fullchain.pem").write_text((d / "renewed.pem").read_text() + (pki / "genuine.chain.pem").read_text())
    return d / "renewed.fullchain.pem"


def alternate(index, hello):
    return "a" if index % 2 == 0 else "b"


CLIENTS = {"curl": lambda proxy, port: curl(proxy, port, path="/blob"), "chrome": cffi("chrome152")}


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_pool_whose_members_serve_other_leaves_makes_no_line(start_proxy, tmp_path, pki, renewed, closing, action, client):
    """Eight fetches through an alternating balancer in front of the two members: every page arrives, no line, and
    both members were met."""
    a = closing(threaded(pki / "genuine.fullchain.pem", pki / "genuine.key", blob=PAGE))
    b = closing(threaded(renewed, pki / "genuine.key", blob=PAGE))
    balancer = closing(Interceptor({"a": a.port, "b": b.port}, alternate))
    proxy = start(start_proxy, tmp_path, pki, action, probe_timeout=10)
    for i in range(8):
        ran = CLIENTS[client](proxy, balancer.port)
        assert PAGE in ran.stdout, f"fetch {i}: {ran}; lines {read_alert_lines(proxy.alert_log, balancer.port)}"
    lines = read_alert_lines(proxy.alert_log, balancer.port)
    assert lines == [], [(l["event"]["reason"], l.get("message", "")[:200]) for l in lines]
    backends = [c["backend"] for c in balancer.connections]
    assert set(backends) == {"a", "b"}, backends
