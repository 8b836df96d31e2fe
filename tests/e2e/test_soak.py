"""The soak (bench/soak.py; docs/architecture.md, "Logging"): `make run`'s server under
light mixed load for longer than every timer and stall detector in it (faust's fire at 5
minutes), with no WARNING or ERROR in its log, memory and open files flat, every request
answered and a clean stop.

It runs *beside* the rest of the suite: tests/conftest.py starts it when collection ends
(``start_soak``) and moves this test to the end, where it waits for the soak's outcome.
Run alone it starts the soak itself. ``EVENTQ_SOAK_MINUTES`` sets its length."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from eventq import die_with_parent

REPO = Path(__file__).resolve().parents[2]
SOAK_MINUTES = float(os.environ.get("EVENTQ_SOAK_MINUTES", "10"))
# Start (a broker and the server), the stop and the slowest reply, on a busy machine.
SOAK_OVERHEAD_S = 360

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.beside,
              pytest.mark.timeout(int(SOAK_MINUTES * 60 + SOAK_OVERHEAD_S + 60))]


@dataclass
class Soak:
    process: subprocess.Popen
    figures: Path
    output: Path
    began: float


def start_soak(directory: Path) -> Soak:
    directory.mkdir(parents=True, exist_ok=True)
    figures, output = directory / "soak.json", directory / "soak.out"
    with open(output, "w") as out:
        # Ends with the suite, however it ends.
        process = subprocess.Popen(
            die_with_parent.command(os.getpid(), [
                sys.executable, str(REPO / "bench" / "soak.py"), "--minutes", str(SOAK_MINUTES),
                "--data-dir", str(directory / "data"), "--json", str(figures)]),
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    return Soak(process, figures, output, time.monotonic())


def test_the_server_stays_quiet_flat_and_answering_past_every_timer(request, tmp_path) -> None:
    soak = request.config.stash.get(SOAK_KEY, None) or start_soak(tmp_path / "soak")
    left_s = SOAK_MINUTES * 60 + SOAK_OVERHEAD_S - (time.monotonic() - soak.began)
    try:
        status = soak.process.wait(timeout=max(left_s, 60))
    except subprocess.TimeoutExpired:
        soak.process.kill()
        raise AssertionError("the soak did not end:\n" + soak.output.read_text()[-4000:])
    report = soak.output.read_text()
    keep_for_reading(soak)
    assert soak.figures.exists(), report[-4000:]
    figures = json.loads(soak.figures.read_text())
    assert figures["problems"] == [], report[-4000:]
    assert status == 0, report[-4000:]
    # The load was what it says: every kind of request, a few thousand of them.
    assert figures["requests"] >= SOAK_MINUTES * 60 * 5, figures["by_verb"]
    assert {"add", "lease", "complete", "fail", "schedule", "run", "result", "delete",
            "GET /metrics"} <= set(figures["by_verb"])


def keep_for_reading(soak: Soak) -> None:
    """The soak's figures and the server's log, in test-output/soak/ (pytest's temp dirs
    are rotated away by the next runs)."""
    kept = REPO / "test-output" / "soak"
    kept.mkdir(parents=True, exist_ok=True)
    for path in (soak.figures, soak.output, soak.figures.parent / "data" / "eventq-up.log"):
        if path.exists():
            shutil.copyfile(path, kept / path.name)


SOAK_KEY = pytest.StashKey[Soak]()
