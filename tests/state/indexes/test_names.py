"""Queue names known without jobs (eventq/state/indexes/names.py): named by leases,
remembered up to a bound (docs/architecture.md, "Hostile inputs")."""

from __future__ import annotations

from collections import Counter, OrderedDict
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import Job, State
from eventq.state.indexes import JobIndex, names
from support.jobs import NOW, job


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


# --- against a model: a bounded set, least recently named forgotten first -------------

BOUND = 3  # MAX_EMPTY_QUEUE_NAMES for the model test: the bound is reached at once
name_op = st.tuples(st.sampled_from(["name", "add"]), st.integers(0, 5))
job_op = st.tuples(st.sampled_from(["finish", "remove"]), st.integers(0, 20))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(name_op, job_op), max_size=50))
def test_empty_names_are_the_most_recently_named_queues_without_jobs(operations):
    """Named by a lease (``name_queue``), by a job in no list (a final one), or by a
    queue's last listed job leaving: the ``BOUND`` most recently named queues without
    listed jobs are known, and every queue with some always is."""
    index = JobIndex()
    jobs: list[Job] = []  # every job put, live or not
    listed: Counter[str] = Counter()  # ready jobs per queue name
    empty: OrderedDict[str, None] = OrderedDict()

    def remember(name: str) -> None:
        empty[name] = None
        empty.move_to_end(name)
        if len(empty) > BOUND:
            empty.popitem(last=False)

    with patch.object(names, "MAX_EMPTY_QUEUE_NAMES", BOUND):
        for op, n in operations:
            if op == "name":
                index.name_queue(f"q{n}")
                if not listed[f"q{n}"]:
                    remember(f"q{n}")
            elif op == "add":
                jobs.append(job(name=f"q{n}"))
                index.put(jobs[-1], 0, NOW)
                listed[f"q{n}"] += 1
                empty.pop(f"q{n}", None)
            elif n < len(jobs) and index.entry(jobs[n].id) is not None:
                one = jobs[n]
                was_listed = index.entry(one.id).state is State.NEW
                listed[one.name] -= was_listed
                if op == "finish":  # a final job is in no list: it names its queue
                    jobs[n] = job(name=one.name, job_id=one.id, state=State.COMPLETED,
                                  version=one.version + 1)
                    index.put(jobs[n], 0, NOW)
                else:
                    index.remove(one.id)
                if not listed[one.name] and (was_listed or op == "finish"):
                    remember(one.name)
            holding = {name for name, count in listed.items() if count}
            assert index.queue_names() == sorted(holding | set(empty))
            assert all(index.known(f"q{m}") == (f"q{m}" in holding or f"q{m}" in empty)
                       for m in range(6))
            assert not holding & set(index.empty_names)
