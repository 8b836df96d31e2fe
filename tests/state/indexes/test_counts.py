"""Live jobs per queue and state (eventq/state/indexes/counts.py; docs/architecture.md,
"Metrics and the dashboard")."""

from __future__ import annotations

from eventq.core import State
from eventq.state.indexes import JobIndex
from support.jobs import NOW, job


def test_jobs_by_queue_and_state_follow_every_put_and_removal():
    index = JobIndex()
    leased = [job("a", state=State.LEASED, attempts=1, lease_deadline=NOW + 1000, created=NOW + i)
              for i in range(3)]
    failed = job("a", state=State.FAILED)
    for j in [*leased, failed, job("a"), job("b"), job("ab", state=State.FAILED)]:
        index.put(j, 0, NOW)
    counts = index.state_counts()
    assert counts["a"][State.LEASED] == 3 and counts["a"][State.FAILED] == 1
    assert counts["a"][State.NEW] == 1 and counts["b"][State.NEW] == 1
    # A page of one queue's jobs in a state, oldest first (a name ending another's is
    # not the same queue: "ab" vs "b").
    assert index.jobs_in_state("a", State.LEASED, 0, 2) == [j.id for j in leased[:2]]
    assert index.jobs_in_state("a", State.LEASED, 2, 2) == [leased[2].id]
    assert index.jobs_in_state("b", State.FAILED, 0, 10) == []
    index.put(job("a", state=State.COMPLETED, job_id=leased[0].id, version=2), 0, NOW)
    index.remove(failed.id)
    counts = index.state_counts()
    assert counts["a"][State.LEASED] == 2 and counts["a"][State.COMPLETED] == 1
    assert counts["a"][State.FAILED] == 0
    index.drop_partition(0)
    assert index.state_counts() == {}
