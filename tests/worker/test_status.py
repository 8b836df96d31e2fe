"""The worker's tally and the status line it draws (eventq/worker/status.py)."""

from __future__ import annotations

from eventq.worker.status import Tally


def test_the_tally_counts_and_draws_one_line():
    tally = Tally()
    for at, outcome in enumerate(["completed", "completed", "failed", "lost"]):
        tally.finished(outcome, 100.0 + at)
    tally.running = 2
    assert tally.line(104.0, 94.0) == "2 done, 1 failed, 2 running, 0.4 jobs/s, 1 lost"
    assert tally.rate(200.0, 0.0) == 0.0  # nothing in the last 10 s
    assert tally.line(200.0, 0.0, stopping=True).endswith("(stopping: waiting for running jobs)")
