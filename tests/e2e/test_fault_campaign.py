"""Two short runs of the fault campaign with fixed seeds (bench/faults.py runs many
more): each has a kill -9 of an eventq process, a pause (one shorter than the session
timeout but longer than the load's TTR, one past the session timeout) and a cut (the
load's clients cut from a gateway; two processes cut apart, their forwarding), under a
recorded mixed load; then every check of tools/faults/checker.py, the live digest and
the changelog against a fold of the command log (tools/faults/campaign.py).

The test asserts that each fault TOOK EFFECT, not only that it was planned: the
evidence tools/faults/actions.py records (the killed pid gone and a new start whose log
says it started, the paused process in state T, the proxy holding or resetting the cut
routes). A run whose fault had no effect would prove nothing (docs/fencing.md, "The
fault campaign").

Each run draws from three kinds only (``SUITE_RUNS``, tools/faults/campaign.py) so a
30 s plan holds all three; tests/tools/faults/test_campaign_plan.py checks the plans.

It runs *beside* the rest of the suite in a process of its own (``start_beside``,
tests/support/beside.py); the test waits for the run's report. Run alone, it is the
only work beside."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from support import beside
from support.beside import Beside
from tools.faults.campaign import SUITE_RUNS, SUITE_SECONDS

SEEDS = tuple(seed for seed, _ in SUITE_RUNS)
KINDS = dict(SUITE_RUNS)
SECONDS = SUITE_SECONDS
RUN_TIMEOUT_S = 600  # one run's bound on a busy machine (alone, a run takes ~100 s)
# Enough load for the checks to mean something: a 30 s run alone did 1,121 ok operations
# of 1,846; beside the suite on 2 cores a third of that.
MIN_OK_OPERATIONS = 200
KILLS = ("kill-process",)
PAUSES = ("pause-process", "pause-short")
CUTS = ("cut-clients", "cut-peers")
BESIDE_ORDER = 1  # after the soak (tests/support/beside.py)

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.beside,
              pytest.mark.timeout(RUN_TIMEOUT_S * len(SEEDS) + 60)]


def start_beside(directory: Path) -> Beside:
    return beside.start(directory, [__file__, str(directory)])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_fault_campaign_run_breaks_no_rule(seed, request):
    runs = beside.started(request)
    report_path = runs.directory / f"seed-{seed}.json"
    while not report_path.exists() and runs.process.poll() is None:
        runs.wait_a_little()
    assert report_path.exists(), f"no report of seed {seed}:\n{runs.output_tail()}"
    report = json.loads(report_path.read_text())
    print(report["text"])
    assert report["faults"], "the plan had no fault"
    effects = report["effects"]
    assert len(effects) == report["faults"], report["text"]  # each was done
    assert all(e["took_effect"] for e in effects), report["text"]
    for kinds in (KILLS, PAUSES, CUTS):  # a kill, a pause and a cut, each seen
        assert any(e["kind"] in kinds and e["took_effect"] for e in effects), report["text"]
    kills = [e for e in effects if e["kind"] in KILLS]
    assert all(any("gone after kill -9" in x for x in e["evidence"])
               and any("says it started" in x for x in e["evidence"]) for e in kills)
    assert report["ok"], report["text"]
    assert report["ok_ops"] > MIN_OK_OPERATIONS, report["text"]


def run_and_report(directory: Path) -> None:
    """Every seed's run, one after the other, each report in seed-<seed>.json."""
    from tools.faults.campaign import run_campaign

    for seed in SEEDS:
        report = asyncio.run(run_campaign(directory / f"seed-{seed}", seed, SECONDS,
                                          kinds=KINDS[seed]))
        print(report.text(), flush=True)
        (directory / f"seed-{seed}.json").write_text(json.dumps({
            "text": report.text(), "faults": len(report.faults), "ok": report.ok,
            "ok_ops": sum(by.get("ok", 0) for by in report.counts.values()),
            "effects": report.effects,
        }))


if __name__ == "__main__":  # the process start_beside starts (tests/ on its path)
    run_and_report(Path(sys.argv[1]))
