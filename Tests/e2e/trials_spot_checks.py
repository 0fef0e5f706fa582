"""Spot checks at the defaults, many times: how many tunnels and seconds each forger of README's table lasts.

Not part of the suite (pytest collects test_*.py; this file runs only when named), because it is statistics, not a
check: each trial is one proxy start with the default `--spot-check-rate` and `--spot-check-beside`, the pinned rule
under block, the matched (length-equal) attacker chain, a fetch a second, and an interceptor that behaves for 2 s and
then forges by its strategy; it stops at the first line with evidence `spot_check` or after 30 s of forging. One JSON
line per trial goes to $TRIALS_OUT (default trials.jsonl in the working directory).

    CHAINWATCH_BIN=.build/release/chainwatch python3 -m pytest -q -n 2 Tests/e2e/trials_spot_checks.py
"""
import json
import os
import time

import pytest

from helpers import read_alert_lines
from test_spot_checks import ForgeFromNowOn, ForgePairless, ForgeWithoutTwin, interception, steady_traffic
from test_tls13_adversary import closing, hosts_file, pinned_policy  # noqa: F401 (fixtures)

TRIALS = int(os.environ.get("TRIALS", "6"))


@pytest.mark.parametrize("trial", range(TRIALS))
@pytest.mark.parametrize("strategy", ["every", "no_twin_before", "not_in_a_pair"])
def test_trial(start_proxy, tmp_path, pki, closing, strategy, trial):
    forger = {"every": ForgeFromNowOn, "no_twin_before": ForgeWithoutTwin, "not_in_a_pair": ForgePairless}[strategy]()
    policy, icpt = interception(pki, closing, forger)
    p = start_proxy("--policy", str(pinned_policy(tmp_path, pki, "block")), "--hosts", str(hosts_file(tmp_path)),
                    "--ca", str(pki / "matched-root.pem"), "--probe-timeout", "2", "--grace", "1")
    spotted = lambda: any(l["chainwatch"].get("evidence") == "spot_check" for l in read_alert_lines(p.alert_log, icpt.port))
    fetched = steady_traffic(p, icpt.port, policy, forge_after=2.0, seconds=32.0, stop=spotted, every=1.0)
    time.sleep(1.0)
    forging = [t for t, _, f in fetched if f]
    with open(os.environ.get("TRIALS_OUT", "trials.jsonl"), "a") as out:
        out.write(json.dumps({"strategy": strategy, "caught": spotted(), "tunnels_while_forging": len(forging),
                              "forged_pages_passed": sum(1 for _, page, f in fetched if f and page),
                              "seconds": round(fetched[-1][0] - forging[0], 1) if forging else 0}) + "\n")
