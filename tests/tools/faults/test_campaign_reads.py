"""The campaign reads back every job it judges: those an op created, and those a lease
handed out that no op created (a recurrence's slot jobs: tools/faults/campaign.py)."""

from __future__ import annotations

from tools.faults.campaign import judged_job_ids
from tools.faults.history import FAIL, OK, Args, Op, Reply


def op(index: int, kind: str, job_id: str | None, outcome: str = OK) -> Op:
    return Op(index, 0, 0, kind, job_id, Args(), float(index), float(index) + 0.1, outcome,
              Reply(job_id=job_id) if kind == "lease" else Reply())


def test_created_jobs_then_leased_ones_once_each():
    ops = [op(0, "add", "a"), op(1, "lease", "a"), op(2, "lease", "slot"),
           op(3, "schedule", "b"), op(4, "lease", "other", FAIL), op(5, "lease", None)]
    assert judged_job_ids(ops) == ["a", "b", "slot"]
