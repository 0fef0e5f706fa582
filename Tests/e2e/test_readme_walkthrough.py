"""The README's two-minute walk-through, run as written: its shell block is taken from README.md and run with bash
(only the binary directory, the ports and the scratch directory are changed), so the README cannot drift from what
the proxy does. It must show the genuine page over TLS 1.2, then a TLS 1.3 interception blocked from probe
evidence, then the 403 for the known-bad upstream."""
import json
import os
import re
import time

from conftest import BIN, ROOT
from helpers import ecs_problems, free_port, run_script


def walkthrough_block():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Two-minute walk-through"):]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def test_readme_walkthrough_blocks_a_tls13_interception(tmp_path):
    script = walkthrough_block()
    proxy_port, server_port = free_port(), free_port()
    script = (script.replace("B=.build/release", f"B={os.path.dirname(BIN)}")
                    .replace("P=/tmp/cw", f"P={tmp_path}/cw")
                    .replace("3128", str(proxy_port)).replace("8443", str(server_port)))
    assert "--listen" not in script   # the proxy's default listen address is what the README relies on
    script = script.replace("$B/chainwatch run ", f"$B/chainwatch run --listen 127.0.0.1:{proxy_port} ")
    _, out = run_script(script, ROOT, timeout=90)
    assert "<HTML>" in out, f"no genuine page through the proxy:\n{out[-3000:]}"
    assert "% Total" not in out, "a curl without -s drew its progress meter"
    # What `tail -f` printed as the line was written (before the 403's curl: issue 27, it printed nothing).
    # tail -f writes each line whole, but curl's message on the same terminal can be split around it ("…SSL_ER{line}
    # ROR_SYSCALL…", seen in CI): a line is read from where it begins to the end of its line.
    shown = [json.loads(l[l.index('{"@timestamp"'):]) for l in out.splitlines() if '{"@timestamp"' in l]
    assert [(l["event"]["reason"], l["chainwatch"]["evidence"]) for l in shown] == [("root_mismatch", "probe")], out[-3000:]
    assert out.index('{"@timestamp"') < out.index("response 403"), "the line was not shown when it was written"
    assert shown[0]["chainwatch"]["known_bad"]["clear"] == f"chainwatch ctl clear-known-bad genuine.test:{server_port}"
    assert "curl: (35)" in out, f"the intercepted handshake was not cut:\n{out[-3000:]}"
    assert "response 403" in out, f"no 403 for the known-bad upstream:\n{out[-3000:]}"
    # The proxy writes its lines before it exits (`wait $PROXY`).
    log = tmp_path / "cw" / "alerts.jsonl"
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    assert [ecs_problems(l) for l in lines] == [[]] * len(lines), lines
    first = lines[0]
    assert first["event"]["action"] == "block" and first["event"]["reason"] == "root_mismatch", first
    assert first["tls"]["version"] == "1.3" and first["chainwatch"]["evidence"] == "probe", first
    # The 403 is no finding of its own: the block line says the upstream is marked, until when, and how to clear it.
    assert len(lines) == 1 and first["chainwatch"]["known_bad"]["clear"].startswith("chainwatch ctl clear-known-bad genuine.test:"), lines
