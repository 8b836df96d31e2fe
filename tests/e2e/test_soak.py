"""The soak (bench/soak.py; docs/architecture.md, "Logging"): `make run`'s server under
light mixed load for longer than every timer and stall detector in it (faust's fire at 5
minutes), with no WARNING or ERROR in its log, memory and open files flat, every request
answered and a clean stop.

It runs *beside* the rest of the suite: tests/conftest.py starts it when collection ends
(``start_beside``, tests/support/beside.py: first of the works beside the suite) and moves this
test to the end, where it waits for the soak's outcome.
Run alone, it is the only work beside. ``EVENTQ_SOAK_MINUTES`` sets its length."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from support import beside
from support.beside import Beside

REPO = Path(__file__).resolve().parents[2]
# Past faust's stall detectors and Kafka's retention check, 300 s each (bench/soak.py:
# "6 minutes at least"), with a minute to spare.
SOAK_MINUTES = float(os.environ.get("EVENTQ_SOAK_MINUTES", "7"))
# Start (a broker and the server), the stop and the slowest reply, on a busy machine.
SOAK_OVERHEAD_S = 360

BESIDE_ORDER = 0  # first: alone beside the suite, as its quiet checks need

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.beside,
              pytest.mark.timeout(int(SOAK_MINUTES * 60 + SOAK_OVERHEAD_S + 60))]


def start_beside(directory: Path) -> Beside:
    data = directory / "data"
    return beside.start(directory, [
        str(REPO / "bench" / "soak.py"), "--minutes", str(SOAK_MINUTES),
        "--data-dir", str(data), "--json", str(directory / "soak.json")])


def test_the_server_stays_quiet_flat_and_answering_past_every_timer(request) -> None:
    soak = beside.started(request)
    left_s = SOAK_MINUTES * 60 + SOAK_OVERHEAD_S - (time.monotonic() - soak.began)
    status = soak.wait(left_s)
    report = soak.output_tail()
    figures_path = soak.directory / "soak.json"
    keep_for_reading(soak)
    assert figures_path.exists(), report
    figures = json.loads(figures_path.read_text())
    assert figures["problems"] == [], report
    assert status == 0, report
    # The load was what it says: every kind of request, a few thousand of them.
    assert figures["requests"] >= SOAK_MINUTES * 60 * 5, figures["by_verb"]
    assert {"add", "lease", "complete", "fail", "schedule", "run", "result", "delete",
            "GET /metrics"} <= set(figures["by_verb"])


def keep_for_reading(soak: Beside) -> None:
    """The soak's figures and the server's log, in test-output/soak/ (pytest's temp dirs
    are rotated away by the next runs)."""
    kept = REPO / "test-output" / "soak"
    kept.mkdir(parents=True, exist_ok=True)
    for path in (soak.directory / "soak.json", soak.output,
                 soak.directory / "data" / "eventq-up.log"):
        if path.exists():
            shutil.copyfile(path, kept / ("soak.out" if path == soak.output else path.name))
