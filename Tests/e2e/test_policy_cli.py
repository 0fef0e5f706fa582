"""`chainwatch policy check` and `chainwatch policy explain`, end to end: the release binary on the shipped policies,
the broken fixtures the unit tests use, and files that are not there."""
import pathlib
import re
import subprocess

import pytest

from conftest import BIN, ROOT

POLICIES = ROOT / "policies"
BROKEN = ROOT / "Tests/ChainwatchPolicyFileTests/Fixtures/broken"
SHIPPED = [POLICIES / "default.yaml", *sorted((POLICIES / "examples").glob("*.yaml"))]


def chainwatch(*args, cwd=ROOT):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=30, cwd=cwd)


# file → (exit status, [(line, column, severity, a piece of the message)]), as PolicyDiagnosticsTests expects them.
BROKEN_EXPECTED = {
    "unknown-key.yaml": (1, [(7, 5, "error", "unknown key 'acton' in a rule (hint: did you mean 'action'?)")]),
    "fingerprint-length.yaml": (1, [(10, 13, "error", "is 20 bytes; SHA-256 has 32 (that is a SHA-1 fingerprint)")]),
    "fingerprint-encoding.yaml": (1, [(9, 16, "error", "is not valid base64 after sha256/"),
                                      (9, 38, "error", "is in no known form")]),
    "unreadable-pem.yaml": (1, [(7, 23, "error", "cannot read anchor file '../pem/missing.pem'")]),
    "non-ca-pem.yaml": (1, [(7, 15, "error", "is not a CA certificate")]),
    "bad-pem.yaml": (1, [(8, 9, "error", "is not valid base64"), (9, 9, "error", "no PEM certificate"),
                         (10, 9, "error", "cannot read anchor file 'sytem' (hint: did you mean 'system'?)")]),
    "empty-pin-set.yaml": (1, [(7, 11, "error", "empty pin set: `pins` names no"),
                               (12, 9, "error", "empty pin set: `root` has no pin")]),
    "shadowed-rule.yaml": (1, [(9, 9, "error", "'api.example.com' is shadowed: rule 'first' (line 6) matches it first"),
                               (10, 9, "error", "'.example.org' is shadowed")]),
    "unquoted-wildcard.yaml": (1, [(6, 14, "error", "YAML:")]),
    "bad-values.yaml": (1, [(6, 30, "error", "a wildcard may only be the whole left-most label"),
                            (6, 48, "error", "bad port '99999'"),
                            (7, 13, "error", "unknown action 'blok'"),
                            (8, 15, "error", "must be true or false"),
                            (9, 14, "error", "unknown profile 'atz'")]),
    "pins-in-defaults.yaml": (1, [(3, 3, "error", "`pins` is not allowed in `defaults`")]),
    "broken-minimum-hash.yaml": (1, [(3, 44, "error", "'md5' is broken and cannot be a minimum")]),
    "duplicate-key.yaml": (1, [(7, 5, "error", "duplicate key 'name' in one mapping")]),
    "url-as-host.yaml": (1, [(5, 13, "error", "'https://api.example.com/v1' is a URL, not a host pattern")]),
    # Warnings only: the file loads, so `check` passes unless --strict.
    "no-backup-pin.yaml": (0, [(10, 9, "warning", "no backup pin: the root pin set")]),
    "expired-pins.yaml": (0, [(8, 16, "warning", "expired on 2020-01-01")]),
    "duplicate-pin.yaml": (0, [(10, 9, "warning", "no backup pin: the root pin set"), (10, 69, "warning", "duplicate pin")]),
    "no-defaults-hostname-off.yaml": (0, [(1, 1, "warning", "no `defaults`"),
                                          (4, 15, "warning", "turns the hostname check off")]),
}


def diagnostic_lines(text):
    return [line for line in text.splitlines() if re.match(r"^.+:\d+:\d+: (error|warning): ", line)]


# --- check ---------------------------------------------------------------------------------------------------------

def test_shipped_policies_include_the_readme_example():
    names = {p.name for p in SHIPPED}
    assert {"default.yaml", "annotated.yaml", "three-level.yaml", "self-signed-own-ca.yaml"} <= names
    assert len(SHIPPED) == 8


@pytest.mark.parametrize("policy", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_policy_passes_check(policy):
    r = chainwatch("policy", "check", "--strict", policy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert diagnostic_lines(r.stdout + r.stderr) == []
    assert r.stdout.strip() == "1 file checked: 0 errors, 0 warnings"
    assert r.stderr == ""


def test_all_shipped_policies_in_one_run():
    r = chainwatch("policy", "check", *SHIPPED)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"{len(SHIPPED)} files checked: 0 errors, 0 warnings"


def test_every_broken_fixture_has_an_expectation():
    assert sorted(p.name for p in BROKEN.glob("*.yaml")) == sorted(BROKEN_EXPECTED)


@pytest.mark.parametrize("name", sorted(BROKEN_EXPECTED))
def test_broken_fixture_reports_file_line_column(name):
    status, expected = BROKEN_EXPECTED[name]
    path = BROKEN / name
    r = chainwatch("policy", "check", path)
    assert r.returncode == status, r.stdout + r.stderr
    got = diagnostic_lines(r.stdout)
    assert len(got) == len(expected), got
    for line, (ln, col, severity, text) in zip(got, expected):
        assert line.startswith(f"{path}:{ln}:{col}: {severity}: "), line
        assert text in line, line
    errors = sum(1 for e in expected if e[2] == "error")
    warnings = len(expected) - errors
    summary = r.stdout.strip().splitlines()[-1]
    assert summary == f"1 file checked: {errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    assert r.stderr == ""


@pytest.mark.parametrize("name", [n for n, (status, _) in sorted(BROKEN_EXPECTED.items()) if status == 0])
def test_strict_makes_warnings_fail(name):
    r = chainwatch("policy", "check", "--strict", BROKEN / name)
    assert r.returncode == 1, r.stdout
    assert r.stdout.strip().endswith("(--strict: warnings fail)")


def test_relative_paths_are_printed_as_given():
    r = chainwatch("policy", "check", "unknown-key.yaml", cwd=BROKEN)
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == ("unknown-key.yaml:7:5: error: unknown key 'acton' in a rule "
                                        "(hint: did you mean 'action'?)")


def test_one_bad_file_among_good_ones_fails_the_run():
    r = chainwatch("policy", "check", POLICIES / "default.yaml", BROKEN / "unknown-key.yaml", BROKEN / "no-backup-pin.yaml")
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1] == "3 files checked: 1 error, 1 warning"


def test_check_missing_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope.yaml"
    r = chainwatch("policy", "check", missing)
    assert r.returncode == 1
    assert r.stderr.strip() == f"{missing}: cannot read policy file: no such file"
    assert r.stdout.strip() == "1 file checked: 0 errors, 0 warnings, 1 unreadable"


def test_check_directory_is_a_clear_error(tmp_path):
    r = chainwatch("policy", "check", tmp_path, POLICIES / "default.yaml")
    assert r.returncode == 1
    assert f"{tmp_path}: cannot read policy file: it is a directory" in r.stderr


def test_check_without_files_is_a_usage_error():
    r = chainwatch("policy", "check")
    assert r.returncode == 64
    assert "Missing expected argument '<file> ...'" in r.stderr and r.stdout == ""


def test_check_help_describes_output_and_exit_status():
    r = chainwatch("policy", "check", "--help")
    assert r.returncode == 0
    for text in ["FILE:LINE:COL: error: MESSAGE", "--strict", "Exit status: 0", "USAGE: chainwatch policy check <file> ..."]:
        assert text in r.stdout, text


# --- explain -------------------------------------------------------------------------------------------------------

def test_explain_names_the_matching_rule():
    policy = POLICIES / "examples/three-level.yaml"
    r = chainwatch("policy", "explain", policy, "WWW.Shop.Example.com")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Policy: {policy}"
    assert lines[1].startswith(f"www.shop.example.com:443 → rule 'shop' ({policy}:10), matched by wildcard *.shop.example.com")
    assert "Action on a failed check: block" in r.stdout
    for code in ["untrusted_chain", "hostname_mismatch", "root_mismatch", "intermediate_mismatch", "leaf_subject_mismatch",
                 "sni_mismatch", "probe_failed", "not_tls"]:
        assert code in r.stdout, code
    assert r.stderr == ""


def test_explain_unmatched_host_gets_the_defaults():
    r = chainwatch("policy", "explain", POLICIES / "examples/three-level.yaml", "example.net")
    assert r.returncode == 0
    assert r.stdout.splitlines()[1] == "example.net:443 → no rule matches: the defaults apply."
    assert "Action on a failed check: alert" in r.stdout


def test_explain_port_selects_a_port_specific_rule():
    policy = POLICIES / "examples/self-signed-own-ca.yaml"
    on_port = chainwatch("policy", "explain", policy, "git.internal.example.com:8443")
    assert "→ rule 'internal-git'" in on_port.stdout and "the CA in ca/example-private-ca.pem" in on_port.stdout
    other = chainwatch("policy", "explain", policy, "git.internal.example.com")
    assert "git.internal.example.com:443 → no rule matches: the defaults apply." in other.stdout


def test_explain_readme_example():
    r = chainwatch("policy", "explain", POLICIES / "examples/annotated.yaml", "eu.pay.example.com")
    assert r.returncode == 0
    assert "→ rule 'payments'" in r.stdout
    for text in ["profile ats", "if the probe fails → block", "Bytes that are not TLS → block", "(https_only)"]:
        assert text in r.stdout, text


@pytest.mark.parametrize("args", [["example.com"], ["--builtin", "example.com"]], ids=["no-file", "builtin"])
def test_explain_builtin_default(args):
    r = chainwatch("policy", "explain", *args)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Policy: the built-in default")
    assert lines[1] == "example.com:443 → no rule matches: the defaults apply."
    assert "system root store" in r.stdout and "Action on a failed check: alert" in r.stdout


def test_explain_ipv6_target():
    r = chainwatch("policy", "explain", "--builtin", "[2001:db8::1]:8443")
    assert r.returncode == 0
    assert r.stdout.splitlines()[1] == "2001:db8::1:8443 → no rule matches: the defaults apply."


def test_explain_missing_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope.yaml"
    r = chainwatch("policy", "explain", missing, "example.com")
    assert r.returncode == 1
    assert r.stderr.strip() == f"{missing}: cannot read policy file: no such file"
    assert r.stdout == ""


def test_explain_refuses_a_policy_with_errors():
    path = BROKEN / "unknown-key.yaml"
    r = chainwatch("policy", "explain", path, "api.example.com")
    assert r.returncode == 1
    assert r.stdout == ""
    assert f"{path}:7:5: error: unknown key 'acton'" in r.stderr
    assert "not explained: the policy has 1 error(s)" in r.stderr


def test_explain_prints_warnings_on_stderr_and_still_explains():
    path = BROKEN / "no-backup-pin.yaml"
    r = chainwatch("policy", "explain", path, "api.example.com")
    assert r.returncode == 0
    assert f"{path}:10:9: warning: no backup pin" in r.stderr
    assert "→ rule 'api'" in r.stdout


@pytest.mark.parametrize("args,message", [
    ([], "name a host"),
    (["*.example.com"], "is a pattern"),
    (["policy.yaml"], "looks like a policy file"),
    (["--builtin", "p.yaml", "example.com"], "--builtin explains the built-in default"),
    (["example.com:99999"], "is not HOST[:PORT]"),
    (["a.yaml", "b.example", "c.example"], "too many arguments"),
])
def test_explain_usage_errors(args, message):
    r = chainwatch("policy", "explain", *args)
    assert r.returncode == 64
    assert message in r.stderr and r.stdout == ""


# --- README -------------------------------------------------------------------------------------------------------

def test_readme_example_is_the_annotated_policy():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Policies", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block == (POLICIES / "examples/annotated.yaml").read_text()
