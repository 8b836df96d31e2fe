"""Paused queues as each owned partition says (eventq/state/indexes/paused.py)."""

from __future__ import annotations

from eventq.state.indexes import JobIndex
from support.jobs import NOW, job


def test_a_paused_queue_offers_no_job_while_any_owned_partition_says_so():
    index = JobIndex()
    held, free = job(name="held"), job(name="free")
    index.put(held, 0, NOW)
    index.put(free, 1, NOW)
    index.set_paused(0, "held", True)
    index.set_paused(1, "held", True)
    assert list(index.ready_candidates(["held", "free"], NOW, set())) == [free.id]
    assert index.ready_heads(["held"], NOW, set()) == {}
    assert index.lengths("held", NOW) == (1, 0)  # still counted, just not handed out
    index.set_paused(0, "held", False)  # partition 1 has not applied its resume yet
    assert index.is_paused("held")
    index.drop_partition(1)  # ... and moved away: its view goes with it
    assert not index.is_paused("held")
    assert list(index.ready_candidates(["held"], NOW, set())) == [held.id]


def test_pause_names_the_queue_and_rebuild_restores_it():
    index = JobIndex()
    index.set_paused(3, "quiet", True)
    assert index.known("quiet") and index.is_paused("quiet")
    other = JobIndex()
    other.rebuild(3, [], NOW, paused=["quiet"])
    assert other.is_paused("quiet") and other.known("quiet")
    other.rebuild(3, [], NOW, paused=[])
    assert not other.is_paused("quiet")
