from __future__ import annotations

import uuid

import pytest

from eventq.cmdlog import (
    Replayer,
    SegmentWriter,
    WorkqJob,
    WorkqState,
    WqComplete,
    WqDelete,
    WqExpire,
    WqFail,
    WqStartAttempt,
    WqTimeoutAttempt,
    dry_run,
    iter_commands,
    replay,
    replay_with_summary,
)
from support.cmdlog_strategies import MS, NOW_NS, add, schedule

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
UNKNOWN = uuid.UUID(int=99)


def one(cmds, now=NOW_NS):
    jobs = replay(cmds, now)
    assert set(jobs) <= {A}
    return jobs.get(A)


def test_state_numbers_are_workqs():
    assert [(s.name, int(s)) for s in WorkqState] == [
        ("NEW", 0),
        ("COMPLETED", 1),
        ("FAILED", 2),
        ("PENDING", 3),
        ("LEASED", 4),
    ]


def test_add_builds_a_new_job():
    c = add(A, ttl_ms=5000, created_ns=NOW_NS - 1000 * MS, max_attempts=3, priority=-7, payload=b"x")
    assert one([c]) == WorkqJob(
        id=A,
        name="q",
        ttr_ms=1000,
        ttl_ms=5000,
        priority=-7,
        max_attempts=3,
        max_fails=0,
        payload=b"x",
        time_ns=None,
        created_ns=NOW_NS - 1000 * MS,
        attempts=0,
        fails=0,
        state=WorkqState.NEW,
        result=None,
        result_ok=False,
    )


def test_add_skipped_when_created_plus_ttl_has_passed():
    assert one([add(A, ttl_ms=1000, created_ns=NOW_NS - 1001 * MS)]) is None
    # exactly at the expiry it has not passed yet (workq: now.After(expiry))
    assert one([add(A, ttl_ms=1000, created_ns=NOW_NS - 1000 * MS)]) is not None
    assert one([add(A, ttl_ms=1000, created_ns=NOW_NS - 1000 * MS - 1)]) is None


def test_schedule_skipped_when_time_plus_ttl_has_passed():
    old_created = NOW_NS - 10**6 * MS  # created long ago: irrelevant for schedule
    live = schedule(A, time_ns=NOW_NS - 500 * MS, ttl_ms=1000, created_ns=old_created)
    job = one([live])
    assert job is not None and job.time_ns == NOW_NS - 500 * MS and job.state == WorkqState.NEW
    assert one([schedule(A, time_ns=NOW_NS - 1001 * MS, ttl_ms=1000)]) is None
    assert one([schedule(A, time_ns=NOW_NS + 10**9, ttl_ms=1)]) is not None


def test_schedule_without_time_counts_as_expired():
    s = dry_run([schedule(A, time_ns=None)], NOW_NS)
    assert s.skipped_expired == 1 and s.live == 0


def test_commands_on_unknown_id_are_noops():
    cmds = [
        add(A),
        WqComplete(UNKNOWN, b"r"),
        WqFail(UNKNOWN, b"r"),
        WqDelete(UNKNOWN),
        WqExpire(UNKNOWN),
        WqStartAttempt(UNKNOWN),
        WqTimeoutAttempt(UNKNOWN),
    ]
    jobs, s = replay_with_summary(cmds, NOW_NS)
    assert list(jobs) == [A] and jobs[A].state == WorkqState.NEW
    assert s.unknown_id == 6 and s.rejected == 0


def test_commands_after_a_skipped_add_are_noops():
    cmds = [add(A, ttl_ms=1, created_ns=NOW_NS - 10 * MS), WqStartAttempt(A), WqComplete(A, b"r")]
    jobs, s = replay_with_summary(cmds, NOW_NS)
    assert jobs == {} and s.skipped_expired == 1 and s.unknown_id == 2


def test_start_attempt_leases_and_counts():
    job = one([add(A), WqStartAttempt(A)])
    assert (job.state, job.attempts) == (WorkqState.LEASED, 1)


def test_timeout_attempt_returns_to_pending():
    job = one([add(A), WqStartAttempt(A), WqTimeoutAttempt(A)])
    assert (job.state, job.attempts, job.result) == (WorkqState.PENDING, 1, None)
    job = one([add(A), WqStartAttempt(A), WqTimeoutAttempt(A), WqStartAttempt(A)])
    assert (job.state, job.attempts) == (WorkqState.LEASED, 2)


def test_timeout_attempt_at_max_attempts_fails_with_empty_result():
    cmds = [add(A, max_attempts=2)] + [WqStartAttempt(A), WqTimeoutAttempt(A)] * 2
    job = one(cmds)
    assert (job.state, job.attempts, job.result, job.result_ok, job.fails) == (
        WorkqState.FAILED,
        2,
        b"",
        False,
        0,
    )


def test_timeout_attempt_unlimited_attempts_stays_pending():
    job = one([add(A, max_attempts=0)] + [WqStartAttempt(A), WqTimeoutAttempt(A)] * 5)
    assert (job.state, job.attempts) == (WorkqState.PENDING, 5)


def test_timeout_attempt_on_finished_job_is_noop():
    job = one([add(A), WqStartAttempt(A), WqComplete(A, b"r"), WqTimeoutAttempt(A)])
    assert (job.state, job.result, job.result_ok) == (WorkqState.COMPLETED, b"r", True)


def test_complete():
    job = one([add(A), WqStartAttempt(A), WqComplete(A, b"done")])
    assert (job.state, job.result, job.result_ok, job.attempts, job.fails) == (
        WorkqState.COMPLETED,
        b"done",
        True,
        1,
        0,
    )


def test_complete_without_lease_is_allowed_like_workq():
    job = one([add(A), WqComplete(A, b"")])
    assert (job.state, job.result, job.result_ok) == (WorkqState.COMPLETED, b"", True)


def test_fail_finalizes_and_counts_a_fail():
    job = one([add(A, max_fails=3), WqStartAttempt(A), WqFail(A, b"boom")])
    assert (job.state, job.result, job.result_ok, job.fails, job.attempts) == (
        WorkqState.FAILED,
        b"boom",
        False,
        1,
        1,
    )


@pytest.mark.parametrize("remove", [WqDelete, WqExpire])
@pytest.mark.parametrize(
    "before",
    [[], [WqStartAttempt(A)], [WqStartAttempt(A), WqComplete(A, b"r")], [WqFail(A, b"")]],
)
def test_delete_and_expire_remove_in_any_state(remove, before):
    jobs = replay([add(A), add(B), *before, remove(A)], NOW_NS)
    assert list(jobs) == [B]


def test_add_after_delete_is_a_new_job():
    job = one([add(A, payload=b"1"), WqStartAttempt(A), WqDelete(A), add(A, payload=b"2")])
    assert (job.payload, job.attempts, job.state) == (b"2", 0, WorkqState.NEW)


@pytest.mark.parametrize(
    "cmds, state",
    [
        ([add(A, payload=b"first"), add(A, payload=b"second")], WorkqState.NEW),  # duplicate add
        ([add(A), WqComplete(A, b"a"), WqComplete(A, b"b")], WorkqState.COMPLETED),
        ([add(A), WqComplete(A, b"a"), WqFail(A, b"b")], WorkqState.COMPLETED),
        ([add(A), WqFail(A, b"a"), WqComplete(A, b"b")], WorkqState.FAILED),
        ([add(A), WqStartAttempt(A), WqStartAttempt(A)], WorkqState.LEASED),  # already leased
        ([add(A), WqComplete(A, b"a"), WqStartAttempt(A)], WorkqState.COMPLETED),
    ],
)
def test_contradictory_records_are_rejected_and_leave_the_job(cmds, state):
    jobs, s = replay_with_summary(cmds, NOW_NS)
    job = jobs[A]
    assert job.state == state and s.rejected == 1
    assert job.payload == b"p" or job.payload == b"first"
    assert job.attempts <= 1 and job.result in (None, b"a")


def test_start_attempt_beyond_max_attempts_fails_the_job():
    cmds = [add(A, max_attempts=1), WqStartAttempt(A), WqTimeoutAttempt(A)]
    # the timeout at attempts == max already failed it; force the start-attempt path:
    r = Replayer(NOW_NS)
    r.apply_all([add(A, max_attempts=1), WqStartAttempt(A)])
    r.jobs[A].state = WorkqState.PENDING  # as if a timeout was cleaned away
    r.apply(WqStartAttempt(A))
    assert r.jobs[A].state == WorkqState.FAILED and r.jobs[A].attempts == 1
    assert r.summary.rejected == 1 and r.jobs[A].result is None
    assert one(cmds).state == WorkqState.FAILED


def test_hard_attempt_cap_of_255_for_unlimited_jobs():
    cmds = [add(A, max_attempts=0)] + [WqStartAttempt(A), WqTimeoutAttempt(A)] * 255
    job = one(cmds)
    assert (job.state, job.attempts) == (WorkqState.PENDING, 255)
    job = one(cmds + [WqStartAttempt(A)])
    assert (job.state, job.attempts) == (WorkqState.FAILED, 255)


def test_replay_preserves_log_order_across_jobs():
    jobs = replay(
        [add(A), add(B), WqStartAttempt(B), WqStartAttempt(A), WqComplete(B, b"b"), WqDelete(A)],
        NOW_NS,
    )
    assert list(jobs) == [B] and jobs[B].state == WorkqState.COMPLETED


def test_dry_run_counts():
    cmds = [
        add(A),
        add(B),
        add(uuid.UUID(int=3), ttl_ms=1, created_ns=NOW_NS - 5 * MS),  # expired
        schedule(uuid.UUID(int=4), time_ns=NOW_NS + 60_000 * MS),
        WqStartAttempt(A),
        WqStartAttempt(B),
        WqComplete(B, b"ok"),
        WqStartAttempt(UNKNOWN),
        add(A),  # duplicate: rejected
    ]
    s = dry_run(cmds, NOW_NS)
    assert s.records == 9
    assert dict(s.by_type) == {"add": 4, "schedule": 1, "start-attempt": 3, "complete": 1}
    assert s.skipped_expired == 1
    assert s.unknown_id == 1
    assert s.rejected == 1
    assert dict(s.live_by_state) == {"LEASED": 1, "COMPLETED": 1, "NEW": 1}
    assert s.live == 3


def test_replay_reads_iter_commands_tuples(tmp_path):
    with SegmentWriter(tmp_path) as w:
        w.extend([add(A), WqStartAttempt(A), WqFail(A, b"x")], NOW_NS)
    jobs = replay(iter_commands(tmp_path), NOW_NS)
    assert jobs[A].state == WorkqState.FAILED and jobs[A].result == b"x"
