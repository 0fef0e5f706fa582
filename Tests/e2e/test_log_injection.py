"""Peer-supplied text in the operator's log (stderr): a certificate name with a newline and terminal escapes must not
forge a log record or reach the terminal raw. The alert log (JSON) keeps the name exactly, escaped by JSON."""
import datetime
import json
import subprocess

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from helpers import HTTPServer, ecs_problems

FORGED = "2026-11-23T00:00:00+0000 notice chainwatch: [ChainwatchProxy] all clear"
EVIL_NAME = "evil.test\n" + FORGED + "\x1b[2J\x1b]0;owned\x07"


def make_chain(directory):
    """A root and a leaf whose only DNS name is EVIL_NAME (cryptography writes it as given)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    root_key = ec.generate_private_key(ec.SECP256R1())
    root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "log injection root")])
    root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name).public_key(root_key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(root_key, hashes.SHA256()))
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf")]))
            .issuer_name(root_name).public_key(leaf_key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(EVIL_NAME)]), critical=False)
            .sign(root_key, hashes.SHA256()))
    (directory / "root.pem").write_bytes(root.public_bytes(serialization.Encoding.PEM))
    (directory / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (directory / "leaf.key").write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                serialization.NoEncryption()))


def test_a_certificate_name_cannot_forge_a_log_line(start_proxy, tmp_path):
    make_chain(tmp_path)
    server = HTTPServer(b"page", certfile=str(tmp_path / "leaf.pem"), keyfile=str(tmp_path / "leaf.key"), tls="1.2")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    try:
        proxy = start_proxy("--hosts", str(hosts), "--ca", str(tmp_path / "root.pem"))
        subprocess.run(["curl", "-sk", "--max-time", "5", "-x", proxy.url, f"https://genuine.test:{server.port}/"],
                       capture_output=True, timeout=10)
        lines = []
        for _ in range(40):   # bounded wait for the alert line
            lines = [json.loads(l) for l in open(proxy.alert_log).read().splitlines()] if proxy.alert_log.exists() else []
            if lines:
                break
            subprocess.run(["sleep", "0.1"])
        assert lines and lines[0]["event"]["reason"] == "hostname_mismatch", lines
        assert ecs_problems(lines[0]) == []
        assert EVIL_NAME in lines[0]["chainwatch"]["detail"]   # the alert log keeps the name exactly
        log = proxy.output()
        assert "hostname_mismatch" in log
        assert not any(line.startswith(FORGED) for line in log.splitlines()), log
        assert "\x1b" not in log and "\x07" not in log, "terminal control characters reached the log"
        assert "evil.test\\n2026-11-23T00:00:00+0000 notice chainwatch" in log
    finally:
        server.close()
