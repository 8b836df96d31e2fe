"""The pure mapping between workq's replayed jobs and eventq's Import / Job."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings

from eventq.cmdlog import (
    WorkqJob,
    WorkqState,
    decode_payload,
    iter_commands,
    replay,
    write_jobs,
)
from eventq.core import Accepted, Import, State, apply
from eventq.core.partitioner import partition_for_key
from eventq.migrate.mapping import (
    BACKOFF_LOST,
    LEASE_LOST,
    NO_TTL,
    TAGS_LOST,
    Unimportable,
    export_notes,
    exportable,
    import_command,
    ms_to_ns,
    ns_to_ms,
    placement,
    workq_job,
)
from support.core_strategies import live_jobs

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
CREATED_NS = 1_480_586_400_000_000_000  # 2016-12-01T10:00:00Z
# The spec's add vector (docs/migrate.md, "Commands").
ADD_VECTOR = bytes.fromhex(
    "01" "61a444a0612841c08078cc757d3bd2d8" "04" "70696e67" "e807" "e0d403" "14" "03" "01"
    "01" "61" "01000000000000000000000000ffff" "010000000ecfd1eba000000000ffff"
)


def wjob(**changes) -> WorkqJob:
    fields = dict(
        id=JID, name="ping", ttr_ms=1000, ttl_ms=60000, priority=10, max_attempts=3,
        max_fails=1, payload=b"a", time_ns=None, created_ns=CREATED_NS,
    )  # fmt: skip
    fields.update(changes)
    return WorkqJob(**fields)


def test_the_spec_vector_maps_to_a_snapshot_of_its_fields():
    add = decode_payload(ADD_VECTOR)
    jobs = replay([add], CREATED_NS + 1)
    command = import_command(jobs[JID])
    assert command == Import(
        job_id=JID, name="ping", ttr_ms=1000, ttl_ms=60000, payload=b"a", priority=10,
        max_attempts=3, max_fails=1, attempts=0, fails=0, state=State.NEW,
        created_ms=1_480_586_400_000, scheduled_ms=None, expires_ms=1_480_586_460_000,
        lease_deadline_ms=None, result=None, result_ok=None,
    )  # fmt: skip


def test_times_are_truncated_to_milliseconds():
    assert ns_to_ms(1_999_999) == 1 and ns_to_ms(2_000_000) == 2 and ns_to_ms(0) == 0
    assert ns_to_ms(-1) == -1  # floor before 1970 (never later than the instant)
    assert ms_to_ns(5) == 5_000_000
    c = import_command(wjob(created_ns=CREATED_NS + 999_999))
    assert c.created_ms == CREATED_NS // 1_000_000
    assert c.expires_ms == c.created_ms + 60000  # eventq's own deadline, from created_ms
    s = import_command(wjob(time_ns=CREATED_NS + 5_000_123_456))
    assert s.scheduled_ms == CREATED_NS // 1_000_000 + 5_000
    assert s.expires_ms == s.scheduled_ms + 60000


def test_a_leased_job_imports_as_pending_with_its_attempts():
    c = import_command(wjob(state=WorkqState.LEASED, attempts=2))
    assert (c.state, c.attempts, c.lease_deadline_ms) == (State.PENDING, 2, None)


@pytest.mark.parametrize(
    "state,result,expected",
    [
        (WorkqState.COMPLETED, b"ok", (State.COMPLETED, b"ok", True)),
        (WorkqState.FAILED, b"bad", (State.FAILED, b"bad", False)),
        (WorkqState.FAILED, b"", (State.FAILED, b"", False)),
        # workq's start-attempt beyond max-attempts fails a job without a result.
        (WorkqState.FAILED, None, (State.FAILED, b"", False)),
        (WorkqState.PENDING, None, (State.PENDING, None, None)),
        (WorkqState.NEW, None, (State.NEW, None, None)),
    ],
)
def test_states_and_results(state, result, expected):
    fails = 1 if state == WorkqState.FAILED and result else 0
    c = import_command(wjob(state=state, result=result, result_ok=state == WorkqState.COMPLETED,
                            attempts=1 if state != WorkqState.NEW else 0, fails=fails))
    assert (c.state, c.result, c.result_ok) == expected


def test_result_ok_follows_the_state_not_the_flag():
    c = import_command(wjob(state=WorkqState.FAILED, result=b"x", result_ok=True, fails=1))
    assert c.result_ok is False


@pytest.mark.parametrize(
    "changes,reason",
    [
        (dict(name="a b"), "name"),
        (dict(name=""), "name"),
        (dict(ttr_ms=0), "ttr_ms"),
        (dict(ttr_ms=86_400_001), "ttr_ms"),
        (dict(priority=2**31), "priority"),
        (dict(max_attempts=256), "max_attempts"),
        (dict(max_fails=300), "max_fails"),
        (dict(payload=b"x" * (1024 * 1024 + 1)), "payload"),
        (dict(created_ns=300_000_000_000_000_000_000), "created_ms"),
        (dict(ttl_ms=2**64), "ttl_ms"),
        (dict(time_ns=CREATED_NS - 120_000_000_000), "TTL must end after"),  # time+ttl < created
        (dict(ttl_ms=0, time_ns=CREATED_NS), "TTL"),
    ],
)
def test_what_eventq_cannot_hold_is_unimportable_with_a_reason(changes, reason):
    with pytest.raises(Unimportable) as caught:
        import_command(wjob(**changes))
    assert caught.value.job_id == JID and reason in caught.value.reason


def test_placement_is_murmur2_of_the_canonical_key():
    key, partition = placement(JID, 8)
    assert key == b"61a444a0-6128-41c0-8078-cc757d3bd2d8"
    assert partition == partition_for_key(key, 8)


# --------------------------------------------------------------------------- export


def test_export_maps_times_and_states_exactly():
    outcome, job = apply(None, import_command(wjob(state=WorkqState.LEASED, attempts=1)),
                         1_480_586_401_000, 3)  # fmt: skip
    assert isinstance(outcome, Accepted)
    w = workq_job(job)
    assert (w.created_ns, w.time_ns, w.state, w.result, w.result_ok) == (
        CREATED_NS, None, WorkqState.PENDING, None, False,
    )  # fmt: skip


def without_backoff(job):
    """``job`` as workq can hold it: no -backoff (its retry time gone: ready at once),
    no -tags, [eventq] no failure group of its own and no retry's time (export_notes
    reports them)."""
    return dataclasses.replace(job, backoff_ms=0, returns=0, retry_ms=None, tags=(),
                               group=None, delayed_ms=None, early=False)


def test_a_job_with_a_backoff_is_noted_as_losing_it():
    _, job = apply(None, import_command(wjob()), 1_480_586_401_000, 3)
    assert export_notes(dataclasses.replace(job, backoff_ms=100)) == [BACKOFF_LOST]


def test_a_job_with_tags_is_noted_as_losing_them():
    _, job = apply(None, import_command(wjob()), 1_480_586_401_000, 3)
    tagged = dataclasses.replace(job, tags=("nightly", "etl"))
    assert export_notes(tagged) == [TAGS_LOST]
    assert export_notes(dataclasses.replace(tagged, backoff_ms=100)) == [BACKOFF_LOST, TAGS_LOST]
    assert TAGS_LOST == "-tags: workq has no tags; imports back without them"
    # workq's job carries none of them: it imports back as the job without tags
    assert import_command(workq_job(tagged)) == import_command(workq_job(job))


def test_export_notes():
    _, job = apply(None, import_command(wjob()), 1_480_586_401_000, 3)
    assert exportable(job) and export_notes(job) == []
    leased = dataclasses.replace(job, state=State.LEASED, attempts=1,
                                 lease_deadline_ms=1_480_586_402_000)  # fmt: skip
    assert export_notes(leased) == [LEASE_LOST]
    run_job = dataclasses.replace(job, ttl_ms=0, expires_ms=None)
    assert not exportable(run_job) and export_notes(run_job) == [NO_TTL]


@given(live_jobs())
@settings(max_examples=200, deadline=None)
def test_any_eventq_job_round_trips_through_workq_fields(job):
    """Job -> WorkqJob -> Import -> Job is the identity (but for version), LEASED and
    eventq's -backoff and -tags aside (export_notes reports them)."""
    job = without_backoff(job)
    if job.state is State.LEASED:
        expected = Import.from_job(dataclasses.replace(
            job, state=State.PENDING, lease_deadline_ms=None))  # fmt: skip
    else:
        expected = Import.from_job(job)
    assert import_command(workq_job(job)) == expected


@given(live_jobs())
@settings(max_examples=100, deadline=None)
def test_write_jobs_then_replay_then_import(tmp_path_factory, job):
    """The whole pure export/import path, through real files: exact for every job that
    write_jobs does not report as inexact."""
    if not exportable(job):
        return
    directory = tmp_path_factory.mktemp("rt")
    now_ns = ms_to_ns(job.created_ms) + 1  # before any TTL ends
    report = write_jobs(directory, [workq_job(job)], now_ns=now_ns)
    jobs = replay(iter_commands(directory), now_ns)
    if report.inexact:
        return
    back = import_command(jobs[job.id])
    job = without_backoff(job)
    expected = dataclasses.replace(job, state=State.PENDING, lease_deadline_ms=None) if (
        job.state is State.LEASED) else job  # fmt: skip
    assert back == Import.from_job(expected)

