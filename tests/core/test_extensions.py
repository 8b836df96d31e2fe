"""eventq's worker extensions in the pure core (docs/protocol.md, "eventq extensions"): touch,
-backoff, pause/resume. End to end, through a server, they are in
tests/e2e/test_client.py."""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import given
from hypothesis import strategies as st

from eventq.core import (
    Accepted,
    Add,
    Fail,
    Pause,
    Rejected,
    Resume,
    StartAttempt,
    State,
    TimeoutAttempt,
    Touch,
    Touched,
    apply,
    decode_command,
    encode_command,
    is_ready,
)
from eventq.core.commands import is_paused_after
from eventq.core.job import is_scheduled_waiting, ready_time_ms, retry_wait_ms
from eventq.errors import NotFound
from eventq.limits import MAX_BACKOFF_MS, MAX_TTR_MS
from support.core_strategies import live_jobs, names

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
T0 = 1_700_000_000_000


def leased(ttr_ms=1_000, backoff_ms=0, max_fails=0, max_attempts=0):
    add = Add(JID, "q", ttr_ms, 0, b"p", max_attempts=max_attempts, max_fails=max_fails,
              backoff_ms=backoff_ms)  # fmt: skip
    _, job = apply(None, add, T0, 1)
    _, job = apply(job, StartAttempt(JID, 1), T0, 2)
    assert job.state is State.LEASED
    return job


# ------------------------------------------------------------------------------ touch


@given(live_jobs(), st.integers(1, 255), st.one_of(st.none(), st.integers(1, MAX_TTR_MS)),
       st.integers(0, 10**6))  # fmt: skip
def test_touch_extends_only_the_current_attempt_of_a_leased_job(job, attempt, ttr, later):
    at, offset = job.created_ms + later, job.version + 1
    touch = Touch(job.id, attempt, ttr)
    outcome, after = apply(job, touch, at, offset)
    if job.state is State.LEASED and job.attempts == attempt:
        assert isinstance(outcome, Accepted) and isinstance(outcome.event, Touched)
        deadline = at + (job.ttr_ms if ttr is None else ttr)
        assert after == dataclasses.replace(job, lease_deadline_ms=deadline, version=offset)
    else:  # never resurrects a final job, never extends another attempt's lease
        assert outcome == Rejected(NotFound()) and after is job


def test_touch_of_an_absent_job_is_not_found():
    outcome, after = apply(None, Touch(JID, 1), T0, 1)
    assert outcome == Rejected(NotFound()) and after is None


def test_touch_sets_the_deadline_so_a_shorter_ttr_shortens_it():
    job = leased(ttr_ms=10_000)
    _, touched = apply(job, Touch(JID, 1, 500), T0 + 100, 3)
    assert touched.lease_deadline_ms == T0 + 600  # set to now + ttr, not added
    _, touched = apply(touched, Touch(JID, 1), T0 + 200, 4)
    assert touched.lease_deadline_ms == T0 + 10_200
    assert touched.attempts == 1  # a touch never counts as an attempt


def test_a_timer_before_the_touched_deadline_is_ignored_and_after_it_applies():
    job = leased(ttr_ms=1_000)
    _, job = apply(job, Touch(JID, 1), T0 + 900, 3)
    outcome, same = apply(job, TimeoutAttempt(JID, 1), T0 + 1_000, 4)
    assert not isinstance(outcome, Accepted) and same is job
    outcome, after = apply(job, TimeoutAttempt(JID, 1), T0 + 1_900, 5)
    assert isinstance(outcome, Accepted) and after.state is State.PENDING


# ---------------------------------------------------------------------------- backoff


@given(st.integers(1, MAX_BACKOFF_MS), st.integers(1, 40))
def test_retry_waits_double_and_are_capped_at_a_day(backoff, returns):
    assert retry_wait_ms(backoff, returns) == min(backoff * 2 ** (returns - 1), MAX_BACKOFF_MS)
    assert retry_wait_ms(0, returns) == 0


@given(st.integers(1, 100_000), st.lists(st.integers(0, 5_000), min_size=1, max_size=8))
def test_each_fail_waits_exactly_backoff_times_two_to_the_returns(backoff, gaps):
    """A job with max-fails left fails again and again (in any non-final state): the
    r-th return waits backoff x 2^(r-1) from that fail, and a fail during a wait starts
    a new one."""
    job = leased(backoff_ms=backoff, max_fails=255)
    at, offset = T0, 3
    for r, gap in enumerate(gaps, start=1):
        at += gap
        _, job = apply(job, Fail(JID, b"x"), at, offset)
        offset += 1
        wait = min(backoff * 2 ** (r - 1), MAX_BACKOFF_MS)
        assert job.state is State.PENDING and job.returns == r
        assert job.retry_ms == at + wait == ready_time_ms(job)
        assert not is_ready(job, at + wait - 1) and is_scheduled_waiting(job, at + wait - 1)
        assert is_ready(job, at + wait)


def test_a_ttr_timeout_backs_off_too_and_the_retry_time_stays():
    job = leased(ttr_ms=1_000, backoff_ms=250, max_attempts=5)
    _, job = apply(job, TimeoutAttempt(JID, 1), T0 + 1_000, 3)
    assert (job.state, job.retry_ms) == (State.PENDING, T0 + 1_250)
    assert apply(job, StartAttempt(JID, 2), T0 + 1_249, 4)[1] is job  # not ready yet
    _, job = apply(job, StartAttempt(JID, 2), T0 + 1_250, 5)
    assert job.state is State.LEASED and job.retry_ms == T0 + 1_250  # stays (13 keys)
    _, job = apply(job, TimeoutAttempt(JID, 2), T0 + 2_250, 6)
    assert job.retry_ms == T0 + 2_250 + 500  # the second return waits twice as long


def test_without_backoff_a_return_is_workqs():
    job = leased(max_fails=3)
    _, job = apply(job, Fail(JID, b"x"), T0 + 5, 3)
    assert (job.returns, job.retry_ms, ready_time_ms(job)) == (0, None, None)
    assert is_ready(job, T0 + 5)


@given(st.integers(0, MAX_BACKOFF_MS))
def test_backoff_round_trips_through_the_log_and_zero_keeps_workqs_bytes(backoff):
    add = Add(JID, "q", 1, 0, b"p", backoff_ms=backoff)
    assert decode_command(encode_command(add)).command == add
    if not backoff:
        assert b"\xa1b" not in encode_command(add)  # no "b" key at all


# ----------------------------------------------------------------------- pause/resume


@given(names, st.lists(st.booleans(), min_size=1, max_size=10))
def test_the_last_queue_command_decides_and_commands_round_trip(name, pauses):
    commands = [Pause(name) if pause else Resume(name) for pause in pauses]
    for command in commands:
        assert decode_command(encode_command(command)).command == command
    assert is_paused_after(commands[-1]) is pauses[-1]
