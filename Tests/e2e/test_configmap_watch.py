"""--watch with a policy mounted from a Kubernetes ConfigMap: the kubelet's exact layout, `policy.yaml -> ..data/
policy.yaml`, `..data -> ..<timestamp>/`, updated by writing a new timestamped directory, pointing `..data_tmp` at
it and renaming `..data_tmp` over `..data` (one atomic rename), then removing the old directory. The file a reader
opens changes without any path it names being written."""
import os
import shutil
import time

from admin_helpers import admin_get_json
from helpers import free_port


def write_version(mount, name, text):
    directory = mount / name
    directory.mkdir()
    (directory / "policy.yaml").write_text(text)
    return directory


def swap(mount, new_dir):
    os.symlink(new_dir.name, mount / "..data_tmp")
    os.rename(mount / "..data_tmp", mount / "..data")


POLICY = "version: 1\ndefaults:\n  action: alert\nrules:\n  - name: {name}\n    match: [{name}.test]\n"


def test_a_configmap_update_is_reloaded(start_proxy, tmp_path):
    mount = tmp_path / "config"
    mount.mkdir()
    first = write_version(mount, "..2026_11_23_10_00_00.000000001", POLICY.format(name="first"))
    os.symlink(first.name, mount / "..data")
    os.symlink("..data/policy.yaml", mount / "policy.yaml")
    admin = free_port()
    p = start_proxy("--policy", str(mount / "policy.yaml"), "--watch", "--admin", f"127.0.0.1:{admin}")
    assert admin_get_json(admin, "/state")["policy"]["rules"] == ["first"]
    time.sleep(1.2)   # the watch looks once a second
    second = write_version(mount, "..2026_11_23_10_05_00.000000002", POLICY.format(name="second"))
    # The same size and modification time as the first: only the inode tells them apart.
    os.utime(second / "policy.yaml", ns=(os.stat(first / "policy.yaml").st_atime_ns, os.stat(first / "policy.yaml").st_mtime_ns))
    swap(mount, second)
    shutil.rmtree(first)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        state = admin_get_json(admin, "/state")["policy"]
        if state["rules"] == ["second"]:
            break
        time.sleep(0.1)
    assert state["rules"] == ["second"] and state["generation"] == 2, state
    assert "reloaded" in p.output()
