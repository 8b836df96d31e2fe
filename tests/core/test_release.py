"""release-attempt (docs/architecture.md, "Abandoned commands"): a lease that never reached a
client is given back, as if it had never happened."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from eventq.core import (
    Accepted,
    Add,
    AttemptReleased,
    Complete,
    Fail,
    Ignored,
    ReleaseAttempt,
    StartAttempt,
    State,
    Touch,
    apply,
    decode_command,
    encode_command,
)
from eventq.core.codec import decode_state, encode_state
from eventq.core.job import lease_order_key
from eventq.core.machine import OTHER_CLAIM

JOB = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
AT = 1_700_000_000_000


def leased(max_attempts: int = 1, max_fails: int = 0):
    _, job = apply(None, Add(JOB, "q", 1000, 0, b"p", 0, max_attempts, max_fails), AT, 10)
    before = job
    _, job = apply(job, StartAttempt(JOB, 1), AT + 1, 11)
    assert job.state is State.LEASED and job.attempts == 1
    return before, job


def test_a_released_attempt_leaves_the_job_as_before_the_lease():
    before, job = leased()
    outcome, after = apply(job, ReleaseAttempt(JOB, 1, State.NEW), AT + 2, 12)
    assert outcome == Accepted(AttemptReleased(JOB, AT + 2, 12, 1, State.NEW))
    assert after == dataclasses.replace(before, version=12)
    assert lease_order_key(after) == lease_order_key(before)


def test_a_job_with_one_attempt_is_leased_and_completed_after_a_release():
    _, job = leased(max_attempts=1)
    _, job = apply(job, ReleaseAttempt(JOB, 1, State.NEW), AT + 2, 12)
    outcome, job = apply(job, StartAttempt(JOB, 1), AT + 3, 13)
    assert isinstance(outcome, Accepted) and job.state is State.LEASED
    outcome, job = apply(job, Complete(JOB, b"done"), AT + 4, 14)
    assert job.state is State.COMPLETED and job.attempts == 1


def test_a_pending_job_returns_to_pending_with_its_fails():
    _, job = leased(max_attempts=0, max_fails=3)
    _, job = apply(job, Fail(JOB, b""), AT + 2, 12)  # retried: PENDING, fails 1
    before = job
    _, job = apply(job, StartAttempt(JOB, 2), AT + 3, 13)
    _, after = apply(job, ReleaseAttempt(JOB, 2, State.PENDING), AT + 4, 14)
    assert after == dataclasses.replace(before, version=14)


@pytest.mark.parametrize("attempt", [2, 3])
def test_a_release_of_another_attempt_is_ignored(attempt):
    _, job = leased(max_attempts=0)
    outcome, after = apply(job, ReleaseAttempt(JOB, attempt, State.NEW), AT + 2, 12)
    assert isinstance(outcome, Ignored) and after is job


def test_a_finished_attempt_is_not_released():
    _, job = leased()
    _, job = apply(job, Complete(JOB, b""), AT + 2, 12)
    outcome, after = apply(job, ReleaseAttempt(JOB, 1, State.NEW), AT + 3, 13)
    assert isinstance(outcome, Ignored) and after is job


def test_a_release_is_applied_once():
    _, job = leased()
    _, after = apply(job, ReleaseAttempt(JOB, 1, State.NEW), AT + 2, 12)
    outcome, again = apply(after, ReleaseAttempt(JOB, 1, State.NEW), AT + 2, 12)
    assert isinstance(outcome, Ignored) and again is after


def test_a_release_naming_its_claim_gives_back_that_claim():
    before, job = leased()  # the claim (start-attempt) is at position 11
    outcome, after = apply(job, ReleaseAttempt(JOB, 1, State.NEW, claim=11), AT + 2, 12)
    assert outcome == Accepted(AttemptReleased(JOB, AT + 2, 12, 1, State.NEW))
    assert after == dataclasses.replace(before, version=12)


def test_a_release_of_another_claim_of_the_same_attempt_is_ignored():
    """After a partition moved, another process's claim of attempt 1 (position 11) may
    be the one a client holds: a give-back of this process's claim of attempt 1
    (refused, at position 9 say) must not end it (docs/fencing.md, "The three fences")."""
    _, job = leased()
    outcome, after = apply(job, ReleaseAttempt(JOB, 1, State.NEW, claim=9), AT + 2, 12)
    assert outcome == Ignored(OTHER_CLAIM) and after is job


def test_a_release_of_a_claim_is_ignored_once_the_job_changed_since():
    """A touch, or anything else applied since the claim, means someone holds it."""
    _, job = leased()
    _, touched = apply(job, Touch(JOB, 1), AT + 2, 12)
    outcome, after = apply(touched, ReleaseAttempt(JOB, 1, State.NEW, claim=11), AT + 3, 13)
    assert outcome == Ignored(OTHER_CLAIM) and after is touched


@pytest.mark.parametrize("claim", [None, 0, 11, 2**40])
def test_release_records_round_trip(claim):
    command = ReleaseAttempt(JOB, 3, State.PENDING, claim)
    assert decode_command(encode_command(command, node="n", request_id=7)).command == command
    _, job = leased()
    outcome, after = apply(job, ReleaseAttempt(JOB, 1, State.NEW), AT + 2, 12)
    event, state = decode_state(encode_state(outcome.event, after))
    assert (event, state) == (outcome.event, after)


@pytest.mark.parametrize("state", [State.LEASED, State.COMPLETED, State.FAILED, 7])
def test_a_release_names_a_waiting_state(state):
    with pytest.raises(ValueError):
        ReleaseAttempt(JOB, 1, state)


@pytest.mark.parametrize("claim", [-1, 2**63, "11", 1.5])
def test_a_claim_is_a_log_position(claim):
    with pytest.raises(ValueError):
        ReleaseAttempt(JOB, 1, State.NEW, claim)


def test_a_release_without_a_claim_keeps_its_record_bytes():
    """Records written before claims were named decode as they did, and a release
    without one is encoded without the key."""
    record = encode_command(ReleaseAttempt(JOB, 1, State.NEW))
    assert b"\xa1c" not in record
