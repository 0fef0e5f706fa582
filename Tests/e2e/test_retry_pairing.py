"""First contact to a server that asks for a retry (issue 24): the genuine server answers the offer with a
HelloRetryRequest (it takes P-384 only; curl's key share is x25519), so each connection of a first contact's pair
sends a second hello. Before, the tunnel held its HelloRetryRequest until the pair's probe was answered, so the
probe's second hello always reached the server a round trip before the client's, whatever the coin drew for the
first hellos: an interceptor that forged the connection whose second hello came last forged the tunnel every time
(17 of 17 first contacts in an adversarial try, no line). Now the probe holds its second hello until the client's is
whole, and the two leave together in an order drawn at random (`InspectionMachine+Retry`), so that interceptor
forges the probe about half the time, and is caught.

The interceptor below sends each connection's first hello to both backends (their HelloRetryRequests are alike:
the same stack and settings), relays the genuine one, and picks only when the second hello is whole: the later of
two second hellos for one name within 2 s goes to the forger (make-pki.sh's length-matched chain, so a forged
tunnel is not told by its record lengths: the stated limit), the earlier to the genuine server. Each round is a fresh
proxy (an empty probe cache); spot checks are off.
"""
import select
import socket
import threading
import time

from helpers import read_alert_lines, wait_alert_lines
from interceptor import LoopbackInterceptor, pump, read_client_hello
from test_tls13_adversary import PAGE, closing, curl, hosts_file, pinned_policy, threaded  # noqa: F401 (fixtures)

ROUNDS = 20   # a coin that lands one way in all 20 rounds: 1 in 524 288
FORGED_PAGE = b"hello from the forger"


def retrying(fullchain, key, blob):
    """The Python TLS 1.3 server, taking P-384 only: an x25519 key share gets a HelloRetryRequest."""
    server = threaded(fullchain, key, blob=blob)
    server.server.socket.context.set_ecdh_curve("secp384r1")
    return server


def records(buf):
    """The content types of the whole records at the start of `buf`, and whether `buf` ends on a record's end."""
    at, types = 0, []
    while at + 5 <= len(buf) and at + 5 + int.from_bytes(buf[at + 3:at + 5], "big") <= len(buf):
        types.append(buf[at])
        at += 5 + int.from_bytes(buf[at + 3:at + 5], "big")
    return types, at == len(buf)


class ForgeTheLaterSecondHello(LoopbackInterceptor):
    """A TCP interceptor on 127.0.0.1 that decides at the second hello. Bounded: 5 s for each hello, 15 s of silence
    ends a spliced connection; `close()` stops the listener and every socket."""

    def __init__(self, genuine_port, forger_port, window=2.0):
        self.backends = {"genuine": genuine_port, "forger": forger_port}
        self.window = window
        self.seen = []          # per connection: sni, when its second hello was whole, the backend chosen, an error
        super().__init__()

    def reset(self):
        with self.lock:
            self.seen = []

    def handle(self, client):
        record = {"sni": None, "second": None, "backend": None, "retried": False, "error": None}
        with self.lock:
            self.seen.append(record)
        try:
            raw, hello = read_client_hello(client, 5)
            record["sni"] = hello.server_name
            ends = {name: self.track(socket.create_connection(("127.0.0.1", port), timeout=5))
                    for name, port in self.backends.items()}
            for end in ends.values():
                end.sendall(raw)
            # The genuine server's HelloRetryRequest goes to the client; the forger's, byte for byte the same, is read
            # and dropped, as far as the genuine's went (the rest of it, should the forger be chosen, must not reach
            # the client twice).
            relayed = dropped = 0
            pending = b""
            deadline = time.monotonic() + 5
            while True:
                ready, _, _ = select.select([client, *ends.values()], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise TimeoutError("no second hello")
                if ends["genuine"] in ready:
                    data = ends["genuine"].recv(65536)
                    if not data:
                        raise EOFError("the genuine server closed before the second hello")
                    record["retried"] = True
                    client.sendall(data)
                    relayed += len(data)
                if ends["forger"] in ready:
                    dropped += len(ends["forger"].recv(65536))   # it sends nothing more before a second hello
                if client in ready:
                    data = client.recv(65536)
                    if not data:
                        raise EOFError("the client closed before its second hello")
                    pending += data
                    types, whole = records(pending)
                    if whole and 22 in types:
                        break
            now = time.monotonic()
            with self.lock:
                record["second"] = now
                earlier = [o for o in self.seen if o is not record and o["sni"] == record["sni"]
                           and o["second"] is not None and now - o["second"] < self.window]
                record["backend"] = "forger" if earlier else "genuine"
            chosen = ends.pop(record["backend"])
            for other in ends.values():
                other.close()
            if record["backend"] == "forger":   # what the client has of the genuine server's, skipped in the forger's
                chosen.settimeout(5)
                while dropped < relayed:
                    data = chosen.recv(relayed - dropped)
                    if not data:
                        raise EOFError("the forger closed before its HelloRetryRequest")
                    dropped += len(data)
            chosen.sendall(pending)
            threading.Thread(target=pump, args=(chosen, client, 15), daemon=True).start()
            pump(client, chosen, 15)
        except Exception as error:   # recorded for the assertion messages
            record["error"] = repr(error)[:80]
        finally:
            client.close()


def rounds(start_proxy, tmp_path, pki, closing, action):
    genuine = closing(retrying(pki / "genuine.fullchain.pem", pki / "genuine.key", PAGE))
    forger = closing(retrying(pki / "matched.fullchain.pem", pki / "matched.key", FORGED_PAGE))
    icpt = closing(ForgeTheLaterSecondHello(genuine.port, forger.port))
    trusted = tmp_path / "interception-ca.pem"   # trusted as an interception CA would be: the pins catch it
    trusted.write_text((pki / "matched-root.pem").read_text())
    outcomes = []
    for _ in range(ROUNDS):
        icpt.reset()
        p = start_proxy("--policy", str(pinned_policy(tmp_path, pki, action)), "--hosts", str(hosts_file(tmp_path)),
                        "--ca", str(trusted), "--probe-timeout", "10", "--spot-check-rate", "0")
        ran = curl(p, icpt.port, path="/blob")
        time.sleep(0.3)   # a line is written before the tunnel closes; this only lets a stray second one show
        lines = read_alert_lines(p.alert_log, icpt.port)
        if not lines and FORGED_PAGE not in ran.stdout and PAGE not in ran.stdout:
            lines = wait_alert_lines(p.alert_log, icpt.port)   # no page: its line, however loaded the machine
        with icpt.lock:   # (the tunnel's connection from the CONNECT closes unused, before any hello: not counted)
            seen = [dict(o) for o in icpt.seen if o["sni"] is not None]
        outcomes.append({"forged page": FORGED_PAGE in ran.stdout, "genuine page": PAGE in ran.stdout,
                         "lines": [(l["event"]["reason"], l["event"]["action"]) for l in lines],
                         "backends": [o["backend"] for o in seen], "retried": [o["retried"] for o in seen],
                         "errors": [o["error"] for o in seen if o["error"]],
                         "client": (ran.returncode, round(ran.elapsed, 2), ran.stderr[-120:])})
        p.stop()
    return outcomes


def check(outcomes, action):
    print(f"{action}: {outcomes}")   # the whole table, beside a failure's shortened one
    for o in outcomes:
        # The pair: two connections, each retried by the genuine server, one of each to the forger and the genuine.
        assert o["retried"] == [True, True] and sorted(o["backends"]) == ["forger", "genuine"], outcomes
    caught = [o for o in outcomes if o["lines"]]
    missed = [o for o in outcomes if not o["lines"]]
    for o in caught:   # the probe was forged: one line, the pins' finding; under block the forged page never came
        assert len(o["lines"]) == 1 and o["lines"][0][1] == action, outcomes
        assert o["lines"][0][0] in ("root_mismatch", "pin_mismatch", "intermediate_mismatch"), outcomes
        if action == "block":
            assert not o["forged page"], outcomes
    for o in missed:   # the tunnel was forged, its flight matching the probe's: the stated limit
        assert o["forged page"], outcomes
    if action == "alert":   # nothing held: every client got a page, forged or not
        assert all(o["forged page"] or o["genuine page"] for o in outcomes), outcomes
    assert caught, f"the forger never met the probe in {ROUNDS} first contacts (the second hellos' order is fixed): {outcomes}"
    assert missed, f"the forger always met the probe in {ROUNDS} first contacts (the order is not random): {outcomes}"
    return len(caught)


def test_a_forger_of_the_later_second_hello_forges_the_probe_half_the_time(start_proxy, tmp_path, pki, closing):
    """Under block. (Under alert the same pairing holds the client's second hello; on loopback the old order was
    already mixed there, a local client's round trip being as short as the probe's work, so an end-to-end run could
    not tell the two builds apart: the unit test `underAlertTheClientsSecondHelloWaitsForTheProbes` checks it.)"""
    caught = check(rounds(start_proxy, tmp_path, pki, closing, "block"), "block")
    print(f"block, forge the later second hello: caught at first contact in {caught} of {ROUNDS} rounds")
