"""The derived in-memory indexes (pure): lease order, scheduled wake-ups, deadlines."""

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
from eventq.core.slim import project_state, slim_of
from eventq.state.indexes import TTL, TTR, JobIndex
from support.core_strategies import histories
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


def test_dropping_a_partition_forgets_its_jobs():
    index = JobIndex()
    kept, dropped = job(), job()
    index.put(kept, 0, NOW)
    index.put(dropped, 1, NOW)
    index.drop_partition(1)
    assert index.job_ids() == {kept.id}
    assert index.ready_page("q", NOW, 0, 10) == [kept.id]


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


# --- the slim projection rebuilds the same index ------------------------------------
# (docs/architecture.md, "Memory and restores")

FAR = 2**63  # after every deadline


def snapshot(index: JobIndex, now_ms: int):
    """Everything the index answers, as plain data (``due`` pops: call it last)."""
    entries = {job_id: index.entry(job_id) for job_id in index.job_ids()}
    queues = {
        name: (index.ready_page(name, now_ms, 0, 10**6),
               index.scheduled_page(name, now_ms, 0, 10**6))
        for name in sorted(index.queues)
    }
    tagged = {tag: index.tagged_page(tag, 0, 10**6) for tag in sorted(index.tag_counts())}
    wake = index.next_deadline_ms()
    due = sorted((d.kind, d.job_id, d.attempt, d.version) for d in index.due(FAR))
    return entries, queues, tagged, wake, due


@settings(max_examples=200, deadline=None)
@given(histories(max_steps=40), st.integers(0, 20_000))
def test_index_rebuilt_from_projected_records_equals_the_one_kept_by_puts(steps, later_ms):
    """The server rebuilds its index from the slim projection of the table's records
    (eventq/core/slim.py); the processor keeps it by putting each decoded job. Both
    must give the same index: same entries, queues in the same lease order, the same
    live deadlines (puts push a deadline only when it changes)."""
    kept = JobIndex()
    last: dict[uuid.UUID, bytes] = {}
    for _command, at, _offset, outcome, after in steps:
        if not isinstance(outcome, Accepted):
            continue
        if after is None:
            kept.remove(outcome.event.job_id)
            last.pop(outcome.event.job_id, None)
        else:
            kept.put(after, 0, at)
            last[after.id] = encode_state(outcome.event, after)
    now_ms = steps[-1][1] + later_ms  # a restart comes after the last command
    rebuilt = JobIndex()
    rebuilt.rebuild(0, [project_state(record) for record in last.values()], now_ms)
    assert snapshot(rebuilt, now_ms) == snapshot(kept, now_ms)


def test_rebuild_replaces_a_partition_and_keeps_the_others():
    index = JobIndex()
    kept, replaced, new = job(name="a"), job(name="b"), job(name="b", created=NOW + 1)
    index.put(kept, 0, NOW)
    index.put(replaced, 1, NOW)
    assert index.rebuild(1, [slim_of(new)], NOW) == 1
    assert index.job_ids() == {kept.id, new.id} and index.partitions() == {0, 1}
    assert index.ready_page("b", NOW, 0, 10) == [new.id]


def test_an_entry_is_a_few_hundred_bytes():
    """The memory target (400 B of RSS per job, measured by bench/recovery_bench.py;
    docs/architecture.md, "Memory and restores") needs entries without an object per
    field."""
    import sys

    index = JobIndex()
    one = job(name="queue-0001", scheduled=NOW + 5)
    index.put(one, 0, NOW)
    packed = index._entries[one.id.int]
    assert isinstance(packed, bytes) and sys.getsizeof(packed) <= 100


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


# ------------------------------------------------------------------ workflows (WAITING)


def dependent(name="q", priority=0, created=NOW, upstream=None, job_id=None) -> Job:
    """A WAITING job (docs/workflows.md): added with -after, as the core makes it."""
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


def test_registration_deadlines_fall_due_once_for_upstreams_that_are_no_live_job():
    index = JobIndex()
    absent, live = uuid.uuid4(), job()
    index.put(live, 0, NOW)
    index.put_registration(absent, NOW + 10)
    index.put_registration(absent, NOW + 20)  # another dependent's, later
    index.put_registration(live.id, NOW + 10)  # a live upstream's go with its ending
    assert index.next_deadline_ms() == NOW + 10
    assert index.due_registrations(NOW + 9) == []
    assert index.due_registrations(NOW + 10) == [absent]
    assert index.due_registrations(NOW + 30) == [absent]
    assert index.due_registrations(NOW + 30) == []


def test_rebuild_adds_the_registration_deadlines_of_a_partition():
    index = JobIndex()
    upstream = uuid.uuid4()
    index.rebuild(0, [], NOW, registrations=[(upstream, NOW + 5)])
    assert index.next_deadline_ms() == NOW + 5
    assert index.due_registrations(NOW + 5) == [upstream]


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


# --- tags (docs/workflows.md, "Tags") ------------------------------------------------


def test_tagged_jobs_are_listed_by_created_time_then_id_in_any_state():
    index = JobIndex()
    low, high = uuid.UUID(int=1 << 64, version=4), uuid.UUID(int=2 << 64, version=4)
    jobs = [
        job(job_id=high, created=NOW + 5, tags=("a", "b")),
        job(job_id=low, created=NOW + 5, state=State.COMPLETED, tags=("a",)),
        job(created=NOW + 1, state=State.LEASED, attempts=1, lease_deadline=NOW + 9, tags=("b", "a")),
        job(created=NOW, scheduled=NOW + 100, tags=("a",)),
        job(created=NOW - 1),  # no tags: in no list
    ]
    for n, j in enumerate(jobs):
        index.put(j, n % 3, NOW)
    expected = [jobs[3].id, jobs[2].id, low, high]
    assert index.tagged_page("a", 0, 100) == expected
    assert index.tagged_page("a", 1, 2) == expected[1:3]
    assert index.tagged_page("a", 4, 10) == [] and index.tagged_page("zz", 0, 10) == []
    assert index.tagged_page("b", 0, 100) == [jobs[2].id, high]
    assert index.tag_counts() == {"a": 4, "b": 2}
    assert index.entry(jobs[2].id).tags == ("b", "a") and index.entry(jobs[4].id).tags == ()
    assert index.entry(jobs[2].id).name == "q"
    keys = [key for key, _ in index.tagged_page_keys("a", 0, 100)]
    assert keys == sorted(keys)


def test_a_tagged_job_stays_listed_through_its_changes_and_goes_with_it():
    index = JobIndex()
    tagged = job(tags=("t",))
    index.put(tagged, 0, NOW)
    for version, state in ((2, State.LEASED), (3, State.PENDING), (4, State.COMPLETED)):
        changed = job(job_id=tagged.id, version=version, state=state, tags=("t",),
                      attempts=1, lease_deadline=NOW + 5 if state is State.LEASED else None)
        index.put(changed, 0, NOW)
        assert index.tagged_page("t", 0, 10) == [tagged.id]
    index.remove(tagged.id)
    assert index.tagged_page("t", 0, 10) == [] and index.tag_counts() == {}
    index.remove(tagged.id)  # twice: nothing


def test_the_same_id_added_again_is_listed_at_its_new_created_time():
    index = JobIndex()
    first = job(created=NOW, tags=("t",))
    other = job(created=NOW + 1, tags=("t",))
    index.put(first, 0, NOW)
    index.put(other, 0, NOW)
    index.remove(first.id)
    again = job(job_id=first.id, created=NOW + 2, tags=("t", "u"))
    index.put(again, 0, NOW)
    assert index.tagged_page("t", 0, 10) == [other.id, first.id]
    assert index.tagged_page("u", 0, 10) == [first.id]


def test_dropping_or_rebuilding_a_partition_forgets_its_tagged_jobs():
    index = JobIndex()
    kept, dropped = job(tags=("t",), created=NOW), job(tags=("t", "x"), created=NOW + 1)
    index.put(kept, 0, NOW)
    index.put(dropped, 1, NOW)
    index.drop_partition(1)
    assert index.tagged_page("t", 0, 10) == [kept.id] and index.tag_counts() == {"t": 1}
    new = job(tags=("x",), created=NOW + 2)
    assert index.rebuild(1, [slim_of(dropped), slim_of(new)], NOW) == 2
    assert index.tagged_page("t", 0, 10) == [kept.id, dropped.id]
    assert index.tagged_page("x", 0, 10) == [dropped.id, new.id]
    assert index.rebuild(1, [slim_of(new)], NOW) == 1
    assert index.tagged_page("t", 0, 10) == [kept.id] and index.tagged_page("x", 0, 10) == [new.id]
    assert index.rebuild(0, [slim_of(kept)], NOW) == 1  # a job rebuilt over itself
    assert index.tagged_page("t", 0, 10) == [kept.id]


def test_jobs_without_tags_cost_the_tag_index_nothing():
    index = JobIndex()
    for n in range(50):
        index.put(job(created=NOW + n), 0, NOW)
    assert index._tagged == {}


def test_a_tagged_jobs_entry_keeps_its_name_for_every_reader():
    """The entry holds the tags after the name: the state lists and counts by queue
    read the name alone."""
    index = JobIndex()
    tagged = job(name="q", state=State.FAILED, tags=("a", "b"))
    plain = job(name="q", state=State.FAILED, created=NOW + 1)
    other = job(name="q2", state=State.FAILED, tags=("q",))
    for j in (tagged, plain, other):
        index.put(j, 0, NOW)
    assert index.jobs_in_state("q", State.FAILED, 0, 10) == [tagged.id, plain.id]
    assert index.jobs_in_state("q2", State.FAILED, 0, 10) == [other.id]
    assert index.state_counts()["q"][State.FAILED] == 2
    assert index.entry(tagged.id).tags == ("a", "b") and index.entry(plain.id).tags == ()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3), st.sampled_from(
    [(), ("a",), ("b",), ("a", "b"), ("b", "a", "c")]), st.sampled_from(["put", "remove",
                                                                          "drop"])), max_size=60))
def test_tagged_pages_match_a_sorted_reference(operations):
    index = JobIndex()
    ids = [uuid.UUID(int=n << 64 | 7, version=4) for n in range(8)]
    reference: dict[uuid.UUID, tuple[Job, int]] = {}
    for slot, created, tags, op in operations:
        job_id = ids[slot]
        if op == "put":
            current = reference.get(job_id)
            if current is None:  # a new job: its own created time and tags
                j = job(job_id=job_id, created=NOW + created, tags=tags)
            else:  # the same job changed: created time and tags stay
                j = job(job_id=job_id, created=current[0].created_ms, tags=current[0].tags,
                        version=current[0].version + 1)
            partition = slot % 2
            index.put(j, partition, NOW)
            reference[job_id] = (j, partition)
        elif op == "remove":
            index.remove(job_id)
            reference.pop(job_id, None)
        else:
            index.drop_partition(slot % 2)
            reference = {k: v for k, v in reference.items() if v[1] != slot % 2}
    for tag in ("a", "b", "c"):
        expected = sorted((j.created_ms, j.id.int, j.id) for j, _ in reference.values()
                          if tag in j.tags)
        assert index.tagged_page(tag, 0, 100) == [job_id for *_, job_id in expected]
    assert set(index.tag_counts()) == {t for j, _ in reference.values() for t in j.tags}


# --- [eventq] failure groups (docs/workflows.md, "Failure groups and retry") -------


@given(histories(max_steps=50), st.booleans())
@settings(max_examples=200, deadline=None)
def test_a_groups_count_always_equals_its_jobs(steps, rebuilt):
    """After every command of a history (fails with groups, retries, deletes, expiries),
    each group's count and page are the FAILED jobs in it, oldest failure first, whether
    the index was kept up to date or rebuilt from the records (as after a restart)."""
    from eventq.core import failure_group, failure_time_ms

    index = JobIndex()
    live: dict[uuid.UUID, tuple[Job, int]] = {}  # the job and its record's broker time
    for command, at, _offset, outcome, after in steps:
        if not isinstance(outcome, Accepted):
            continue
        if after is None:
            live.pop(command.job_id, None)
            index.remove(command.job_id)
        else:
            live[command.job_id] = (after, at)
            index.put(after, 0, at, at)
        if rebuilt:
            records = [project_state(encode_state(outcome_event, job))
                       for job, outcome_event in _records(steps, live)]
            index = JobIndex()
            index.rebuild(0, records, at)
        groups: dict[str, list[tuple[int, int]]] = {}
        for live_job, record_ms in live.values():
            group = failure_group(live_job)
            if group is not None:
                groups.setdefault(group, []).append((failure_time_ms(live_job, record_ms), live_job.id.int))
        assert index.failed_groups() == sorted(
            ((g, len(members)) for g, members in groups.items()), key=lambda gc: gc[0].encode())
        for group, members in groups.items():
            assert index.failed_len(group) == len(members)
            assert [j.int for j in index.failed_page(group, 0, 100)] == [i for _, i in sorted(members)]


def _records(steps, live):
    """The (job, event) of each live job's record: the last accepted event of its id."""
    last = {}
    for command, _at, _offset, outcome, after in steps:
        if isinstance(outcome, Accepted) and after is not None and command.job_id in live:
            if live[command.job_id][0] == after:
                last[command.job_id] = (after, outcome.event)
    return list(last.values())
