"""Anchor kinds: the interception CA of a TLS-inspection gateway, installed into the OS trust store, raises
local_root; the same CA named by the operator (--ca) is trusted quietly; a public root raises nothing.

"Installed into the OS trust store" is done the way update-ca-certificates does it, without touching the machine: the
proxy gets SSL_CERT_FILE, a copy of the system bundle with the CA appended (OpenSSL's default paths read it). The
public root set stays Debian's /usr/share/ca-certificates/mozilla (the default), which does not hold the CA.

Every case runs over TLS 1.2 (the chain read in the tunnel) and TLS 1.3 (the chain from the probe). The quiet cases
run under `action: block`, where the client gets the page only after a passing verdict: a page proves the tunnel was
judged and passed, and no line may follow."""
import subprocess
import time

import pytest

from conftest import BIN
from helpers import HTTPServer, read_alert_lines, wait_alert_lines
from test_tls13_adversary import closing  # noqa: F401 (fixtures)

SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PAGE = b"hello from upstream\n"   # what helpers.HTTPServer answers to GET /


@pytest.fixture(scope="module")
def installed_bundle(pki, tmp_path_factory):
    """The system bundle with the interception CA (the test's attacker root) appended: an OS store it was added to."""
    path = tmp_path_factory.mktemp("os-store") / "ca-certificates.crt"
    path.write_text(open(SYSTEM_BUNDLE).read() + (pki / "attacker-root.pem").read_text())
    return path


def start(start_proxy, tmp_path, action, *more, local_root=None, env=None):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    policy = tmp_path / f"policy-{action}-{local_root}.yaml"
    extra = f"  local_root: {local_root}\n" if local_root else ""
    policy.write_text(f"version: 1\ndefaults:\n  action: {action}\n  anchors: [system]\n{extra}rules: []\n")
    return start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", "3", *more, env=env)


def fetch(proxy, port, pki, tls):
    """curl as a managed client whose machine trusts the gateway's CA: it accepts the intercepted chain."""
    r = subprocess.run(["curl", "-sS", "--max-time", "8", "--tls-max", tls, "--tlsv" + tls, "--cacert",
                        str(pki / "attacker-root.pem"), "-x", proxy.url, f"https://genuine.test:{port}/"],
                       capture_output=True, timeout=15)
    return r.returncode, r.stdout


@pytest.fixture(params=["1.2", "1.3"])
def interceptor(request, pki, closing):
    """The gateway's forged genuine.test chain, signed by the interception CA."""
    server = closing(HTTPServer(certfile=str(pki / "attacker.fullchain.pem"),
                                keyfile=str(pki / "attacker.key"), tls=request.param))
    server.tls = request.param
    return server


@pytest.mark.parametrize("action", ["alert", "block"])
def test_ca_installed_in_the_os_store_raises_local_root(start_proxy, tmp_path, pki, installed_bundle, interceptor, action):
    proxy = start(start_proxy, tmp_path, action, env={"SSL_CERT_FILE": str(installed_bundle)})
    code, page = fetch(proxy, interceptor.port, pki, interceptor.tls)
    assert (code, page) == (0, PAGE)   # local_root alerts by default, under either action
    lines = wait_alert_lines(proxy.alert_log, interceptor.port, 1, timeout=5)
    assert [l["event"]["reason"] for l in lines] == ["local_root"]
    line = lines[0]
    assert line["event"]["action"] == "alert"
    assert line["chainwatch"]["chain"]["anchor_kind"] == "local"
    assert line["chainwatch"]["level"] == "root"
    assert line["chainwatch"]["chain"]["sha256"][-1].upper() == pki.fps["attacker-root"]["sha256"].replace(":", "")
    # TLS 1.3 under block: the probe went first and was judged; the tunnel is then answered from that verdict.
    assert line["chainwatch"]["evidence"] in (("passive",) if interceptor.tls == "1.2" else ("probe", "cache"))


def test_local_root_block_keeps_the_forged_flight_from_the_client(start_proxy, tmp_path, pki, installed_bundle,
                                                                  interceptor):
    proxy = start(start_proxy, tmp_path, "alert", local_root="block", env={"SSL_CERT_FILE": str(installed_bundle)})
    code, page = fetch(proxy, interceptor.port, pki, interceptor.tls)
    assert code != 0 and page == b""
    lines = wait_alert_lines(proxy.alert_log, interceptor.port, 1, timeout=5)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("local_root", "block")]


@pytest.mark.parametrize("setup", ["--ca, CA also in the OS store", "--ca only", "CA in the public set",
                                   "--public-roots none"])
def test_anchors_the_operator_names_or_public_roots_are_quiet(start_proxy, tmp_path, pki, installed_bundle,
                                                              interceptor, setup):
    env = {"SSL_CERT_FILE": str(installed_bundle)}
    more = []
    if setup == "--ca, CA also in the OS store":
        more = ["--ca", str(pki / "attacker-root.pem")]
    elif setup == "--ca only":
        more, env = ["--ca", str(pki / "attacker-root.pem")], None
    elif setup == "CA in the public set":
        public = tmp_path / "public"
        public.mkdir()
        (public / "gateway.crt").write_text((pki / "attacker-root.pem").read_text())
        more = ["--public-roots", str(public)]
    else:
        more = ["--public-roots", "none"]
    proxy = start(start_proxy, tmp_path, "block", *more, env=env)
    for _ in range(3):
        code, page = fetch(proxy, interceptor.port, pki, interceptor.tls)
        assert (code, page) == (0, PAGE)   # under block: the verdict passed
    time.sleep(0.5)
    assert read_alert_lines(proxy.alert_log, interceptor.port) == []


@pytest.mark.parametrize("policy", ["file", "built-in"])
def test_the_os_store_is_read_at_start_and_reload_not_at_every_validation(start_proxy, tmp_path, pki, interceptor,
                                                                         policy):
    """The OS store's hashed directory (SSL_CERT_DIR) is read when the trust stores are built, at start and at a reload,
    not looked up at each validation: OpenSSL's default-path lookups went to the filesystem for every issuer not
    loaded (a stat, and a read of the whole directory, per new chain). So a CA linked into the directory while the
    proxy runs counts from the next reload on, as one appended to the bundle always did, and the reload drops the
    verdicts judged against the old store. With the built-in policy (`make run`, no file) too: SIGHUP rereads the
    store (it once did nothing without a file, and a new local root went unseen until a restart)."""
    from helpers import free_port
    import os
    import signal
    certs = tmp_path / "certs"
    certs.mkdir()
    admin = free_port()
    env = {"SSL_CERT_FILE": SYSTEM_BUNDLE, "SSL_CERT_DIR": str(certs)}
    if policy == "file":   # the built-in policy's defaults, written out
        proxy = start(start_proxy, tmp_path, "alert", "--admin", f"127.0.0.1:{admin}", env=env)
    else:
        hosts = tmp_path / "hosts"
        hosts.write_text("127.0.0.1 genuine.test\n")
        proxy = start_proxy("--hosts", str(hosts), "--probe-timeout", "3", "--admin", f"127.0.0.1:{admin}", env=env)

    def reason_of_next_connection(count):
        assert fetch(proxy, interceptor.port, pki, interceptor.tls) == (0, PAGE)
        lines = wait_alert_lines(proxy.alert_log, interceptor.port, count, timeout=5)
        assert len(lines) == count
        return lines[-1]["event"]["reason"]

    assert reason_of_next_connection(1) == "untrusted_chain"   # the gateway's CA is in no store yet
    name = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", str(pki / "attacker-root.pem")],
                          capture_output=True, text=True, check=True).stdout.strip()
    (certs / f"{name}.0").write_text((pki / "attacker-root.pem").read_text())   # as update-ca-certificates links it
    ctl = [BIN, "ctl", "--admin", f"127.0.0.1:{admin}"]
    assert subprocess.run(ctl + ["clear-verdicts"], capture_output=True, timeout=10).returncode == 0
    assert subprocess.run(ctl + ["clear-probes"], capture_output=True, timeout=10).returncode == 0
    assert reason_of_next_connection(2) == "untrusted_chain"   # judged afresh: the directory was not read again
    from admin_helpers import admin_get
    os.kill(proxy.proc.pid, signal.SIGHUP)
    deadline = time.monotonic() + 10   # the reload runs on the control thread: wait for it, not for a fixed time
    while 'chainwatch_policy_reloads_total{result="loaded"} 1' not in admin_get(admin, "/metrics")[1]:
        assert time.monotonic() < deadline, "the reload did not happen"
        time.sleep(0.1)
    # The reload read the store again, and dropped the verdicts judged against the old one (no clear-verdicts here).
    assert reason_of_next_connection(3) == "local_root"


def test_a_named_public_root_set_that_cannot_be_read_stops_the_start(tmp_path):
    r = subprocess.run([BIN, "run", "--listen", "127.0.0.1:1", "--public-roots", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert "--public-roots" in r.stderr and "missing" in r.stderr


def test_the_old_policy_key_is_read_with_a_warning(tmp_path):
    policy = tmp_path / "old.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: alert\n  non_system_anchor: block\nrules: []\n")
    r = subprocess.run([BIN, "policy", "check", str(policy)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "'non_system_anchor' is now 'local_root'" in r.stdout + r.stderr
    explained = subprocess.run([BIN, "policy", "explain", str(policy), "example.com"], capture_output=True, text=True,
                               timeout=10)
    assert "local_root" in explained.stdout and "block" in explained.stdout
