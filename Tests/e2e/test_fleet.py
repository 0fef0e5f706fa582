"""deploy/kubernetes, deploy/prometheus, deploy/grafana: the manifests pass the Kubernetes schema (kubernetes-validate,
strict, offline); the Deployment's arguments start a real proxy (with loopback addresses for the test) on the
ConfigMap's policy; every metric the dashboard queries is one /metrics exports."""
import json
import re
import subprocess
import time

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from admin_helpers import admin_get
from conftest import BIN, ROOT
from helpers import free_port

KUBE = ROOT / "deploy/kubernetes"
MANIFESTS = ["configmap.yaml", "deployment.yaml", "service.yaml", "pdb.yaml", "hpa.yaml"]


def validate(*paths):
    return subprocess.run(["python3", "-m", "kubernetes_validate", "--strict", *map(str, paths)], capture_output=True, text=True)


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_passes_the_kubernetes_schema(name):
    r = validate(KUBE / name)
    assert r.returncode == 0 and "passed" in r.stdout, r.stdout + r.stderr


def test_the_validator_rejects_a_wrong_manifest(tmp_path):
    """The check itself: a misspelt field fails strict validation."""
    bad = tmp_path / "bad.yaml"
    bad.write_text((KUBE / "deployment.yaml").read_text().replace("readOnlyRootFilesystem", "readOnlyRootFileSystem"))
    assert validate(bad).returncode != 0


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(MANIFESTS)


def test_the_deployment_is_hardened_and_probed():
    pod = yaml.safe_load((KUBE / "deployment.yaml").read_text())["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["readOnlyRootFilesystem"]
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "--alert-log=-" in container["args"]


def test_the_deployments_arguments_run_a_proxy_on_the_configmaps_policy(tmp_path):
    """The same flags, with the listeners moved to loopback (tests bind nothing else) and the policy from the
    ConfigMap written where the volume would put it."""
    config = yaml.safe_load((KUBE / "configmap.yaml").read_text())
    policy = tmp_path / "policy.yaml"
    policy.write_text(config["data"]["policy.yaml"])
    args = yaml.safe_load((KUBE / "deployment.yaml").read_text())["spec"]["template"]["spec"]["containers"][0]["args"]
    port, admin = free_port(), free_port()
    args = [a.replace("0.0.0.0:3128", f"127.0.0.1:{port}").replace("0.0.0.0:9128", f"127.0.0.1:{admin}")
             .replace("/etc/chainwatch/policy.yaml", str(policy)) for a in args] + ["--allow-client=127.0.0.0/8"]
    proc = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if admin_get(admin, "/readyz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert admin_get(admin, "/readyz") == (200, "ready\n")
        assert json_state(admin)["policy"]["source"] == str(policy)
    finally:
        proc.terminate()
        proc.wait(15)


def json_state(admin):
    status, text = admin_get(admin, "/state")
    assert status == 200
    return json.loads(text)


def test_every_dashboard_query_names_an_exported_metric(start_proxy):
    admin = free_port()
    start_proxy("--admin", f"127.0.0.1:{admin}")
    status, text = admin_get(admin, "/metrics")
    assert status == 200
    families = list(text_string_to_metric_families(text))
    # A labelled family with no sample yet (no verdict so far) is still declared; the parser drops `_total`.
    exported = {s.name for f in families for s in f.samples} | {f.name for f in families} | {f.name + "_total" for f in families}
    dashboard = json.loads((ROOT / "deploy/grafana/chainwatch-dashboard.json").read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(queries) >= 15
    named = {name for q in queries for name in re.findall(r"\b((?:chainwatch|process)_[a-z0-9_]+)", q)}
    assert named, "no metric names found"
    assert named <= exported, f"not exported: {sorted(named - exported)}"
    for q in queries:   # label names used in the queries exist on those metrics
        for labels in re.findall(r"by \(([^)]*)\)", q):
            for label in (l.strip() for l in labels.split(",")):
                assert label in {"pod", "le", "loop", "action", "reason", "evidence", "outcome", "status", "path",
                                 "cache", "result", "sha256"}, label


def test_the_prometheus_configuration_scrapes_the_pods_admin_port_which_the_service_does_not_publish():
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["kubernetes_sd_configs"] == [{"role": "pod"}]
    keep = [r for r in job["relabel_configs"] if r.get("action") == "keep"][0]
    pod = yaml.safe_load((KUBE / "deployment.yaml").read_text())["spec"]["template"]
    assert keep["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_name", "__meta_kubernetes_pod_container_port_name"]
    assert keep["regex"] == f"{pod['metadata']['labels']['app.kubernetes.io/name']};admin"
    assert "admin" in [p["name"] for p in pod["spec"]["containers"][0]["ports"]]
    service = yaml.safe_load((KUBE / "service.yaml").read_text())
    assert [p["name"] for p in service["spec"]["ports"]] == ["proxy"]


def test_the_pods_connection_cap_fits_its_memory_limit():
    """About 0.7 MiB per tunnel held under block (bench: a hostile server's held bytes), plus the process."""
    container = yaml.safe_load((KUBE / "deployment.yaml").read_text())["spec"]["template"]["spec"]["containers"][0]
    cap = int(next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--max-connections=")))
    limit = container["resources"]["limits"]["memory"]
    mib = int(limit[:-2]) * (1024 if limit.endswith("Gi") else 1)
    assert cap * 0.7 + 64 <= mib, (cap, limit)
    # Held bytes for all tunnels together (--held-memory, MiB): a fully held tunnel holds 256 KiB for about 0.7 MiB.
    held = int(next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--held-memory=")))
    assert held * 0.7 / 0.25 + 64 <= mib, (held, limit)


def test_both_prometheus_configurations_load_in_promtool(tmp_path):
    """Issue 27: the Kubernetes file alone was rejected by Debian's Prometheus 2.42, and there was none for one host.
    Debian builds Prometheus without Kubernetes service discovery, so its promtool checks the Kubernetes file with
    that one block replaced by a static target: everything else (the job, the relabelling and its regexes) is its."""
    import shutil
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing (make test-deps installs prometheus)"
    single = ROOT / "deploy/prometheus/single-host.yml"
    r = subprocess.run([promtool, "check", "config", str(single)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    config = yaml.safe_load(single.read_text())
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9128"]   # run's --admin default
    kube = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    for job in kube["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs") == [{"role": "pod"}]
        job["static_configs"] = [{"targets": ["pod.invalid:9128"]}]
    checked = tmp_path / "prometheus-kubernetes-as-static.yml"
    checked.write_text(yaml.safe_dump(kube))
    r = subprocess.run([promtool, "check", "config", str(checked)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
