"""Two short runs of the fault campaign with fixed seeds (bench/faults.py runs many
more): kill -9, SIGSTOP past the session timeout, network cut-offs of eventq processes
and brokers, sometimes two at once, under a recorded mixed load; then every check of
tests/faults/checker.py, the live digest and the changelog against a fold of the
command log (tests/faults/campaign.py)."""

from __future__ import annotations

import asyncio

import pytest
from faults.campaign import run_campaign

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

SECONDS = 45.0


@pytest.mark.parametrize("seed", [7, 11])
def test_a_fault_campaign_run_breaks_no_rule(seed, tmp_path):
    report = asyncio.run(run_campaign(tmp_path, seed, SECONDS))
    print(report.text())
    assert report.faults, "the plan had no fault"
    assert report.ok, report.text()
    assert sum(by.get("ok", 0) for by in report.counts.values()) > 500
