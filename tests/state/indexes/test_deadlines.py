"""The jobs' TTR and TTL deadlines (eventq/state/indexes/deadlines.py): given once
for the current version, re-armed, never lost (docs/architecture.md, "Timers")."""

from __future__ import annotations

from eventq.core import (
    State,
)
from eventq.state.indexes import TTL, TTR, JobIndex
from support.jobs import NOW, job


def test_deadlines_fire_once_for_the_current_version_and_can_be_rearmed():
    index = JobIndex()
    leased = job(state=State.LEASED, attempts=2, lease_deadline=NOW + 100, ttl=500, version=5)
    index.put(leased, 3, NOW)
    assert index.due(NOW + 99) == []
    [due] = index.due(NOW + 100)
    assert (due.kind, due.job_id, due.attempt, due.version) == (TTR, leased.id, 2, 5)
    assert index.due(NOW + 100) == []  # popped
    index.rearm(due, NOW + 200)
    assert [d.kind for d in index.due(NOW + 200)] == [TTR]
    # a newer version makes old deadlines stale
    index.put(job(job_id=leased.id, version=6, ttl=500), 3, NOW)
    index.rearm(due, NOW + 300)
    assert [d.kind for d in index.due(NOW + 600)] == [TTL]
