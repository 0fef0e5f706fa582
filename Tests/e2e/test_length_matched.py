"""The length-matched attacker chain of make-pki.sh (`matched-root` → `matched-intermediate` → `matched`): the attacker
chain re-signed until every certificate's DER is exactly as long as the genuine one's, so a TLS 1.3 forged flight is
record-for-record the genuine one's length and only the keys (fingerprints) tell the chains apart.

Checks the PKI itself (lengths per level, other keys, a chain openssl verifies) and the flights on the wire: two
`openssl s_server -tls1_3 -www` on loopback, one with the genuine chain and one with the matched chain, reached by a
Python TLS 1.3 client through a small TCP relay that records the lengths of the server's encrypted records (type 23)
up to and including Finished. They must be equal except the CertificateVerify's, whose ECDSA signature varies per
handshake. Does not need the chainwatch binary.

Run alone: python3 -m pytest -q Tests/e2e/test_length_matched.py (add -s to see the record lengths).
"""
import socket
import ssl
import subprocess
import threading

import pytest

from helpers import OpenSSLServer

LEVELS = [("genuine-root", "matched-root"), ("genuine-intermediate", "matched-intermediate"), ("genuine", "matched")]
HANDSHAKES = 5


def der(path):
    return ssl.PEM_cert_to_DER_cert(path.read_text())


@pytest.mark.parametrize("genuine,matched", LEVELS)
def test_same_der_length_other_key(pki, genuine, matched):
    assert len(der(pki / f"{matched}.pem")) == len(der(pki / f"{genuine}.pem"))
    assert der(pki / f"{matched}.pem") != der(pki / f"{genuine}.pem")
    assert pki.fps[matched]["sha256"] != pki.fps[genuine]["sha256"]
    assert pki.fps[matched]["spki"] != pki.fps[genuine]["spki"]
    assert pki.fps[matched]["spki"] != pki.fps[genuine.replace("genuine", "attacker")]["spki"]


def test_bundles_and_verify(pki):
    assert (pki / "matched.chain.pem").read_text() == (pki / "matched-intermediate.pem").read_text()
    assert (pki / "matched.fullchain.pem").read_text() == (pki / "matched.pem").read_text() + (
        pki / "matched-intermediate.pem").read_text()
    done = subprocess.run(["openssl", "verify", "-CAfile", str(pki / "matched-root.pem"),
                           "-untrusted", str(pki / "matched-intermediate.pem"), str(pki / "matched.pem")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # Not the genuine chain: the genuine root does not verify it.
    done = subprocess.run(["openssl", "verify", "-CAfile", str(pki / "genuine-root.pem"),
                           "-untrusted", str(pki / "matched-intermediate.pem"), str(pki / "matched.pem")],
                          capture_output=True, text=True)
    assert done.returncode != 0


def _records(buffer):
    """Complete TLS records at the start of `buffer`: ([(type, length)], rest)."""
    records = []
    while len(buffer) >= 5 and len(buffer) >= 5 + int.from_bytes(buffer[3:5], "big"):
        length = int.from_bytes(buffer[3:5], "big")
        records.append((buffer[0], length))
        buffer = buffer[5 + length:]
    return records, buffer


def server_flight(port, timeout=10.0):
    """One TLS 1.3 handshake with the server on `port` through a relay; returns (lengths of the server's encrypted
    records before the client's first encrypted record, i.e. EncryptedExtensions … Finished; the leaf's DER)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(timeout)
    flight, client_finished = [], threading.Event()

    def pump(src, dst, from_server):
        buffer = b""
        try:
            while data := src.recv(65536):
                buffer += data
                records, buffer = _records(buffer)
                for kind, length in records:
                    if kind != 23:
                        continue
                    if from_server and not client_finished.is_set():
                        flight.append(length)
                    if not from_server:
                        client_finished.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def relay():
        with listener:
            client, _ = listener.accept()
        with client, socket.create_connection(("127.0.0.1", port), timeout=timeout) as server:
            client.settimeout(timeout)
            back = threading.Thread(target=pump, args=(server, client, True))
            back.start()
            pump(client, server, False)
            back.join(timeout)

    thread = threading.Thread(target=relay)
    thread.start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(listener.getsockname(), timeout=timeout) as raw, \
            context.wrap_socket(raw, server_hostname="genuine.test") as tls:
        leaf = tls.getpeercert(binary_form=True)
        tls.sendall(b"GET / HTTP/1.0\r\n\r\n")
        while tls.recv(65536):
            pass
    thread.join(timeout)
    assert not thread.is_alive()
    return flight, leaf


@pytest.fixture(scope="module")
def servers(pki):
    started = {name: OpenSSLServer(pki / f"{name}.pem", pki / f"{name}.key", chain=pki / f"{name}.chain.pem", tls="1.3")
               for name in ("genuine", "matched", "attacker")}
    yield started
    for server in started.values():
        server.close()


def test_flights_record_for_record(pki, servers):
    """EncryptedExtensions, Certificate, CertificateVerify, Finished, one record each (OpenSSL): equal lengths but
    the CertificateVerify's (index 2). The attacker's flight is printed for comparison, not asserted."""
    seen = {name: [] for name in servers}
    for _ in range(HANDSHAKES):
        for name, server in servers.items():
            flight, leaf = server_flight(server.port)
            assert leaf == der(pki / f"{name}.pem")
            seen[name].append(flight)
    for name, flights in seen.items():
        print(f"{name:9} {flights}")
    for genuine, matched in zip(seen["genuine"], seen["matched"]):
        assert len(genuine) == len(matched) == 4
        differing = [i for i, (g, m) in enumerate(zip(genuine, matched)) if g != m]
        assert differing in ([], [2]), (genuine, matched)
