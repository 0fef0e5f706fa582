"""Transparent interception on a gateway (issue 28, "Reach every client"), on a real kernel: network namespaces this
test makes, `ip netns` and veth pairs, nftables. A client namespace routed through a gateway namespace, and a server
namespace behind it:

    client (10.77.1.2, fd77:1::2) ── gateway (chainwatch, nftables redirect) ── server (10.77.2.2, fd77:2::2)

The gateway forwards, and its nftables `redirect` sends the client's TCP connections to ports 8443-8445 and 8080 to
chainwatch's `--transparent` listeners (IPv4 to one, IPv6 to another). chainwatch reads each connection's original
destination (SO_ORIGINAL_DST) and tunnels to it; its own connections leave the gateway from its output path, which
no rule redirects (the exemption). The clients have no proxy setting at all: curl, Python's ssl and curl_cffi with
Safari's hello. The server namespace runs the genuine chain on 8443 (TLS 1.3) and 8445 (TLS 1.2), the attacker's
(same subjects, another root) on 8444, and plain HTTP on 8080.

Namespaces, links, /etc/netns files and processes are removed and stopped (by PID) at the end. A machine that cannot
make namespaces or nftables NAT skips these tests and says why.
"""
import os
import shutil
import subprocess
import time

import pytest

from conftest import BIN
from helpers import free_port, read_alert_lines, wait_alert_lines
from test_tls13_adversary import pinned_policy  # noqa: F401 (fixture)

PAGE = b"hello from upstream"
HERE = os.path.dirname(os.path.abspath(__file__))
N = os.getpid() % 10000
CLIENT, GATEWAY, SERVER = f"cwc{N}", f"cwg{N}", f"cws{N}"
V4 = {"client": "10.77.1.2", "gw_client": "10.77.1.1", "gw_server": "10.77.2.1", "server": "10.77.2.2"}
V6 = {"client": "fd77:1::2", "gw_client": "fd77:1::1", "gw_server": "fd77:2::1", "server": "fd77:2::2"}
PORTS = {"genuine": 8443, "forged": 8444, "genuine12": 8445, "plain": 8080}


def sh(*args, ns=None, check=True, timeout=20):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.returncode} {r.stderr.decode(errors='replace')}")
    return r


def nft(ns, text):
    r = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=text.encode(), capture_output=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(f"nft in {ns}: {r.stderr.decode(errors='replace')}\n{text}")


def teardown_network():
    for ns in (CLIENT, GATEWAY, SERVER):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(f"/etc/netns/{CLIENT}", ignore_errors=True)


def build_network():
    teardown_network()
    for ns in (CLIENT, GATEWAY, SERVER):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
    sh("ip", "link", "add", f"c{N}a", "type", "veth", "peer", "name", f"g{N}a")
    sh("ip", "link", "add", f"s{N}b", "type", "veth", "peer", "name", f"g{N}b")
    for link, ns in ((f"c{N}a", CLIENT), (f"g{N}a", GATEWAY), (f"g{N}b", GATEWAY), (f"s{N}b", SERVER)):
        sh("ip", "link", "set", link, "netns", ns)
    for ns, link, v4, v6 in ((CLIENT, f"c{N}a", V4["client"], V6["client"]), (GATEWAY, f"g{N}a", V4["gw_client"], V6["gw_client"]),
                             (GATEWAY, f"g{N}b", V4["gw_server"], V6["gw_server"]), (SERVER, f"s{N}b", V4["server"], V6["server"])):
        sh("ip", "addr", "add", f"{v4}/24", "dev", link, ns=ns)
        sh("ip", "-6", "addr", "add", f"{v6}/64", "dev", link, "nodad", ns=ns)
        sh("ip", "link", "set", link, "up", ns=ns)
    for ns, gw4, gw6 in ((CLIENT, V4["gw_client"], V6["gw_client"]), (SERVER, V4["gw_server"], V6["gw_server"])):
        sh("ip", "route", "add", "default", "via", gw4, ns=ns)
        sh("ip", "-6", "route", "add", "default", "via", gw6, ns=ns)
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=GATEWAY)
    sh("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", ns=GATEWAY)
    # The client resolves genuine.test to the server (ip netns exec bind-mounts /etc/netns/NS/hosts on /etc/hosts).
    os.makedirs(f"/etc/netns/{CLIENT}", exist_ok=True)
    with open(f"/etc/netns/{CLIENT}/hosts", "w") as f:
        f.write(f"127.0.0.1 localhost\n{V4['server']} genuine.test\n")


def redirect_rules(v4_port, v6_port, own_traffic_too=False):
    """The gateway recipe's rules (deploy/README.md, Gateway): the client side's TCP to the watched ports goes to
    chainwatch. `own_traffic_too` adds what a wrong recipe does: the gateway's own output redirected as well, which
    catches chainwatch's own upstream connections (the exemption missing)."""
    ports = ", ".join(str(p) for p in PORTS.values())
    output = (f"""
  chain output {{ type nat hook output priority -100;
    meta nfproto ipv4 tcp dport {{ {ports} }} redirect to :{v4_port}
  }}""" if own_traffic_too else "")
    return f"""table inet chainwatch {{
  chain prerouting {{ type nat hook prerouting priority dstnat;
    iifname "g{N}a" meta nfproto ipv4 tcp dport {{ {ports} }} redirect to :{v4_port}
    iifname "g{N}a" meta nfproto ipv6 tcp dport {{ {ports} }} redirect to :{v6_port}
  }}{output}
}}
"""


class NetnsProcess:
    """A process inside a namespace, stopped by its PID."""

    def __init__(self, ns, args, log):
        self.log = open(log, "wb")
        self.path = log
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, *[str(a) for a in args]], stdout=self.log, stderr=subprocess.STDOUT)

    def wait_for(self, text, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text.encode() in open(self.path, "rb").read():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.proc.args} did not say {text!r}: {open(self.path, 'rb').read()[-2000:]!r}")

    def output(self):
        return open(self.path, "rb").read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def network(pki, tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("transparent mode tests need root and nftables (make test-deps installs nftables)")
    made = subprocess.run(["ip", "netns", "add", f"cwp{N}"], capture_output=True)
    subprocess.run(["ip", "netns", "del", f"cwp{N}"], capture_output=True)
    if made.returncode != 0:   # a container without CAP_SYS_ADMIN, say; anything after this that fails is a failure
        pytest.skip(f"this machine cannot make network namespaces: {made.stderr.decode(errors='replace').strip()}")
    build_network()
    logs = tmp_path_factory.mktemp("netns")
    servers = []
    try:
        for name, port, cert, tls in (("genuine", PORTS["genuine"], "genuine", "1.3"), ("forged", PORTS["forged"], "attacker", "1.3"),
                                      ("genuine12", PORTS["genuine12"], "genuine", "1.2"), ("plain", PORTS["plain"], None, None)):
            args = ["python3", os.path.join(HERE, "netns_server.py"), "--port", port]
            if cert:
                args += ["--cert", pki / f"{cert}.fullchain.pem", "--key", pki / f"{cert}.key", "--tls", tls]
            server = NetnsProcess(SERVER, args, logs / f"{name}.log")
            servers.append(server)
            server.wait_for("ready")
        yield logs
    finally:
        for server in servers:
            server.stop()
        teardown_network()


def tproxy_rules(v4_port, v6_port):
    """The `tproxy` variant: no NAT, the packets keep their destination address and are delivered to chainwatch's
    IP_TRANSPARENT listener by a mark and a local route (set up in `start_gateway`)."""
    ports = ", ".join(str(p) for p in PORTS.values())
    return f"""table inet chainwatch {{
  chain prerouting {{ type filter hook prerouting priority mangle;
    iifname "g{N}a" meta nfproto ipv4 tcp dport {{ {ports} }} tproxy ip to :{v4_port} meta mark set 1 accept
    iifname "g{N}a" meta nfproto ipv6 tcp dport {{ {ports} }} tproxy ip6 to :{v6_port} meta mark set 1 accept
  }}
}}
"""


def start_gateway(tmp_path, pki, action, own_traffic_too=False, tproxy=False):
    """chainwatch in the gateway namespace with the redirect (or tproxy) rules; returns (process, alert log)."""
    v4_port, v6_port = free_port(), free_port()
    if tproxy:
        nft(GATEWAY, "flush ruleset\n" + tproxy_rules(v4_port, v6_port))
        for family in ("-4", "-6"):
            sh("ip", family, "rule", "add", "fwmark", "1", "lookup", "100", ns=GATEWAY, check=False)
            sh("ip", family, "route", "replace", "local", "default" if family == "-4" else "::/0", "dev", "lo", "table", "100", ns=GATEWAY)
    else:
        nft(GATEWAY, "flush ruleset\n" + redirect_rules(v4_port, v6_port, own_traffic_too))
    policy = pinned_policy(tmp_path, pki, action)
    policy.write_text(policy.read_text().replace("defaults:\n  action: alert\n", "defaults:\n  action: alert\n  non_tls: allow\n"))
    alerts = tmp_path / f"alerts-{action}.jsonl"
    proxy = NetnsProcess(GATEWAY, [BIN, "run", "--listen", f"127.0.0.1:{free_port()}", "--admin", "off",
                                   "--transparent", f"0.0.0.0:{v4_port}", "--transparent", f"[::]:{v6_port}",
                                   "--allow-client", "10.77.1.0/24", "--allow-client", "fd77:1::/64",
                                   "--policy", policy, "--ca", pki / "attacker-root.pem", "--alert-log", alerts,
                                   "--probe-timeout", "2", "--grace", "1", "--spot-check-rate", "0"],
                         tmp_path / f"chainwatch-{action}.log")
    proxy.wait_for("transparent on")
    return proxy, alerts


def curl(port, *options, v6=False, scheme="https"):
    target = f"[{V6['server']}]" if v6 else "genuine.test"
    resolve = ["--resolve", f"genuine.test:{port}:[{V6['server']}]"] if v6 else []
    url = f"{scheme}://genuine.test:{port}/" if scheme == "https" else f"http://{target}:{port}/"
    return sh("curl", "-sk", "--max-time", "8", *resolve, *options, url, ns=CLIENT, check=False, timeout=15)


PYTHON_CLIENT = """
import socket, ssl, sys
family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(family); s.settimeout(8); s.connect((sys.argv[1], int(sys.argv[2])))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
try:
    t = ctx.wrap_socket(s, server_hostname='genuine.test')
    t.sendall(b'GET / HTTP/1.0\\r\\nHost: genuine.test\\r\\n\\r\\n')
    sys.stdout.buffer.write(t.makefile('rb').read())
except (ssl.SSLError, OSError) as e:
    print(repr(e))
"""

CFFI_CLIENT = """
import sys
from curl_cffi import CurlOpt, requests
try:
    # Its libcurl resolves with c-ares, which does not read the namespace's hosts file: the name is pinned here.
    with requests.Session(curl_options={CurlOpt.RESOLVE: [f'genuine.test:{sys.argv[1]}:{sys.argv[2]}']}) as s:
        r = s.get(f'https://genuine.test:{sys.argv[1]}/', impersonate='safari', verify=False, timeout=8)
    sys.stdout.write(r.text)
except Exception as e:
    print(repr(e))
"""


def python(port, v6=False):
    return sh("python3", "-c", PYTHON_CLIENT, V6["server"] if v6 else V4["server"], port, ns=CLIENT, check=False, timeout=15)


def cffi(port):
    """curl_cffi with Safari's exact ClientHello. Not Chrome's or Firefox's here: inside `ip netns exec` their
    handshakes with the namespace's Python TLS server stall even with no chainwatch and no gateway on the path (a
    client and server in one namespace), while Safari's, curl's and Python's complete; test_probe_is_the_client runs
    Chrome's and Firefox's hellos through chainwatch on the host's loopback."""
    return sh("python3", "-c", CFFI_CLIENT, port, V4["server"], ns=CLIENT, check=False, timeout=15)


@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_gateway_client_with_no_proxy_setting_is_inspected(network, tmp_path, pki, action):
    proxy, alerts = start_gateway(tmp_path, pki, action)
    try:
        # Genuine: TLS 1.3 and 1.2, IPv4 and IPv6, three clients; every page, no line.
        genuine = [("curl v4 1.3", curl(PORTS["genuine"])), ("curl v6 1.3", curl(PORTS["genuine"], v6=True)),
                   ("curl v4 1.2", curl(PORTS["genuine12"])), ("python v6 1.2", python(PORTS["genuine12"], v6=True)),
                   ("python v4 1.3", python(PORTS["genuine"])), ("curl_cffi safari v4", cffi(PORTS["genuine"]))]
        for name, ran in genuine:
            assert PAGE in ran.stdout, f"{name}: {ran}; chainwatch: {proxy.output()[-1500:]}"
        plain = curl(PORTS["plain"], scheme="http")
        assert PAGE in plain.stdout, f"plain HTTP, non_tls: allow: {plain}"
        time.sleep(0.5)
        assert read_alert_lines(alerts) == [], "a genuine server or allowed plain text made a line"
        # The forger: the pinned rule (picked by the SNI) catches it, IPv4 and IPv6.
        forged = [curl(PORTS["forged"]), curl(PORTS["forged"], v6=True)]
        lines = wait_alert_lines(alerts, PORTS["forged"], 2, timeout=6)
        assert len(lines) >= 2, (lines, forged, proxy.output()[-1500:])
        for line in lines:
            assert line["event"]["reason"] == "root_mismatch" and line["event"]["action"] == action, line
            assert line["chainwatch"]["client"]["via"] == "transparent", line
            assert line["tls"]["client"]["server_name"] == "genuine.test", line
        assert {l["destination"]["ip"] for l in lines} >= {V4["server"], V6["server"]}, "the original destinations"
        if action == "block":
            assert all(PAGE not in ran.stdout for ran in forged), forged
        else:
            assert all(PAGE in ran.stdout for ran in forged), forged
    finally:
        proxy.stop()


def test_chainwatchs_own_connection_redirected_back_is_reset_not_looped(network, tmp_path, pki):
    """A recipe without the exemption: the gateway's own output to the watched ports is redirected too, which catches
    chainwatch's own upstream connection. chainwatch resets it (one line per attempt) instead of tunnelling to itself
    without end; the client gets no page, the process lives."""
    proxy, alerts = start_gateway(tmp_path, pki, "block", own_traffic_too=True)
    try:
        ran = curl(PORTS["genuine"])
        assert PAGE not in ran.stdout, ran
        time.sleep(0.5)
        out = proxy.output()
        refused = out.count("chainwatch's own: its traffic must be exempt from the redirect")
        assert 1 <= refused <= 6, f"{refused} own connections reset: {out[-3000:]}"
        assert proxy.proc.poll() is None, "chainwatch died"
    finally:
        proxy.stop()


def test_tproxy_delivers_connections_that_keep_their_destination(network, tmp_path, pki):
    """`tproxy` instead of `redirect`: no address translation; the listener (IP_TRANSPARENT, chainwatch runs as root
    here) accepts connections addressed to the server, and their local address is the original destination. IPv4 and
    IPv6: genuine pages pass with no line, the forger is blocked."""
    proxy, alerts = start_gateway(tmp_path, pki, "block", tproxy=True)
    try:
        for ran in (curl(PORTS["genuine"]), curl(PORTS["genuine"], v6=True), python(PORTS["genuine12"], v6=True)):
            assert PAGE in ran.stdout, f"{ran}; chainwatch: {proxy.output()[-1500:]}"
        forged = [curl(PORTS["forged"]), curl(PORTS["forged"], v6=True)]
        assert all(PAGE not in ran.stdout for ran in forged), forged
        lines = wait_alert_lines(alerts, PORTS["forged"], 2, timeout=6)
        assert {(l["event"]["reason"], l["destination"]["ip"]) for l in lines} >= {("root_mismatch", V4["server"]), ("root_mismatch", V6["server"])}, lines
        assert all(l["destination"]["port"] == PORTS["forged"] for l in lines)
    finally:
        proxy.stop()
