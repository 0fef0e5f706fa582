"""An interceptor that answers one connection of a first contact's pair and holds the other (issue 24, README Known
limits). Under block it watches what chainwatch sends on the answered connection (A) after the genuine server's
flight. Before, a probe finished its handshake at once (its Finished and a close_notify, ~2 ms after the flight)
while a tunnel held for the verdict stayed silent and was given up at the pair stall; so the interceptor knew which
was which, forged the held connection when A was the probe, and otherwise the tunnel's replay: 10 of 10 first
contacts forged, no line. Now a pair's probe keeps its closing flight, and reads nothing more, until the tunnel is
decided, and gives its connection up without it after the pair stall, as the tunnel does (`PairProbeGate`): A is
silent and closed at the stall whichever it was. What such an interceptor still has is the tunnel's replay (its
first hello, byte for byte): it answers B genuinely and forges a replay when one comes, so it forges the first
contacts where it answered the tunnel first, about half, and is never caught; and one that sends A its ServerHello
alone tells them apart outright (a probe not done waits past the stall). Both are the stated limit (README, Known
limits); this test checks the silence.
"""
import select
import socket
import threading
import time

import pytest

from helpers import read_alert_lines
from interceptor import LoopbackInterceptor, pump, read_client_hello
from test_tls13_adversary import PAGE, closing, curl, hosts_file, pinned_policy, threaded  # noqa: F401 (fixtures)

ROUNDS = 10   # each role for A in some round: all ten alike 1 in 512
FORGED_PAGE = b"hello from the forger"
WINDOW = 2.0  # seconds between the two hellos of a pair


class Withholder(LoopbackInterceptor):
    """A TCP interceptor on 127.0.0.1. The first hello for a name (A) goes to the genuine server and is watched; the
    second within `WINDOW` (B) is held until A closes (with `nudge`, after its server's first 5 bytes were sent on:
    a tunnel's first server bytes once let the probe's Finished go), then goes to the genuine server; a later hello byte for byte
    A's (the tunnel's replay) goes to the forger. Bounded: 5 s for a hello, 10 s holding B, 15 s of silence ends a
    spliced connection; `close()` stops the listener and every socket."""

    def __init__(self, genuine_port, forger_port, nudge=False):
        self.ports = {"genuine": genuine_port, "forger": forger_port}
        self.nudge = nudge
        self.a = None
        super().__init__()
        self.reset()

    def reset(self):
        with self.lock:
            # A: its hello, when it came, the server's first byte, chainwatch's bytes after it, when A closed.
            self.a = None
            self.b_seen = False
            self.replays = 0
            self.a_closed = threading.Event()

    def _connect(self, name):
        return self.track(socket.create_connection(("127.0.0.1", self.ports[name]), timeout=5))

    def handle(self, client):
        try:
            raw, hello = read_client_hello(client, 5)
        except (OSError, ValueError):
            client.close()   # the tunnel's connection from the CONNECT, closed unused before any hello
            return
        now = time.monotonic()
        with self.lock:
            if self.a is not None and raw == self.a["raw"]:
                role = "replay"
                self.replays += 1
            elif self.a is not None and not self.b_seen and now - self.a["at"] < WINDOW:
                role = "B"
                self.b_seen = True
            else:
                role = "A"
                self.a = {"raw": raw, "at": now, "server": None, "sent": b"", "closed": None}
        if role == "A":
            return self._watch(client, raw)
        upstream = self._connect("forger" if role == "replay" else "genuine")
        upstream.sendall(raw)
        if role == "B":
            if self.nudge:   # B's first 5 bytes (a record header, alike from any server) go at once
                upstream.settimeout(5)
                client.sendall(upstream.recv(5))
            self.a_closed.wait(10)
        self._splice(client, upstream)

    def _watch(self, client, raw):
        a = self.a
        upstream = self._connect("genuine")
        upstream.sendall(raw)
        ends = [client, upstream]
        try:
            while ends:
                ready, _, _ = select.select(ends, [], [], 15)
                if not ready:
                    return
                for sock in ready:
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if sock is upstream:
                        if not data:
                            ends.remove(upstream)
                            continue
                        if a["server"] is None:
                            a["server"] = time.monotonic()
                        client.sendall(data)
                    else:
                        if not data:
                            a["closed"] = time.monotonic()
                            return
                        if a["server"] is not None:
                            a["sent"] += data
                        upstream.sendall(data)
        finally:
            self.a_closed.set()
            client.close()
            upstream.close()

    @staticmethod
    def _splice(client, upstream):
        threading.Thread(target=pump, args=(upstream, client, 15), daemon=True).start()
        pump(client, upstream, 15)
        client.close()
        upstream.close()


@pytest.mark.parametrize("nudge", [False, True])
def test_the_answered_connection_of_a_pair_is_silent_whichever_it_is(start_proxy, tmp_path, pki, closing, nudge):
    genuine = closing(threaded(pki / "genuine.fullchain.pem", pki / "genuine.key", blob=PAGE))
    forger = closing(threaded(pki / "matched.fullchain.pem", pki / "matched.key", blob=FORGED_PAGE))
    icpt = closing(Withholder(genuine.port, forger.port, nudge=nudge))
    trusted = tmp_path / "interception-ca.pem"
    trusted.write_text((pki / "matched-root.pem").read_text())
    rounds = []
    for _ in range(ROUNDS):
        icpt.reset()
        # --probe-timeout 5: the pair stall is 500 ms.
        p = start_proxy("--policy", str(pinned_policy(tmp_path, pki, "block")), "--hosts", str(hosts_file(tmp_path)),
                        "--ca", str(trusted), "--probe-timeout", "5", "--spot-check-rate", "0")
        ran = curl(p, icpt.port, path="/blob", max_time=8)
        time.sleep(0.3)
        a = icpt.a
        rounds.append({"sent after the flight": len(a["sent"]) if a else None,
                       "closed after (ms)": round((a["closed"] - a["server"]) * 1000) if a and a["closed"] and a["server"] else None,
                       "replays": icpt.replays, "forged": FORGED_PAGE in ran.stdout, "genuine": PAGE in ran.stdout,
                       "lines": [l["event"]["reason"] for l in read_alert_lines(p.alert_log, icpt.port)]})
        p.stop()
    print(f"withholding, block, nudge {nudge}: {rounds}")
    for r in rounds:
        # Whichever A was, chainwatch sent nothing on it after the server's flight and gave it up at the pair stall.
        assert r["sent after the flight"] == 0, rounds
        assert r["closed after (ms)"] is not None and 400 <= r["closed after (ms)"] <= 1500, rounds
        # A replay follows only when A was the tunnel; then the interceptor forged it (the stated limit), else the
        # page came from the genuine server.
        assert r["replays"] in (0, 1) and (r["forged"] if r["replays"] else r["genuine"]), rounds
    roles = {r["replays"] for r in rounds}
    assert roles == {0, 1}, f"A was always the {'tunnel' if roles == {1} else 'probe'} in {ROUNDS} first contacts: {rounds}"
