"""The queues (eventq/state/indexes/queues.py): ready jobs in lease order, scheduled
wake-ups, WAITING jobs (docs/workflows.md, "Dependencies"), the lease's choice among
names."""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import (
    Accepted,
    Add,
    Added,
    Job,
    State,
    Upstream,
    UpstreamOutcome,
    apply,
    encode_state,
    lease_order_key,
)
from eventq.core.slim import project_state
from eventq.state.indexes import JobIndex
from support.jobs import NOW, job


def test_ready_jobs_come_out_in_lease_order():
    index = JobIndex()
    jobs = [
        job(priority=0, created=NOW + 2), job(priority=5, created=NOW + 9),
        job(priority=0, created=NOW + 1), job(priority=-1, created=NOW),
        job(priority=0, created=NOW + 3, scheduled=NOW - 5),
    ]
    for j in jobs:
        index.put(j, 0, NOW)
    expected = [j.id for j in sorted(jobs, key=lease_order_key)]
    assert index.ready_page("q", NOW, 0, 100) == expected
    assert index.ready_page("q", NOW, 1, 2) == expected[1:3]
    assert list(index.ready_candidates(["q"], NOW, set()))[:1] == expected[:1]


def test_scheduled_jobs_wait_until_due_and_keep_their_order():
    index = JobIndex()
    later = job(scheduled=NOW + 1000)
    index.put(later, 0, NOW)
    assert index.lengths("q", NOW) == (0, 1)
    assert index.scheduled_page("q", NOW, 0, 10) == [later.id]
    assert index.next_deadline_ms() == NOW + 1000
    assert index.promote_due(NOW + 999) == []
    assert index.promote_due(NOW + 1000) == ["q"]
    assert index.lengths("q", NOW + 1000) == (1, 0)


def test_leased_final_and_removed_jobs_are_not_ready():
    index = JobIndex()
    leased = job(state=State.LEASED, attempts=1, lease_deadline=NOW + 1000)
    done = job(state=State.COMPLETED)
    gone = job()
    for j in (leased, done, gone):
        index.put(j, 0, NOW)
    index.remove(gone.id)
    assert index.lengths("q", NOW) == (0, 0)
    assert index.job_ids() == {leased.id, done.id}


def test_claimed_jobs_are_skipped_and_names_chosen_among_those_with_jobs():
    index = JobIndex(random.Random(7))
    a1, a2, b1 = job(name="a", created=NOW), job(name="a", created=NOW + 1), job(name="b")
    for j in (a1, a2, b1):
        index.put(j, 0, NOW)
    tried = list(index.ready_candidates(["a", "b", "empty"], NOW, claimed={a1.id}))
    assert set(tried) == {a2.id, b1.id}
    assert a1.id not in tried


def test_lease_picks_names_uniformly_at_random():
    index = JobIndex(random.Random(1))
    for name in ("a", "b", "c"):
        index.put(job(name=name), 0, NOW)
    counts = {"a": 0, "b": 0, "c": 0}
    for _ in range(3000):
        first = next(index.ready_candidates(["a", "b", "c"], NOW, set()))
        counts[index.entry(first).name] += 1
    assert all(800 < n < 1200 for n in counts.values()), counts


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(-3, 3), st.integers(0, 50),
                          st.booleans(), st.sampled_from(["put", "remove"])), max_size=60))
def test_index_matches_a_sorted_reference(operations):
    index = JobIndex()
    ids = [uuid.uuid4() for _ in range(8)]
    reference: dict[uuid.UUID, Job] = {}
    for slot, priority, created, scheduled, op in operations:
        job_id = ids[slot]
        if op == "put":
            j = job(job_id=job_id, priority=priority, created=NOW + created,
                    scheduled=NOW + created * 10 if scheduled else None)
            index.put(j, slot % 2, NOW + 200)
            reference[job_id] = j
        else:
            index.remove(job_id)
            reference.pop(job_id, None)
    now = NOW + 200
    ready = sorted((j for j in reference.values()
                    if j.scheduled_ms is None or j.scheduled_ms <= now), key=lease_order_key)
    waiting = [j for j in reference.values() if j.scheduled_ms is not None and j.scheduled_ms > now]
    if reference:
        assert index.ready_page("q", now, 0, 100) == [j.id for j in ready]
        assert index.lengths("q", now) == (len(ready), len(waiting))


def test_a_backed_off_job_waits_in_scheduled_until_its_retry_time():
    from eventq.core import Add, Fail, StartAttempt, apply

    added = apply(None, Add(uuid.uuid4(), "q", 1_000, 0, b"", max_fails=3, backoff_ms=500),
                  NOW, 1)[1]
    leased = apply(added, StartAttempt(added.id, 1), NOW, 2)[1]
    retried = apply(leased, Fail(added.id, b""), NOW + 10, 3)[1]
    index = JobIndex()
    index.put(retried, 0, NOW + 10)
    assert index.lengths("q", NOW + 10) == (0, 1)
    assert index.next_deadline_ms() == NOW + 510
    assert index.lengths("q", NOW + 510) == (1, 0)


def test_a_queue_emptied_and_filled_again_under_another_name_holds_only_its_jobs():
    """Emptied queues are reused (``SPARE_QUEUES``): one taken again is empty."""
    index = JobIndex()
    first, second = uuid.uuid4(), uuid.uuid4()
    index.put(job(name="a", job_id=first), 0, NOW)
    index.remove(first)
    assert "a" not in index.queues and index.known("a")
    index.put(job(name="b", job_id=second), 0, NOW)
    assert list(index.ready_candidates(["b"], NOW, set())) == [second]
    assert list(index.ready_candidates(["a"], NOW, set())) == []
    assert index.queues["b"].name == "b" and len(index.queues["b"].ready) == 1


def dependent(name="q", priority=0, created=NOW, upstream=None, job_id=None) -> Job:
    """A WAITING job (docs/workflows.md, "Dependencies"): added with -after, as the core
    makes it."""
    job_id = job_id or uuid.uuid4()
    command = Add(job_id, name, 1000, 60_000, b"", priority, after=(upstream or uuid.uuid4(),))
    outcome, after = apply(None, command, created, 0)
    assert isinstance(outcome, Accepted) and after is not None
    assert after.state is State.WAITING
    return after


def released(waiting: Job, at_ms: int) -> Job:
    """``waiting`` told that its only upstream completed at ``at_ms``: NEW, ready then."""
    link = waiting.upstreams[0]
    notice = Upstream(waiting.id, waiting.added_at, link.id, UpstreamOutcome.COMPLETED, 5,
                      at_ms, b"r")
    outcome, after = apply(waiting, notice, at_ms, waiting.version + 1)
    assert isinstance(outcome, Accepted) and after is not None and after.state is State.NEW
    return after


def test_waiting_jobs_are_listed_in_lease_order_and_never_ready_nor_scheduled():
    index = JobIndex()
    low, high = dependent(priority=0), dependent(priority=5, created=NOW + 1)
    plain = job(created=NOW + 2)
    for one in (low, high, plain):
        index.put(one, 0, NOW)
    assert index.waiting_page("q", 0, 10) == [high.id, low.id]
    assert [i for _, i in index.waiting_page_keys("q", 1, 10)] == [low.id]
    assert index.waiting_len("q") == 2 and index.waiting_len("other") == 0
    assert index.lengths("q", NOW) == (1, 0)
    assert index.ready_page("q", NOW, 0, 10) == [plain.id]
    assert list(index.ready_candidates(["q"], NOW, set())) == [plain.id]
    assert index.state_counts()["q"][State.WAITING] == 2


def test_a_released_dependent_leaves_the_waiting_list_for_ready_or_scheduled():
    index = JobIndex()
    now, later = dependent(), dependent(created=NOW + 1)
    index.put(now, 0, NOW)
    index.put(later, 0, NOW)
    index.put(released(now, NOW), 0, NOW)
    index.put(released(later, NOW + 500), 0, NOW)  # ready at its release time
    assert index.waiting_len("q") == 0 and index.waiting_page("q", 0, 10) == []
    assert index.ready_page("q", NOW, 0, 10) == [now.id]
    assert index.scheduled_page("q", NOW, 0, 10) == [later.id]
    assert index.lengths("q", NOW + 500) == (2, 0)


def test_a_queue_holding_only_waiting_jobs_is_kept_until_the_last_goes():
    index = JobIndex()
    waiting = dependent(name="w")
    index.put(waiting, 0, NOW)
    assert "w" in index.queues and index.known("w")
    index.remove(waiting.id)
    assert "w" not in index.queues and index.known("w")  # a name only, as any queue
    assert index.waiting_len("w") == 0


def test_rebuild_lists_the_waiting_jobs_as_puts_do():
    kept, rebuilt = JobIndex(), JobIndex()
    jobs_ = [dependent(priority=p, created=NOW + n) for n, p in enumerate((0, 3, -2, 3))]
    for one in jobs_:
        kept.put(one, 0, NOW)
    records = [encode_state(Added(one.id, one.created_ms, one.version, one), one)
               for one in jobs_]
    rebuilt.rebuild(0, [project_state(record) for record in records], NOW)
    assert rebuilt.waiting_page("q", 0, 10) == kept.waiting_page("q", 0, 10)
    assert len(rebuilt.waiting_page("q", 0, 10)) == 4
