"""Servers that try to hold a blocking tunnel open: each byte resets the idle timer, so only a deadline on the
verdict itself ends them. Under block, a server whose handshake does not show its chain within --probe-timeout of
its first byte gets handshake_timeout (always block: the held bytes are the chain on its way), the client no server
byte, and the upstream no known-bad mark (a slow path is not a forged chain)."""
import subprocess
import time

import pytest

from helpers import TCPServer, block_everything, connect_via, wait_alert_lines
from test_hostile_round3 import client_hello
from test_tls13_adversary import closing  # noqa: F401 (fixtures)


def record(content_type, payload):
    return bytes([content_type, 3, 3]) + len(payload).to_bytes(2, "big") + payload


def handshake(kind, body):
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def dripping_certificate(conn):
    """A TLS 1.2 ServerHello, then a Certificate record announcing 10 004 bytes, sent one byte every 0.3 s."""
    conn.recv(65536)   # the ClientHello
    hello = handshake(2, b"\x03\x03" + b"\x42" * 32 + b"\x00" + b"\xc0\x2b\x00" + b"\x00\x00")
    conn.sendall(record(22, hello) + b"\x16\x03\x03" + (10004).to_bytes(2, "big") + b"\x0b" + (10000).to_bytes(3, "big"))
    for _ in range(60):
        time.sleep(0.3)
        conn.sendall(b"\x00")


@pytest.mark.parametrize("on_probe_error", [None, "alert"])
def test_a_server_dripping_its_certificate_is_cut_at_the_verdict_deadline(start_proxy, tmp_path, closing, on_probe_error):
    """Also with `on_probe_error: alert`: releasing the held bytes at the deadline would pass the chain unjudged."""
    server = closing(TCPServer(dripping_certificate))
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 drip.test\n")
    policy = tmp_path / "block.yaml"
    extra = f"  on_probe_error: {on_probe_error}\n" if on_probe_error else ""
    policy.write_text(f"version: 1\ndefaults:\n  action: block\n  anchors: [system]\n{extra}rules: []\n")
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", "2", "--idle-timeout", "60")
    started = time.monotonic()
    r = subprocess.run(["curl", "-sk", "--tls-max", "1.2", "--max-time", "15", "-x", proxy.url,
                        f"https://drip.test:{server.port}/"], capture_output=True, timeout=20)
    elapsed = time.monotonic() - started
    assert r.returncode != 0 and r.stdout == b""
    assert elapsed < 6, f"the tunnel was held {elapsed:.1f} s"
    lines = wait_alert_lines(proxy.alert_log, server.port, 1, timeout=3)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("handshake_timeout", "block")]
    # Not marked: the next CONNECT is answered 200 (and judged again), not 403.
    r = subprocess.run(["curl", "-sk", "--tls-max", "1.2", "--max-time", "15", "-x", proxy.url, "-o", "/dev/null",
                        "-w", "%{http_connect}", f"https://drip.test:{server.port}/"], capture_output=True, timeout=20)
    assert r.stdout == b"200"


def flooding_certificate(conn):
    """A TLS 1.2 ServerHello, then 200 KB of a Certificate message announced at 200 000 bytes and never finished."""
    conn.recv(65536)   # the ClientHello
    hello = handshake(2, b"\x03\x03" + b"\x42" * 32 + b"\x00" + b"\xc0\x2b\x00" + b"\x00\x00")
    body = handshake(11, b"\x00" * 200_000)[:200_000]
    flight = record(22, hello) + b"".join(record(22, body[i:i + 16384]) for i in range(0, len(body), 16384))
    try:
        conn.sendall(flight)
        time.sleep(4)
    except OSError:
        pass


def test_held_bytes_past_the_process_budget_close_their_tunnel_and_mark_nobody(start_proxy, tmp_path, closing):
    """Issue 26, item 6: each tunnel held its server's flight (about 0.7 MiB of memory) with no bound but
    --max-connections. With --held-memory 1 (MiB) eight tunnels holding 200 KB each cannot all fit: those that
    find no room are closed before any held byte passes, counted, logged no_held_room, and nobody is marked."""
    from helpers import free_port
    import json
    import urllib.request
    server = closing(TCPServer(flooding_certificate))
    hosts, policy = block_everything(tmp_path, "flood.test")
    admin = free_port()
    access = tmp_path / "access.jsonl"
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", "3", "--held-memory", "1",
                        "--admin", f"127.0.0.1:{admin}", "--access-log", str(access))
    clients = [subprocess.Popen(["curl", "-sk", "--tls-max", "1.2", "--max-time", "8", "-x", proxy.url,
                                 f"https://flood.test:{server.port}/"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
               for _ in range(8)]
    outputs = [c.communicate(timeout=15)[0] for c in clients]
    assert outputs == [b""] * 8   # nothing reached a client: the held bytes never passed
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    refused = next(float(l.split()[-1]) for l in metrics.splitlines() if l.startswith("chainwatch_held_room_refused_total"))
    assert refused >= 1, metrics
    assert "chainwatch_held_bytes 0" in metrics   # every tunnel gave its room back
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        reasons = [json.loads(l)["chainwatch"]["close"]["reason"] for l in access.read_text().splitlines() if l]
        if len(reasons) == 8:
            break
        time.sleep(0.1)
    assert reasons.count("no_held_room") == refused, reasons
    assert b"no room for the bytes held until the verdict" in proxy.log_path.read_bytes()
    # A resource limit, not a finding: the next CONNECT is answered 200, not 403.
    r = subprocess.run(["curl", "-sk", "--tls-max", "1.2", "--max-time", "8", "-x", proxy.url, "-o", "/dev/null",
                        "-w", "%{http_connect}", f"https://flood.test:{server.port}/"], capture_output=True, timeout=20)
    assert r.stdout == b"200"


@pytest.mark.parametrize("action", ["alert", "block"])
def test_a_client_that_leaves_before_its_hello_ends_its_tunnel_quietly(start_proxy, tmp_path, closing, action):
    """A client that opens a tunnel and ends it before any hello (a reachability check: `chainwatch selftest
    --against` makes one), to a real TLS server (Python's ssl, which answers the end with a decode_error alert and here
    keeps its connection 3 s more): no line either way; under alert the alert reaches the client at once (and the
    end when the server closes), under block nothing unjudged passes and the client's end comes at once. Before, the
    alert, held for a hello that could not come, was never delivered: under alert the tunnel stayed (the client's
    socket in CLOSE-WAIT) until the 30 s idle timeout, under block it was blocked with a line at the verdict
    deadline (2 s here)."""
    import socket
    import ssl
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem"), "-subj", "/CN=early.test",
                    "-days", "2"], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")

    def tls(conn):
        conn.settimeout(10)
        wrapped = context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        try:
            wrapped.do_handshake()
        except (ssl.SSLError, OSError):
            time.sleep(3)   # the end before a hello, answered with an alert; the connection kept a while
        wrapped.close()

    server = closing(TCPServer(tls))
    hosts, policy = block_everything(tmp_path, "early.test")
    if action == "alert":
        policy.write_text("version: 1\ndefaults:\n  action: alert\n  anchors: [system]\nrules: []\n")
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", "2")
    client, status, head = connect_via(proxy.port, f"early.test:{server.port}", timeout=6)
    with client:
        assert status == 200, head
        started = time.monotonic()
        client.shutdown(socket.SHUT_WR)
        got, first = b"", None
        while True:
            data = client.recv(4096)   # raises after the 6 s timeout: the end did not come
            if not data:
                break
            got += data
            first = first or time.monotonic() - started
        ended = time.monotonic() - started
    if action == "alert":
        assert len(got) == 7 and got[:3] == b"\x15\x03\x03" and got[5] == 2, f"not the server's fatal alert: {got.hex()}"
        assert first < 1.5, f"the alert took {first:.1f} s"
    else:
        assert got == b"" and ended < 1.5, (got, ended)
    time.sleep(max(0, 3.2 - (time.monotonic() - started)))   # past the verdict deadline
    assert wait_alert_lines(proxy.alert_log, server.port, 1, timeout=0.3) == []


def test_bytes_held_until_both_ends_have_ended_all_reach_the_client(start_proxy, tmp_path, closing):
    """A server that sends 192 KiB of TLS-looking records at once and closes, and a client (a 4 KiB receive buffer)
    that ends its stream half a second later, before any hello: the records, held for a hello, are released at the
    client's end with both ways ended. Every byte must still arrive: before, the close was decided in the same step as
    the relay and discarded what the write had not taken yet (the client got 0 of 196 668 bytes)."""
    import os
    import socket
    records = b"".join(b"\x16\x03\x03\x40\x00" + os.urandom(0x4000) for _ in range(12))

    def speak_first(conn):
        conn.sendall(records)

    server = closing(TCPServer(speak_first))
    hosts, policy = block_everything(tmp_path, "first.test")
    policy.write_text("version: 1\ndefaults:\n  action: alert\n  anchors: [system]\nrules: []\n")
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts))
    # A CONNECT to an address: the hello's SNI could still pick a rule that holds, so the server's own end releases
    # nothing (to a name it would: test_a_server_that_speaks_first_and_ends_reaches_its_client_at_once).
    client, status, head, early = connect_via(proxy.port, f"127.0.0.1:{server.port}", timeout=5, early=True,
                                              receive_buffer=4096)
    with client:
        assert status == 200 and early == b"", (head, len(early))   # nothing passes before the client's hello
        time.sleep(0.5)   # the server's records are in, held
        client.shutdown(socket.SHUT_WR)
        time.sleep(0.5)   # the proxy writes what the small window takes, and must keep the rest
        got = b""
        while True:
            data = client.recv(65536)   # raises after 5 s: the end did not come
            if not data:
                break
            got += data
    assert len(got) == len(records) and got == records, f"{len(got)} of {len(records)} bytes, or other bytes"


def read_to_end(client):
    """Everything the client gets until the end of its stream (raises at its socket's timeout: no end came)."""
    got = b""
    while True:
        data = client.recv(65536)
        if not data:
            return got
        got += data


SERVER_HELLO_THEN_END = record(22, handshake(2, b"\x03\x03" + b"\x42" * 32 + b"\x00" + b"\xc0\x2b\x00" + b"\x00\x00")) \
    + b"\x16\x03\x03" + (10004).to_bytes(2, "big") + b"\x0b" + (10000).to_bytes(3, "big")


def ending_mid_handshake(conn):
    """Reads the ClientHello, sends a TLS 1.2 ServerHello and the start of a Certificate, then ends its stream (a FIN:
    the connection is read on until the client leaves, so no reset)."""
    import socket
    conn.recv(65536)
    conn.sendall(SERVER_HELLO_THEN_END)
    conn.shutdown(socket.SHUT_WR)
    conn.settimeout(10)
    while conn.recv(65536):
        pass


@pytest.mark.parametrize("action", ["alert", "block"])
def test_a_server_that_ends_mid_handshake_is_not_waited_for(start_proxy, tmp_path, closing, action):
    """A server that ends its stream after its ServerHello, before its chain: its handshake cannot complete. Under
    block the client's tunnel closes at once with nothing passed and no line; under alert its bytes and its end reach
    the client at once; no line either way. Before, under block the client waited for the verdict deadline (4 s here)
    and a `handshake_timeout` line was written about a server that had left (an upstream reset at the same point ended
    quietly at once)."""
    server = closing(TCPServer(ending_mid_handshake))
    hosts, policy = block_everything(tmp_path, "cut.test")
    if action == "alert":
        policy.write_text("version: 1\ndefaults:\n  action: alert\n  anchors: [system]\nrules: []\n")
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", "4")
    client, status, head = connect_via(proxy.port, f"cut.test:{server.port}", timeout=8)
    with client:
        assert status == 200, head
        started = time.monotonic()
        client.sendall(client_hello("cut.test"))   # TLS 1.2 at most: no probe
        got = read_to_end(client)
        ended = time.monotonic() - started
    assert got == (SERVER_HELLO_THEN_END if action == "alert" else b""), got.hex()
    assert ended < 2, f"the end took {ended:.1f} s"
    time.sleep(max(0, 4.3 - (time.monotonic() - started)))   # past the verdict deadline
    assert wait_alert_lines(proxy.alert_log, server.port, 1, timeout=0.3) == []


def test_a_server_that_speaks_first_and_ends_reaches_its_client_at_once(start_proxy, tmp_path, closing):
    """Under alert, a server that sends a TLS-looking record before any client hello and ends (a TLS server that
    timed out a client that sent nothing) to a CONNECT to a name: no handshake can follow, so its record and its end
    reach the client at once, with no line. Before, the record was held for a hello that could not be answered: until
    the client's hello or end, or the 30 s half-closed timeout."""
    import socket
    alert_record = record(21, b"\x02\x28")

    def speak_first_and_end(conn):
        conn.sendall(alert_record)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(10)
        while conn.recv(65536):
            pass

    server = closing(TCPServer(speak_first_and_end))
    hosts, policy = block_everything(tmp_path, "spoke.test")
    policy.write_text("version: 1\ndefaults:\n  action: alert\n  anchors: [system]\nrules: []\n")
    proxy = start_proxy("--policy", str(policy), "--hosts", str(hosts))
    client, status, head, early = connect_via(proxy.port, f"spoke.test:{server.port}", timeout=3, early=True)
    with client:
        assert status == 200, head
        started = time.monotonic()
        got = early + read_to_end(client)   # raises after 3 s: held
        ended = time.monotonic() - started
    assert got == alert_record and ended < 1.5, (got.hex(), ended)
    assert wait_alert_lines(proxy.alert_log, server.port, 1, timeout=0.5) == []


@pytest.mark.parametrize("split", [False, True])
def test_a_chain_sent_before_the_hello_to_an_address_is_judged_under_the_rule_the_hello_names(start_proxy, tmp_path, closing,
                                                                                              split):
    """A server (an interceptor) that sends a whole forged TLS 1.2 flight (ServerHello, Certificate, ServerHelloDone:
    RSA key exchange needs nothing from the hello) as soon as a CONNECT to its address opens, before the client's
    hello. The policy's defaults are `alert`; the hello names a host whose rule is `block`. The flight must be judged
    under the rule the hello names: nothing reaches the client, one `block` line for that rule. Before, it was judged
    at once under the address's rule (`alert`), passed, and the hello's rule never saw it; and, once that was mended,
    still when the hello came in two pieces (`split`: a post-quantum hello spans TCP segments)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.der"), "-outform", "DER",
                    "-subj", "/CN=genuine.test", "-days", "2"], check=True, capture_output=True)
    der = (tmp_path / "cert.der").read_bytes()
    certificate = handshake(11, (len(der) + 3).to_bytes(3, "big") + len(der).to_bytes(3, "big") + der)
    flight = record(22, handshake(2, b"\x03\x03" + b"\x42" * 32 + b"\x00" + b"\x00\x9c\x00" + b"\x00\x00")) \
        + record(22, certificate) + record(22, handshake(14, b""))

    def forge_first(conn):
        conn.sendall(flight)
        conn.settimeout(10)
        while conn.recv(65536):
            pass

    server = closing(TCPServer(forge_first))
    policy = tmp_path / "mixed.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: alert\n  anchors: [system]\n"
                      "rules:\n  - name: genuine\n    match: [genuine.test]\n    action: block\n    anchors: [system]\n")
    proxy = start_proxy("--policy", str(policy), "--probe-timeout", "2")
    client, status, head, early = connect_via(proxy.port, f"127.0.0.1:{server.port}", timeout=6, early=True)
    with client:
        assert status == 200 and early == b"", (head, early)
        time.sleep(0.3)   # the forged flight is in before the hello
        hello = client_hello("genuine.test")
        if split:
            client.sendall(hello[:40])
            time.sleep(0.3)
            hello = hello[40:]
        client.sendall(hello)
        got = bytearray()
        try:
            while data := client.recv(65536):
                got += data
        except TimeoutError:   # no end within 6 s: whatever came is judged below
            pass
    assert got == b"", f"{len(got)} bytes of the forged flight reached the client"
    lines = wait_alert_lines(proxy.alert_log, server.port, 1, timeout=3)
    assert [(l["event"]["action"], l["rule"]["name"]) for l in lines] == [("block", "genuine")], lines
