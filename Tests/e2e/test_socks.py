"""SOCKS 5 (issue 28, "Reach every client"): a `--socks` listener beside `--listen`, RFC 1928 with no authentication
and the CONNECT command, whose tunnels are inspected as a CONNECT's. Real clients: curl with --socks5-hostname (the
name resolved by chainwatch) and a Python client that sends an IPv4 address (the rule then picked by the SNI), to
the genuine and to a forging server on loopback (the pinned policy of test_tls13_adversary, the attacker's CA
trusted). Malformed greetings and requests get the reply their client can read, and nothing hangs."""
import socket
import ssl
import time

import pytest

from conftest import BIN
from helpers import HTTPServer, free_port, read_alert_lines, wait_alert_lines
from test_access_log import access_lines
from test_tls13_adversary import PAGE, closing, hosts_file, pinned_policy, run  # noqa: F401 (fixtures)


def socks_proxy(start_proxy, tmp_path, pki, action, *extra):
    port = free_port()
    p = start_proxy("--policy", str(pinned_policy(tmp_path, pki, action)), "--hosts", str(hosts_file(tmp_path)),
                    "--ca", str(pki / "attacker-root.pem"), "--probe-timeout", "2", "--grace", "1",
                    "--socks", f"127.0.0.1:{port}", *extra)
    p.socks = port
    return p


def curl_socks(p, port, tls):
    return run(["curl", "-sk", "--max-time", "6", f"--tlsv{tls}", "--tls-max", tls, "--socks5-hostname", f"127.0.0.1:{p.socks}",
                f"https://genuine.test:{port}/"], timeout=10)


def python_socks(p, port, by_name=False, timeout=6):
    """A Python client: SOCKS 5 to 127.0.0.1:PORT by address (ATYP 1), or to genuine.test:PORT by name (ATYP 3), then
    TLS with SNI genuine.test, no checks. Returns the SOCKS reply and what the server sent."""
    s = socket.create_connection(("127.0.0.1", p.socks), timeout=timeout)
    try:
        s.sendall(b"\x05\x01\x00")
        assert s.recv(2) == b"\x05\x00"
        address = b"\x03\x0cgenuine.test" if by_name else b"\x01" + socket.inet_aton("127.0.0.1")
        s.sendall(b"\x05\x01\x00" + address + port.to_bytes(2, "big"))
        reply = s.recv(10)
        if reply[:2] != b"\x05\x00":
            return reply, b""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with ctx.wrap_socket(s, server_hostname="genuine.test") as t:
                t.sendall(b"GET / HTTP/1.0\r\nHost: genuine.test\r\n\r\n")
                body = b""
                while chunk := t.recv(65536):
                    body += chunk
                return reply, body
        except (ssl.SSLError, OSError) as e:
            return reply, repr(e).encode()
    finally:
        s.close()


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_genuine_passes_and_a_forger_is_caught_through_socks(start_proxy, tmp_path, pki, closing, action, tls):
    genuine = closing(HTTPServer(blob=PAGE, certfile=str(pki / "genuine.fullchain.pem"), keyfile=str(pki / "genuine.key"), tls=tls))
    forger = closing(HTTPServer(blob=PAGE, certfile=str(pki / "attacker.fullchain.pem"), keyfile=str(pki / "attacker.key"), tls=tls))
    access = tmp_path / "access.jsonl"
    p = socks_proxy(start_proxy, tmp_path, pki, action, "--access-log", str(access))
    ran = curl_socks(p, genuine.port, tls)
    assert PAGE in ran.stdout, ran
    line = access_lines(access, 1)[0]   # ECS-checked
    assert line["http"]["request"]["method"] == "SOCKS5" and line["event"]["action"] == "tunnel", line
    assert line["destination"]["domain"] == "genuine.test" and line["destination"]["port"] == genuine.port, line
    reply, body = python_socks(p, genuine.port)
    assert reply[:2] == b"\x05\x00" and PAGE in body, (reply, body)
    time.sleep(0.3)
    assert read_alert_lines(p.alert_log, genuine.port) == []

    forged = curl_socks(p, forger.port, tls)
    lines = wait_alert_lines(p.alert_log, forger.port, 1, timeout=4)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("root_mismatch", action)], lines
    if action == "block":
        assert PAGE not in forged.stdout, forged
        # Known bad now: the next SOCKS request for that name is refused at once, reply 2 (not allowed by the ruleset).
        reply, body = python_socks(p, forger.port, by_name=True)
        assert reply[:2] == b"\x05\x02", reply
    else:
        assert PAGE in forged.stdout, forged
        reply, body = python_socks(p, forger.port)
        assert PAGE in body, (reply, body)
        assert len(wait_alert_lines(p.alert_log, forger.port, 2, timeout=4)) == 2


def exchange(port, sent, read=64, timeout=4):
    """Sends `sent`, then reads until the proxy closes (or `timeout`): what came back, and whether it closed."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = b""
    try:
        s.sendall(sent)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            chunk = s.recv(read)
            if not chunk:
                return got, True
            got += chunk
    except socket.timeout:
        return got, False
    except ConnectionResetError:
        return got, True
    finally:
        s.close()
    return got, False


MALFORMED = [
    ("SOCKS 4", b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00", b"\x00\x5b\x00\x00\x00\x00\x00\x00"),
    ("HTTP on the SOCKS port", b"CONNECT genuine.test:443 HTTP/1.1\r\n\r\n", b""),
    ("username/password only", b"\x05\x01\x02", b"\x05\xff"),
    ("BIND", b"\x05\x01\x00" + b"\x05\x02\x00\x01\x7f\x00\x00\x01\x01\xbb", b"\x05\x00" + b"\x05\x07\x00\x01" + bytes(6)),
    ("UDP ASSOCIATE", b"\x05\x01\x00" + b"\x05\x03\x00\x01\x7f\x00\x00\x01\x01\xbb", b"\x05\x00" + b"\x05\x07\x00\x01" + bytes(6)),
    ("address type 9", b"\x05\x01\x00" + b"\x05\x01\x00\x09\x01\x02", b"\x05\x00" + b"\x05\x08\x00\x01" + bytes(6)),
    ("a name with a space", b"\x05\x01\x00" + b"\x05\x01\x00\x03\x03a b\x01\xbb", b"\x05\x00" + b"\x05\x04\x00\x01" + bytes(6)),
    ("a name that does not resolve", b"\x05\x01\x00" + b"\x05\x01\x00\x03\x0fnothing.invalid\x01\xbb",
     b"\x05\x00" + b"\x05\x04\x00\x01" + bytes(6)),
    ("the proxy itself", None, b"\x05\x00" + b"\x05\x02\x00\x01" + bytes(6)),
]


def test_malformed_socks_gets_a_clear_refusal_and_nothing_hangs(start_proxy, tmp_path, pki):
    p = socks_proxy(start_proxy, tmp_path, pki, "block", "--request-timeout", "1")
    for name, sent, expected in MALFORMED:
        if sent is None:   # a CONNECT to the proxy's own SOCKS port: a loop, refused as a destination
            sent = b"\x05\x01\x00" + b"\x05\x01\x00\x01\x7f\x00\x00\x01" + p.socks.to_bytes(2, "big")
        got, closed = exchange(p.socks, sent)
        assert got == expected, f"{name}: got {got!r}, expected {expected!r}"
        assert closed, f"{name}: the proxy did not close"
    # A greeting and then silence: closed at --request-timeout, with the method reply only.
    t0 = time.monotonic()
    got, closed = exchange(p.socks, b"\x05\x01\x00", timeout=5)
    assert closed and got.startswith(b"\x05\x00") and time.monotonic() - t0 < 4, (got, closed)
    assert p.proc.poll() is None, "the proxy died"


def test_socks_on_a_non_loopback_address_needs_credentials(tmp_path):
    """Without credentials, a SOCKS listener on another address would be an open proxy: chainwatch will not start.
    A credentials file with a problem is refused with its line."""
    r = run([BIN, "run", "--listen", f"127.0.0.1:{free_port()}", "--admin", "off", "--socks", "0.0.0.0:1080",
             "--allow-client", "10.0.0.0/8", "--alert-log", tmp_path / "a.jsonl"], timeout=10)
    assert r.returncode not in (0, None), r
    assert b"--socks 0.0.0.0:1080: a SOCKS listener on a non-loopback address needs --socks-credentials" in r.stderr, r
    bad = tmp_path / "bad-credentials"
    bad.write_text("alice:one\nbob\n")
    r = run([BIN, "run", "--listen", f"127.0.0.1:{free_port()}", "--admin", "off", "--socks", f"127.0.0.1:{free_port()}",
             "--socks-credentials", bad, "--alert-log", tmp_path / "a.jsonl"], timeout=10)
    assert r.returncode not in (0, None) and f"{bad}:2: expected user:password".encode() in r.stderr, r


def test_socks_with_credentials_admits_only_its_users(start_proxy, tmp_path, pki, closing):
    """curl's socks5h://user:password@ (RFC 1929) through a listener with --socks-credentials: the right password
    gets the page; a wrong one, or none, gets nothing (curl says the proxy refused it)."""
    genuine = closing(HTTPServer(blob=PAGE, certfile=str(pki / "genuine.fullchain.pem"), keyfile=str(pki / "genuine.key"), tls="1.3"))
    credentials = tmp_path / "socks-users"
    credentials.write_text("# who may use the SOCKS listener\nalice:s3cret:x\n")
    p = socks_proxy(start_proxy, tmp_path, pki, "block", "--socks-credentials", str(credentials))

    def fetch(user):
        proxy = f"socks5h://{user}@127.0.0.1:{p.socks}" if user else f"socks5h://127.0.0.1:{p.socks}"
        return run(["curl", "-sk", "--max-time", "6", "--proxy", proxy, f"https://genuine.test:{genuine.port}/"], timeout=10)

    ran = fetch("alice:s3cret%3Ax")
    assert PAGE in ran.stdout, ran
    for user in ("alice:wrong", "mallory:s3cret%3Ax", None):
        ran = fetch(user)
        assert PAGE not in ran.stdout and ran.returncode == 97, (user, ran)   # 97: the proxy handshake failed
    assert read_alert_lines(p.alert_log) == []
