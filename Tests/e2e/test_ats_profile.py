"""The ATS profile against real servers that violate each clause (alert mode: the page still arrives, one line names
the clause). openssl s_server at security level 0 so that it can speak the weak configurations at all."""
import subprocess

import pytest

from conftest import Proxy
from helpers import OpenSSLServer
from test_detection import alert_lines


@pytest.fixture(scope="module")
def ats_proxy(tmp_path_factory, pki):
    tmp = tmp_path_factory.mktemp("ats")
    (tmp / "hosts").write_text("127.0.0.1 genuine.test\n")
    policy = tmp / "ats.yaml"
    policy.write_text(f"""version: 1
defaults:
  action: alert
  anchors: [system]
rules:
  - name: ats
    match: [genuine.test]
    action: alert
    anchors: [{pki}/genuine-root.pem]   # the app-bundled CA only
    profile: ats
""")
    p = Proxy(["--policy", str(policy), "--hosts", str(tmp / "hosts"), "--alert-log", str(tmp / "alerts.jsonl")], tmp)
    p.alert_log = tmp / "alerts.jsonl"
    yield p
    p.stop()


@pytest.fixture(scope="module")
def rsa2048(pki, tmp_path_factory):
    """An RSA-2048 leaf for genuine.test under the genuine intermediate: RSA key exchange (no forward secrecy) needs one."""
    d = tmp_path_factory.mktemp("rsa2048")
    (d / "ext").write_text("basicConstraints=CA:FALSE\nsubjectAltName=DNS:genuine.test\nextendedKeyUsage=serverAuth\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "rsa2048.key"), "-out", str(d / "csr"),
        "-subj", "/O=Chainwatch Test/CN=genuine.test")
    run("openssl", "x509", "-req", "-in", str(d / "csr"), "-CA", str(pki / "genuine-intermediate.pem"),
        "-CAkey", str(pki / "genuine-intermediate.key"), "-CAcreateserial", "-days", "30", "-extfile", str(d / "ext"),
        "-out", str(d / "rsa2048.pem"))
    (d / "rsa2048.chain.pem").write_text((pki / "genuine.chain.pem").read_text())
    return d


@pytest.mark.parametrize("name,server_args,client_args,reason", [
    ("genuine", ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"], ["--tls-max", "1.1", "--ciphers", "DEFAULT:@SECLEVEL=0"], "tls_version"),
    ("weak-rsa1024", ["-tls1_2", "-cipher", "DEFAULT:@SECLEVEL=0"], ["--tls-max", "1.2", "--ciphers", "DEFAULT:@SECLEVEL=0"], "weak_key"),
    ("weak-sha1", ["-tls1_2", "-cipher", "DEFAULT:@SECLEVEL=0"], ["--tls-max", "1.2", "--ciphers", "DEFAULT:@SECLEVEL=0"], "weak_signature"),
    ("rsa2048", ["-tls1_2", "-cipher", "AES128-GCM-SHA256"], ["--tls-max", "1.2", "--ciphers", "AES128-GCM-SHA256"], "no_forward_secrecy"),
    ("genuine", ["-tls1_2"], ["--tls-max", "1.2"], None),
])
def test_ats_clause(ats_proxy, pki, rsa2048, name, server_args, client_args, reason):
    base = rsa2048 if name == "rsa2048" else pki.dir
    server = OpenSSLServer(base / f"{name}.pem", base / f"{name}.key", chain=base / f"{name}.chain.pem", tls=None,
                           extra=server_args)
    try:
        r = subprocess.run(["curl", "-sk", "--max-time", "10", "-x", ats_proxy.url, *client_args,
                            f"https://genuine.test:{server.port}/"], capture_output=True, timeout=20)
        assert r.returncode == 0 and b"s_server" in r.stdout, r.stderr
        lines = alert_lines(ats_proxy, server.port, wait=reason is not None)
        assert [l["event"]["reason"] for l in lines] == ([reason] if reason else [])
    finally:
        server.close()
