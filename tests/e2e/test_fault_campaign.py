"""A short run of the fault campaign with a fixed seed (bench/faults.py runs many more):
kill -9, SIGSTOP past the session timeout, network cut-offs of eventq processes and
brokers, two at once, under a recorded mixed load; then every check of
tools/faults/checker.py, the live digest and the changelog against a fold of the
command log (tools/faults/campaign.py).

The seed is one whose 45 s plan (``plan_faults``, a function of the seed alone) has
every kind of fault: kill -9 of an eventq process, then of a broker while an eventq
process is paused past its session timeout, a broker cut off from the others and an
eventq process's routes delayed. One run costs the suite's two cores half what the two
runs before it did (seeds 7 and 11, three kinds between them), and it is also the
suite's "kill a process, then a broker, under load" and its paused owner (the stale
owner of docs/fencing.md, "What went wrong without it": its partitions move while it
sleeps, and it wakes believing it owns them), each once, under the load and checks
that the tests of their own had (docs/fencing.md, "The fault campaign").

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
from tools.faults.campaign import SUITE_SECONDS, SUITE_SEED

SEEDS = (SUITE_SEED,)  # every kind of fault (tests/tools/faults/test_campaign_plan.py)
SECONDS = SUITE_SECONDS
RUN_TIMEOUT_S = 900  # one run's bound on a busy machine (a run takes 2-3 minutes)
# Enough load for the checks to mean something: a run beside the suite on 2 cores did 400
# ok operations of 628 (CI 2026-11-27), alone 1,300-5,700 in 45-60 s.
MIN_OK_OPERATIONS = 300
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
    assert report["ok"], report["text"]
    assert report["ok_ops"] > MIN_OK_OPERATIONS, report["text"]


def run_and_report(directory: Path) -> None:
    """Every seed's run, one after the other, each report in seed-<seed>.json."""
    from tools.faults.campaign import run_campaign

    for seed in SEEDS:
        report = asyncio.run(run_campaign(directory / f"seed-{seed}", seed, SECONDS))
        print(report.text(), flush=True)
        (directory / f"seed-{seed}.json").write_text(json.dumps({
            "text": report.text(), "faults": len(report.faults), "ok": report.ok,
            "ok_ops": sum(by.get("ok", 0) for by in report.counts.values()),
        }))


if __name__ == "__main__":  # the process start_beside starts (tests/ on its path)
    run_and_report(Path(sys.argv[1]))
