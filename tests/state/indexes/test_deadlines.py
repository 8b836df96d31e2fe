"""The jobs' TTR and TTL deadlines (eventq/state/indexes/deadlines.py): given once
for the current version, re-armed, never lost (docs/architecture.md, "Timers")."""

from __future__ import annotations

import uuid
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import Job, State
from eventq.state.indexes import REPUSH_WITHIN_MS, TTL, TTR, Due, JobIndex, deadlines
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


# --- against a model: no deadline lost, none given that no longer applies -------------

SLOTS = 5
put_op = st.tuples(st.just("put"), st.integers(0, SLOTS - 1),
                   st.sampled_from([State.NEW, State.LEASED, State.COMPLETED]),
                   st.integers(0, 20_000), st.sampled_from([1, 3_000, 9_000, 30_000]),
                   st.integers(0, REPUSH_WITHIN_MS))
remove_op = st.tuples(st.just("remove"), st.integers(0, SLOTS - 1))
tick_op = st.tuples(st.just("tick"), st.integers(0, 8_000))
rearm_op = st.tuples(st.just("rearm"), st.integers(0, 3), st.integers(0, 8_000))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(put_op, remove_op, tick_op, rearm_op), max_size=60), st.booleans())
def test_every_passed_deadline_is_given_for_the_jobs_current_version(operations, compacting):
    """The timer's contract (docs/architecture.md, "Timers"). Soundness: ``due`` gives
    only a live job's current deadline, passed, with its current attempts and version.
    Completeness: once ``due(t)`` returns, every live job's deadline passed by ``t`` has
    been given for the job's current version (a later version of a job whose deadline was
    given is given again: the old version's command is moot), every re-armed one too, and
    ``next_deadline_ms`` never sleeps past one not yet given. A put's time may be behind
    the timer's by up to ``REPUSH_WITHIN_MS`` (a record's broker time against the
    timer's clock). ``compacting``: the heap is rebuilt whenever it holds a stale item
    (HEAP_SLACK_ITEMS = 0)."""
    index = JobIndex()
    ids = [uuid.UUID(int=n << 64 | 5, version=4) for n in range(SLOTS)]
    live: dict[uuid.UUID, Job] = {}
    given_for: set[tuple[str, uuid.UUID, int]] = set()  # (kind, id, version)
    rearmed: list[tuple[int, Due]] = []
    last: list[Due] = []
    now, version = NOW, 0
    with patch.object(deadlines, "HEAP_SLACK_ITEMS", 0 if compacting else 1000):
        for op, *args in operations:
            if op == "put":
                slot, state, lease_in, ttl, behind = args
                version += 1
                leased = state is State.LEASED
                one = job(job_id=ids[slot], state=state, version=version, ttl=ttl,
                          attempts=1 if leased else 0,
                          lease_deadline=now + lease_in if leased else None)
                index.put(one, slot % 2, now - behind)
                live[one.id] = one
            elif op == "remove":
                index.remove(ids[args[0]])
                live.pop(ids[args[0]], None)
            elif op == "rearm" and last:
                due = last[args[0] % len(last)]
                index.rearm(due, now + args[1])
                if due.job_id in live and live[due.job_id].version == due.version:
                    rearmed.append((now + args[1], due))
            elif op == "tick":
                now += args[0]
                last = index.due(now)
                for due in last:
                    current = live.get(due.job_id)
                    assert current is not None and current_deadlines(current)[due.kind] <= now
                    assert (due.attempt, due.version) == (current.attempts, current.version)
                    given_for.add((due.kind, due.job_id, due.version))
                owed = {(due.kind, due.job_id, due.version) for when, due in rearmed
                        if when <= now and due.job_id in live
                        and live[due.job_id].version == due.version}
                assert owed <= {(due.kind, due.job_id, due.version) for due in last}
                rearmed = [(when, due) for when, due in rearmed if when > now]
                assert not [pending for pending in not_given(live, given_for) if pending <= now]
            wake = index.next_deadline_ms()
            owed_at = [*not_given(live, given_for), *(when for when, _ in rearmed)]
            assert not owed_at or (wake is not None and wake <= min(owed_at))


def current_deadlines(one: Job) -> dict[str, int]:
    """A job's deadlines by kind: its TTR while LEASED, its TTL."""
    found = {TTL: one.expires_ms}
    if one.state is State.LEASED:
        found[TTR] = one.lease_deadline_ms
    return {kind: deadline for kind, deadline in found.items() if deadline is not None}


def not_given(live: dict[uuid.UUID, Job], given_for: set[tuple[str, uuid.UUID, int]]):
    """The deadlines of live jobs' current versions not given yet."""
    return [deadline for one in live.values()
            for kind, deadline in current_deadlines(one).items()
            if (kind, one.id, one.version) not in given_for]
