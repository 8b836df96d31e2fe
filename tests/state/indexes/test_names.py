"""Queue names known without jobs (eventq/state/indexes/names.py): named by leases,
remembered up to a bound (docs/architecture.md, "Hostile inputs")."""

from __future__ import annotations

from eventq.state.indexes import JobIndex
from support.jobs import job


def test_queues_named_by_leases_are_remembered_up_to_a_bound():
    """A lease names its queues into being, but a stream of leases naming new queues
    must not grow the server without bound (docs/architecture.md, "Hostile inputs"):
    only the most recently named empty queues are kept, while queues holding jobs always
    are."""
    from eventq.state.indexes import MAX_EMPTY_QUEUE_NAMES

    index = JobIndex()
    index.put(job(name="busy"), 0, 0)
    for n in range(MAX_EMPTY_QUEUE_NAMES + 500):
        index.name_queue(f"empty-{n:06d}")
    names = index.queue_names()
    assert len(names) == MAX_EMPTY_QUEUE_NAMES + 1 and "busy" in names
    assert not index.known("empty-000000") and index.known(f"empty-{MAX_EMPTY_QUEUE_NAMES + 499:06d}")
    assert index.lengths("busy", 0) == (1, 0) and index.lengths("empty-009999", 0) == (0, 0)
    assert index.ready_page("empty-009999", 0, 0, 10) == []


def test_a_queue_whose_last_ready_job_leaves_is_kept_as_a_name_only():
    index = JobIndex()
    one = job(name="once")
    index.put(one, 0, 0)
    index.remove(one.id)
    assert "once" not in index.queues and index.known("once")
    assert index.queue_names() == ["once"] and index.lengths("once", 0) == (0, 0)
