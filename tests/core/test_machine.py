"""Every transition rule and every rejection of the state machine, one by one."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from eventq.core import (
    ALREADY_APPLIED,
    CLAIM_REFUSED,
    COMMAND_CLASSES,
    NO_SUCH_JOB,
    NOT_YET_DUE,
    STALE_ATTEMPT,
    TRANSITIONS,
    Accepted,
    Add,
    Added,
    AttemptsExhausted,
    AttemptStarted,
    AttemptTimedOut,
    Complete,
    Completed,
    Delete,
    Deleted,
    Expire,
    Expired,
    Fail,
    Failed,
    FailRetried,
    Ignored,
    Job,
    Rejected,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    apply,
    decide,
    due_commands,
    evolve,
    is_ready,
    is_scheduled_waiting,
    lease_order_key,
    next_deadline,
)
from eventq.errors import (
    DUPLICATE_JOB,
    DUPLICATE_RESULT,
    INVALID_TIME,
    ClientError,
    NotFound,
)
from eventq.limits import MAX_ATTEMPTS_LIMIT, MAX_DEADLINE_MS, MAX_TTL_MS

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
UPSTREAM_ID = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")  # of a WAITING job
T0 = 1_700_000_000_000
TTR = 1_000
TTL = 60_000


class Log:
    """Applies commands in order with increasing offsets, like one partition."""

    def __init__(self, job: Job | None = None, offset: int = 100) -> None:
        self.job = job
        self.offset = offset

    def __call__(self, command, at_ms: int = T0):
        self.offset += 1
        outcome, self.job = apply(self.job, command, at_ms, self.offset)
        return outcome


def event_of(outcome):
    assert isinstance(outcome, Accepted), outcome
    return outcome.event


def added(add=None, at_ms=T0) -> Log:
    log = Log()
    event_of(log(add or Add(JID, "q", TTR, TTL, b"payload"), at_ms))
    return log


def leased(max_attempts=0, max_fails=0, at_ms=T0) -> Log:
    log = added(Add(JID, "q", TTR, TTL, b"p", 0, max_attempts, max_fails), at_ms)
    event_of(log(StartAttempt(JID, 1), at_ms))
    return log


def in_state(state: State) -> Log:
    """A job in ``state``, reached through real commands."""
    if state is State.WAITING:
        log = added(Add(JID, "q", TTR, TTL, b"p", 0, 0, 3, after=(UPSTREAM_ID,)))
        assert log.job is not None and log.job.state is state
        return log
    log = added(Add(JID, "q", TTR, TTL, b"p", 0, 0, 3))
    if state is State.NEW:
        return log
    event_of(log(StartAttempt(JID, 1)))
    if state is State.PENDING:
        event_of(log(Fail(JID, b"retry")))
    elif state is State.COMPLETED:
        event_of(log(Complete(JID, b"ok")))
    elif state is State.FAILED:
        event_of(log(Delete(JID)))
        log.job = None
        event_of(log(Add(JID, "q", TTR, TTL, b"p")))
        event_of(log(Fail(JID, b"bad")))
    assert log.job is not None and log.job.state is state
    return log


ALL_STATES = list(State)
LIVE_STATES = [State.NEW, State.PENDING, State.LEASED]
FINAL_STATES = [State.COMPLETED, State.FAILED]


# ----------------------------------------------------------------------------- table


def test_table_covers_every_command_and_state():
    columns = [None, *State]
    job_commands = set(COMMAND_CLASSES)  # pause and resume name a queue, not a job
    assert set(TRANSITIONS) == {(t, s) for t in job_commands for s in columns}


# ------------------------------------------------------------------------------- add


def test_add_creates_a_new_job():
    log = Log()
    event = event_of(log(Add(JID, "emails", TTR, TTL, b"data", 7, 3, 2), T0))
    assert isinstance(event, Added)
    assert (event.job_id, event.at_ms, event.offset) == (JID, T0, 101)
    job = log.job
    assert job == event.job
    assert job == Job(
        id=JID, name="emails", ttr_ms=TTR, ttl_ms=TTL, payload=b"data", priority=7,
        max_attempts=3, max_fails=2, attempts=0, fails=0, state=State.NEW, created_ms=T0,
        scheduled_ms=None, expires_ms=T0 + TTL, lease_deadline_ms=None, result=None,
        result_ok=None, version=101,
    )  # fmt: skip
    assert is_ready(job, T0)


def test_add_without_ttl_is_a_run_job():
    log = added(Add(JID, "q", TTR, 0, b""))
    assert log.job.ttl_ms == 0 and log.job.expires_ms is None
    assert next_deadline(log.job) is None


def test_add_with_huge_ttl_saturates_expiry():
    log = added(Add(JID, "q", TTR, MAX_TTL_MS, b""))
    assert log.job.expires_ms == MAX_DEADLINE_MS


@pytest.mark.parametrize("state", ALL_STATES)
def test_add_of_a_known_id_is_a_duplicate(state):
    log = in_state(state)
    before = log.job
    assert log(Add(JID, "other", 5, 5, b"")) == Rejected(ClientError(DUPLICATE_JOB))
    assert log.job == before


# -------------------------------------------------------------------------- schedule


def test_schedule_in_the_future():
    log = Log()
    event = event_of(log(Schedule(JID, "q", TTR, TTL, T0 + 5_000, b"p"), T0))
    assert isinstance(event, Added)
    job = log.job
    assert job.state is State.NEW
    assert (job.created_ms, job.scheduled_ms, job.expires_ms) == (T0, T0 + 5_000, T0 + 5_000 + TTL)
    assert not is_ready(job, T0 + 4_999) and is_scheduled_waiting(job, T0 + 4_999)
    assert is_ready(job, T0 + 5_000) and not is_scheduled_waiting(job, T0 + 5_000)


def test_schedule_in_the_past_is_ready_at_once():
    log = Log()
    event_of(log(Schedule(JID, "q", TTR, TTL, T0 - 10_000, b"p"), T0))
    assert log.job.expires_ms == T0 - 10_000 + TTL
    assert is_ready(log.job, T0)


@pytest.mark.parametrize("time_ms", [T0 - TTL, T0 - TTL - 1, 0])
def test_schedule_whose_ttl_has_passed_is_invalid_time(time_ms):
    log = Log()
    assert log(Schedule(JID, "q", TTR, TTL, time_ms, b""), T0) == Rejected(
        ClientError(INVALID_TIME)
    )
    assert log.job is None


def test_schedule_whose_ttl_ends_just_after_acceptance_is_accepted():
    log = Log()
    event_of(log(Schedule(JID, "q", TTR, TTL, T0 - TTL + 1, b""), T0))
    assert log.job.expires_ms == T0 + 1


@pytest.mark.parametrize("state", ALL_STATES)
def test_schedule_of_a_known_id_is_a_duplicate(state):
    log = in_state(state)
    before = log.job
    assert log(Schedule(JID, "q", TTR, TTL, T0, b"")) == Rejected(ClientError(DUPLICATE_JOB))
    assert log.job == before


def test_schedule_checks_time_before_duplicate():
    log = in_state(State.NEW)
    assert log(Schedule(JID, "q", TTR, 1, 0, b"")) == Rejected(ClientError(INVALID_TIME))


# --------------------------------------------------------------------- start-attempt


def test_start_attempt_leases_a_ready_job():
    log = added()
    event = event_of(log(StartAttempt(JID, 1), T0 + 50))
    assert event == AttemptStarted(JID, T0 + 50, log.offset, attempt=1, deadline_ms=T0 + 50 + TTR)
    job = log.job
    assert (job.state, job.attempts, job.lease_deadline_ms) == (State.LEASED, 1, T0 + 50 + TTR)
    assert job.version == log.offset


def test_start_attempt_on_absent_job_is_ignored():
    assert Log()(StartAttempt(JID, 1)) == Ignored(NO_SUCH_JOB)


@pytest.mark.parametrize("attempt", [2, 3, MAX_ATTEMPTS_LIMIT + 1])
def test_start_attempt_with_a_wrong_number_is_refused(attempt):
    log = added()
    before = log.job
    assert log(StartAttempt(JID, attempt)) == Ignored(CLAIM_REFUSED)
    assert log.job == before


def test_the_same_attempt_cannot_be_claimed_twice():
    log = leased()
    before = log.job
    assert log(StartAttempt(JID, 1)) == Ignored(CLAIM_REFUSED)  # a second gateway's claim
    assert log(StartAttempt(JID, 2)) == Ignored(CLAIM_REFUSED)  # LEASED is not ready
    assert log.job == before


@pytest.mark.parametrize("state", FINAL_STATES)
def test_start_attempt_on_final_job_is_refused(state):
    log = in_state(state)
    assert log(StartAttempt(JID, log.job.attempts + 1)) == Ignored(CLAIM_REFUSED)


def test_start_attempt_before_the_scheduled_time_is_refused():
    log = Log()
    event_of(log(Schedule(JID, "q", TTR, TTL, T0 + 5_000, b""), T0))
    assert log(StartAttempt(JID, 1), T0 + 4_999) == Ignored(CLAIM_REFUSED)
    event_of(log(StartAttempt(JID, 1), T0 + 5_000))
    assert log.job.state is State.LEASED


def test_start_attempt_on_pending_job_takes_the_next_number():
    log = in_state(State.PENDING)
    assert log.job.attempts == 1
    assert log(StartAttempt(JID, 1)) == Ignored(CLAIM_REFUSED)
    event = event_of(log(StartAttempt(JID, 2)))
    assert event.attempt == 2 and log.job.attempts == 2


def test_start_attempt_past_max_attempts_exhausts_the_job():
    log = leased(max_attempts=2, max_fails=3)
    event_of(log(Fail(JID, b"r1")))
    event_of(log(StartAttempt(JID, 2)))
    event_of(log(Fail(JID, b"r2")))
    assert log.job.state is State.PENDING and log.job.attempts == 2
    event = event_of(log(StartAttempt(JID, 3)))
    assert isinstance(event, AttemptsExhausted)
    job = log.job
    assert (job.state, job.result, job.result_ok, job.attempts) == (State.FAILED, b"", False, 2)
    assert job.lease_deadline_ms is None


def test_start_attempt_past_the_hard_cap_exhausts_the_job():
    log = added()
    pending = dataclasses.replace(log.job, state=State.PENDING, attempts=MAX_ATTEMPTS_LIMIT)
    log.job = pending
    assert log(StartAttempt(JID, MAX_ATTEMPTS_LIMIT)) == Ignored(CLAIM_REFUSED)
    assert isinstance(event_of(log(StartAttempt(JID, MAX_ATTEMPTS_LIMIT + 1))), AttemptsExhausted)
    assert log.job.state is State.FAILED and log.job.result == b""


# ------------------------------------------------------------------- timeout-attempt


def test_timeout_requeues_at_the_old_position():
    log = leased(max_attempts=3)
    key = lease_order_key(log.job)
    deadline = log.job.lease_deadline_ms
    event = event_of(log(TimeoutAttempt(JID, 1), deadline))
    assert event == AttemptTimedOut(JID, deadline, log.offset, attempt=1, requeued=True)
    job = log.job
    assert (job.state, job.attempts, job.lease_deadline_ms) == (State.PENDING, 1, None)
    assert job.result is None
    assert lease_order_key(job) == key
    assert is_ready(job, deadline)


def test_timeout_of_the_last_attempt_fails_with_empty_result():
    log = leased(max_attempts=1)
    event = event_of(log(TimeoutAttempt(JID, 1), T0 + TTR))
    assert isinstance(event, AttemptTimedOut) and not event.requeued
    job = log.job
    assert (job.state, job.result, job.result_ok, job.lease_deadline_ms) == (
        State.FAILED, b"", False, None
    )  # fmt: skip


def test_timeout_before_the_deadline_is_not_yet_due():
    log = leased()
    before = log.job
    assert log(TimeoutAttempt(JID, 1), T0 + TTR - 1) == Ignored(NOT_YET_DUE)
    assert log.job == before


def test_timeout_of_another_attempt_is_stale():
    log = leased(max_attempts=3)
    event_of(log(TimeoutAttempt(JID, 1), T0 + TTR))
    event_of(log(StartAttempt(JID, 2), T0 + TTR))
    assert log(TimeoutAttempt(JID, 1), T0 + 10 * TTR) == Ignored(STALE_ATTEMPT)
    assert log.job.state is State.LEASED and log.job.attempts == 2


@pytest.mark.parametrize("state", [State.NEW, State.PENDING, *FINAL_STATES])
def test_timeout_of_a_job_not_leased_is_stale(state):
    log = in_state(state)
    before = log.job
    assert log(TimeoutAttempt(JID, max(before.attempts, 1)), T0 + 10 * TTR) == Ignored(
        STALE_ATTEMPT
    )
    assert log.job == before


def test_timeout_of_absent_job_is_ignored():
    assert Log()(TimeoutAttempt(JID, 1)) == Ignored(NO_SUCH_JOB)


# ---------------------------------------------------------------------------- complete


@pytest.mark.parametrize("state", LIVE_STATES)
def test_complete_in_any_live_state(state):
    log = in_state(state)
    event = event_of(log(Complete(JID, b"answer")))
    assert event == Completed(JID, T0, log.offset, b"answer")
    job = log.job
    assert (job.state, job.result, job.result_ok, job.lease_deadline_ms) == (
        State.COMPLETED, b"answer", True, None
    )  # fmt: skip


def test_complete_of_absent_job_is_not_found():
    assert Log()(Complete(JID, b"")) == Rejected(NotFound())


@pytest.mark.parametrize("state", FINAL_STATES)
def test_complete_of_final_job_is_a_duplicate_result(state):
    log = in_state(state)
    before = log.job
    assert log(Complete(JID, b"again")) == Rejected(ClientError(DUPLICATE_RESULT))
    assert log.job == before


# -------------------------------------------------------------------------------- fail


@pytest.mark.parametrize("max_fails", [0, 1])
def test_fail_without_retries_is_final(max_fails):
    log = leased(max_fails=max_fails)
    event = event_of(log(Fail(JID, b"err")))
    assert event == Failed(JID, T0, log.offset, b"err")
    job = log.job
    assert (job.state, job.fails, job.result, job.result_ok, job.lease_deadline_ms) == (
        State.FAILED, 1, b"err", False, None
    )  # fmt: skip


def test_fail_retries_while_fails_below_max_fails():
    log = leased(max_fails=3)
    key = lease_order_key(log.job)
    assert isinstance(event_of(log(Fail(JID, b"e1"))), FailRetried)
    job = log.job
    assert (job.state, job.fails, job.result, job.result_ok, job.lease_deadline_ms) == (
        State.PENDING, 1, None, None, None
    )  # fmt: skip
    assert lease_order_key(job) == key
    event_of(log(StartAttempt(JID, 2)))
    assert isinstance(event_of(log(Fail(JID, b"e2"))), FailRetried)
    assert log.job.fails == 2
    assert isinstance(event_of(log(Fail(JID, b"e3"))), Failed)  # fails 3 == max_fails
    assert (log.job.state, log.job.fails, log.job.result) == (State.FAILED, 3, b"e3")


@pytest.mark.parametrize("state", [State.NEW, State.PENDING])
def test_fail_accepted_without_a_lease(state):
    log = in_state(state)
    event_of(log(Fail(JID, b"")))


def test_fail_of_absent_job_is_not_found():
    assert Log()(Fail(JID, b"")) == Rejected(NotFound())


@pytest.mark.parametrize("state", FINAL_STATES)
def test_fail_of_final_job_is_a_duplicate_result(state):
    log = in_state(state)
    before = log.job
    assert log(Fail(JID, b"again")) == Rejected(ClientError(DUPLICATE_RESULT))
    assert log.job == before


# ------------------------------------------------------------------------------ delete


@pytest.mark.parametrize("state", ALL_STATES)
def test_delete_removes_in_any_state(state):
    log = in_state(state)
    assert event_of(log(Delete(JID))) == Deleted(JID, T0, log.offset)
    assert log.job is None
    # the id is free again
    event_of(log(Add(JID, "q", TTR, TTL, b"")))


def test_delete_of_absent_job_is_not_found():
    assert Log()(Delete(JID)) == Rejected(NotFound())


# ------------------------------------------------------------------------------ expire


@pytest.mark.parametrize("state", ALL_STATES)
def test_expire_when_due_removes_and_counts_evictions(state):
    log = in_state(state)
    expires = log.job.expires_ms
    event = event_of(log(Expire(JID), expires))
    assert event == Expired(JID, expires, log.offset, evicted=state not in FINAL_STATES)
    assert log.job is None


def test_expire_before_due_is_ignored():
    log = added()
    before = log.job
    assert log(Expire(JID), T0 + TTL - 1) == Ignored(NOT_YET_DUE)
    assert log.job == before


def test_expire_of_run_job_is_ignored():
    log = added(Add(JID, "q", TTR, 0, b""))
    assert log(Expire(JID), 2**40) == Ignored(NOT_YET_DUE)


def test_expire_of_scheduled_job_counts_from_time():
    log = Log()
    event_of(log(Schedule(JID, "q", TTR, TTL, T0 + 5_000, b""), T0))
    assert log(Expire(JID), T0 + TTL) == Ignored(NOT_YET_DUE)
    event_of(log(Expire(JID), T0 + 5_000 + TTL))


def test_expire_of_absent_job_is_ignored():
    assert Log()(Expire(JID)) == Ignored(NO_SUCH_JOB)


# ------------------------------------------------------------------------- idempotency


@pytest.mark.parametrize(
    "command",
    [
        Add(JID, "q", TTR, TTL, b""),
        Schedule(JID, "q", TTR, TTL, T0, b""),
        StartAttempt(JID, 1),
        TimeoutAttempt(JID, 1),
        Complete(JID, b""),
        Fail(JID, b""),
        Delete(JID),
        Expire(JID),
    ],
)
@pytest.mark.parametrize("delta", [0, -1])
def test_a_command_at_or_below_the_version_is_already_applied(command, delta):
    job = leased().job
    assert decide(job, command, T0 + 10 * TTL, job.version + delta) == Ignored(ALREADY_APPLIED)


def test_redelivered_add_is_not_a_duplicate():
    log = added()
    assert decide(log.job, Add(JID, "q", TTR, TTL, b"payload"), T0, log.offset) == Ignored(
        ALREADY_APPLIED
    )


def test_every_event_sets_the_version():
    log = leased(max_fails=2)
    for command in [Fail(JID, b""), StartAttempt(JID, 2), Complete(JID, b"")]:
        event_of(log(command))
        assert log.job.version == log.offset


# ------------------------------------------------------------------ impossible inputs


def test_decide_refuses_a_job_with_another_id():
    job = added().job
    with pytest.raises(ValueError):
        decide(job, Delete(uuid.UUID(int=5)), T0, 10**6)


@pytest.mark.parametrize("at_ms, offset", [(T0, -1), (2**62, 1), (1.5, 1), (T0, True)])
def test_decide_refuses_bad_positions(at_ms, offset):
    with pytest.raises(ValueError):
        decide(None, Delete(JID), at_ms, offset)


def test_decide_refuses_a_non_command():
    with pytest.raises(ValueError):
        decide(None, "add", T0, 1)  # type: ignore[arg-type]


def test_evolve_refuses_events_that_cannot_follow():
    log = leased()
    job = log.job
    new = Added(JID, T0, 1, dataclasses.replace(job, state=State.NEW, attempts=0,
                                                lease_deadline_ms=None, version=1))
    with pytest.raises(ValueError):
        evolve(job, new)  # already exists
    with pytest.raises(ValueError):
        evolve(None, Completed(JID, T0, 10**6, b""))  # absent
    with pytest.raises(ValueError):
        evolve(job, Completed(JID, T0, job.version, b""))  # not after the version
    with pytest.raises(ValueError):
        evolve(job, Completed(uuid.UUID(int=1), T0, 10**6, b""))  # another job
    with pytest.raises(ValueError):
        evolve(job, AttemptStarted(JID, T0, 10**6, 2, T0 + TTR))  # LEASED is not ready
    with pytest.raises(ValueError):
        evolve(job, AttemptTimedOut(JID, T0, 10**6, 2, True))  # not the current attempt
    with pytest.raises(ValueError):
        evolve(job, "Completed")  # type: ignore[arg-type]
    done = evolve(job, Completed(JID, T0, 10**6, b""))
    with pytest.raises(ValueError):
        evolve(done, Failed(JID, T0, 10**6 + 1, b""))  # final stays final
    with pytest.raises(ValueError):
        evolve(done, AttemptsExhausted(JID, T0, 10**6 + 1))


def test_apply_leaves_the_job_alone_unless_accepted():
    job = leased().job
    outcome, after = apply(job, Complete(JID, b""), T0, job.version)
    assert outcome == Ignored(ALREADY_APPLIED) and after is job
    outcome, after = apply(job, Add(JID, "q", 1, 1, b""), T0, job.version + 1)
    assert isinstance(outcome, Rejected) and after is job


# ---------------------------------------------------------------------- timer helpers


def test_next_deadline_and_due_commands():
    log = added()
    job = log.job
    assert next_deadline(job) == T0 + TTL
    assert due_commands(job, T0 + TTL - 1) == ()
    assert due_commands(job, T0 + TTL) == (Expire(JID),)
    event_of(log(StartAttempt(JID, 1), T0 + 10))
    job = log.job
    assert next_deadline(job) == T0 + 10 + TTR
    assert due_commands(job, T0 + 10 + TTR) == (TimeoutAttempt(JID, 1),)
    assert due_commands(job, T0 + TTL) == (TimeoutAttempt(JID, 1), Expire(JID))
    # a lease deadline after expiry: expiry comes first
    short = added(Add(JID, "q", TTR, 10, b""))
    event_of(short(StartAttempt(JID, 1), T0))
    assert short.job.expires_ms == T0 + 10 < short.job.lease_deadline_ms
    assert next_deadline(short.job) == T0 + 10


def test_run_job_deadlines():
    log = added(Add(JID, "q", TTR, 0, b""))
    assert next_deadline(log.job) is None and due_commands(log.job, 2**40) == ()
    event_of(log(StartAttempt(JID, 1), T0))
    assert next_deadline(log.job) == T0 + TTR


def test_due_commands_are_accepted_when_applied():
    log = leased(max_attempts=2)
    for command in due_commands(log.job, T0 + TTR):
        event_of(log(command, T0 + TTR))
    assert log.job.state is State.PENDING
    for command in due_commands(log.job, T0 + TTL):
        event_of(log(command, T0 + TTL))
    assert log.job is None


def test_outcomes_validate():
    with pytest.raises(ValueError):
        Accepted("event")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Rejected("Duplicate job")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Ignored(None)  # type: ignore[arg-type]
    assert Rejected(ClientError(DUPLICATE_JOB)) == Rejected(ClientError(DUPLICATE_JOB))
    assert Rejected(ClientError(DUPLICATE_JOB)) != Rejected(ClientError(DUPLICATE_RESULT))
    assert Rejected(NotFound()).error.reply == b"-NOT-FOUND\r\n"
    assert Rejected(ClientError(INVALID_TIME)).error.reply == b"-CLIENT-ERROR Invalid Time\r\n"
