"""Stapled OCSP: a server that staples a response, signed by its leaf's issuer, saying its leaf is revoked raises
`revoked` (TLS 1.2: the CertificateStatus read in the tunnel; TLS 1.3: the probe asks for it as the client did, and
reads it); a good staple raises nothing. The responses are made with `openssl ocsp` (the genuine intermediate as the
responder) and stapled by `openssl s_server -status_file`; the client is `openssl s_client -status`."""
import subprocess

import pytest

from helpers import OpenSSLServer, assert_no_alert_lines, start_own_anchor_proxy, wait_alert_lines
from test_tls13_adversary import closing  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def responses(pki, tmp_path_factory):
    d = tmp_path_factory.mktemp("ocsp")
    serial = subprocess.run(["openssl", "x509", "-in", str(pki / "genuine.pem"), "-serial", "-noout"], check=True,
                            capture_output=True, text=True).stdout.strip().split("=")[1]
    subject = "/O=Chainwatch Test/CN=genuine.test"
    made = {}
    for status, line in [("revoked", f"R\t400101000000Z\t241101000000Z,keyCompromise\t{serial}\tunknown\t{subject}\n"),
                         ("good", f"V\t400101000000Z\t\t{serial}\tunknown\t{subject}\n")]:
        (d / f"index-{status}.txt").write_text(line)
        subprocess.run(["openssl", "ocsp", "-index", str(d / f"index-{status}.txt"),
                        "-rsigner", str(pki / "genuine-intermediate.pem"), "-rkey", str(pki / "genuine-intermediate.key"),
                        "-CA", str(pki / "genuine-intermediate.pem"), "-issuer", str(pki / "genuine-intermediate.pem"),
                        "-cert", str(pki / "genuine.pem"), "-respout", str(d / f"{status}.der"), "-ndays", "7"],
                       check=True, capture_output=True)
        made[status] = d / f"{status}.der"
    return made


def start(start_proxy, tmp_path, pki, action):
    return start_own_anchor_proxy(start_proxy, tmp_path, pki, action, probe_timeout=3)


def s_client(proxy, port, tls):
    """openssl s_client through the proxy, asking for the server's OCSP staple; True when the page came back."""
    r = subprocess.run(["openssl", "s_client", "-proxy", f"127.0.0.1:{proxy.port}", "-connect", f"genuine.test:{port}",
                        "-servername", "genuine.test", "-status", f"-tls{tls.replace('.', '_')}", "-quiet"],
                       input=b"GET / HTTP/1.0\r\n\r\n", capture_output=True, timeout=15)
    return b"HTTP/1.0 200" in r.stdout


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_stapled_revoked_response_is_flagged(start_proxy, tmp_path, pki, responses, closing, tls, action):
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls=tls,
                                   extra=["-status_file", str(responses["revoked"])]))
    proxy = start(start_proxy, tmp_path, pki, action)
    got_page = s_client(proxy, server.port, tls)
    lines = wait_alert_lines(proxy.alert_log, server.port, 1, timeout=5)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("revoked", action)]
    assert lines[0]["chainwatch"]["chain"]["ocsp"] == "revoked"
    assert "keyCompromise" in lines[0]["chainwatch"]["detail"]
    assert got_page == (action == "alert")


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
def test_a_stapled_good_response_raises_nothing(start_proxy, tmp_path, pki, responses, closing, tls):
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls=tls,
                                   extra=["-status_file", str(responses["good"])]))
    proxy = start(start_proxy, tmp_path, pki, "block")
    assert s_client(proxy, server.port, tls)
    assert_no_alert_lines(proxy, server.port)
