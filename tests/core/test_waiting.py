"""Workflows in the state machine (docs/workflows.md, "Dependencies"): the WAITING
column, the ``depend`` and ``upstream`` rows of the transition table, the evolutions
they decide, and what a dependent ``Job`` may hold. One rule per test."""

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
    REGISTERED,
    REGISTERED_FINISHED,
    STALE_ATTEMPT,
    STALE_NOTICE,
    TRANSITIONS,
    UPSTREAM_FAILED_GROUP,
    Accepted,
    Add,
    Added,
    CommandType,
    Complete,
    Completed,
    Delete,
    Deleted,
    Depend,
    Expire,
    Expired,
    Fail,
    FailCounted,
    Failed,
    Ignored,
    Import,
    Job,
    Link,
    Rejected,
    ReleaseAttempt,
    Released,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    Touch,
    Upstream,
    UpstreamFailed,
    UpstreamNoted,
    UpstreamOutcome,
    after_ids,
    apply,
    decide,
    due_commands,
    encode_state,
    evolve,
    is_ready,
    is_scheduled_waiting,
    lease_order_key,
    ready_time_ms,
    upstream_failure,
    waiting_count,
)
from eventq.core.machine import COLUMNS
from eventq.core.slim import project_state, slim_of
from eventq.core.timing import NOTHING, Since, advance
from eventq.errors import DUPLICATE_JOB, DUPLICATE_RESULT, INVALID_TIME, ClientError, NotFound
from eventq.limits import MAX_AFTER_IDS

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
U1 = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
U2 = uuid.UUID("c9bf9e57-1685-4c89-bafb-ff5af830be8a")
T0 = 1_700_000_000_000
TTR, TTL = 1_000, 60_000
ADDED_AT = 101  # the position of the add of every dependent below
OK, FAILED_, DELETED, EVICTED, RETRIED = (
    UpstreamOutcome.COMPLETED, UpstreamOutcome.FAILED, UpstreamOutcome.DELETED,
    UpstreamOutcome.EVICTED, UpstreamOutcome.RETRIED,
)  # fmt: skip


class Log:
    """Applies commands in order with increasing positions, like one partition."""

    def __init__(self, job: Job | None = None, offset: int = 100) -> None:
        self.job, self.offset = job, offset

    def __call__(self, command, at_ms: int = T0):
        self.offset += 1
        outcome, self.job = apply(self.job, command, at_ms, self.offset)
        if isinstance(outcome, Accepted):
            self.last = outcome
        return outcome


def event_of(outcome):
    assert isinstance(outcome, Accepted), outcome
    return outcome.event


def notice(upstream=U1, outcome=OK, change=7, at_ms=T0 - 50, created=ADDED_AT, result=None):
    if result is None and outcome in (OK, FAILED_):
        result = b"r-" + upstream.bytes[:2]
    return Upstream(JID, created, upstream, outcome, change, at_ms, result)


def dependent(*after: uuid.UUID, max_fails: int = 0, backoff_ms: int = 0, schedule_at=None):
    """A WAITING job of ``after`` (U1, U2 by default), added at position ``ADDED_AT``."""
    after = after or (U1, U2)
    log = Log()
    if schedule_at is None:
        command = Add(JID, "q", TTR, TTL, b"p", 0, 0, max_fails, backoff_ms, after)
    else:
        command = Schedule(JID, "q", TTR, TTL, schedule_at, b"p", 0, 0, max_fails, backoff_ms,
                           after)
    event_of(log(command))
    assert log.job.added_at == ADDED_AT
    return log


def released(*after: uuid.UUID) -> Log:
    log = dependent(*after)
    for n, upstream in enumerate(after or (U1, U2)):
        event_of(log(notice(upstream, change=10 + n)))
    assert log.job.state is State.NEW
    return log


def dependent_in(state: State) -> Log:
    """A dependent (upstreams U1 and U2) in ``state``, through real commands."""
    if state is State.WAITING:
        return dependent()
    log = released()
    if state is State.PENDING:
        event_of(log(StartAttempt(JID, 1)))
        event_of(log(ReleaseAttempt(JID, 1, State.PENDING)))
    elif state is State.LEASED:
        event_of(log(StartAttempt(JID, 1)))
    elif state is State.COMPLETED:
        event_of(log(Complete(JID, b"done")))
    elif state is State.FAILED:
        event_of(log(Fail(JID, b"bad")))
    assert log.job.state is state
    return log


# ------------------------------------------------------------------ add with after


def test_add_with_after_is_waiting_with_one_link_per_upstream_in_order():
    log = Log()
    event = event_of(log(Add(JID, "q", TTR, TTL, b"p", after=(U2, U1))))
    job = log.job
    assert isinstance(event, Added) and event.job == job
    assert job.state is State.WAITING and job.added_at == ADDED_AT == job.version
    assert job.upstreams == (Link(U2), Link(U1)) and after_ids(job) == (U2, U1)
    assert waiting_count(job) == 2 and job.released_ms is None and job.group is None
    assert job.expires_ms == T0 + TTL  # TTL from acceptance, as without -after


def test_a_waiting_job_is_never_ready_nor_scheduled():
    job = dependent().job
    for now in (T0 - 10**9, T0, T0 + 10**9):
        assert not is_ready(job, now) and not is_scheduled_waiting(job, now)


def test_schedule_with_after_keeps_its_time_and_ttl_from_it():
    log = dependent(U1, schedule_at=T0 + 5_000)
    job = log.job
    assert job.state is State.WAITING and job.scheduled_ms == T0 + 5_000
    assert job.expires_ms == T0 + 5_000 + TTL
    assert ready_time_ms(job) == T0 + 5_000 and not is_scheduled_waiting(job, T0)


def test_an_add_without_after_is_exactly_as_before():
    _, job = apply(None, Add(JID, "q", TTR, TTL, b"p"), T0, 5)
    assert job.state is State.NEW and job.upstreams == () and job.added_at is None


@pytest.mark.parametrize("after, error", [
    ((U1, U1), "twice"),
    ((JID,), "own upstream"),
    (tuple(uuid.UUID(int=n) for n in range(1, MAX_AFTER_IDS + 2)), "at most 100"),
    ([U1], "tuple"),
    (("16fd2706-8baf-433b-82eb-8c7fada847da",), "uuid.UUID"),
])  # fmt: skip
def test_after_is_checked_on_add_and_schedule(after, error):
    with pytest.raises(ValueError, match=error):
        Add(JID, "q", TTR, TTL, b"", after=after)
    with pytest.raises(ValueError, match=error):
        Schedule(JID, "q", TTR, TTL, T0, b"", after=after)


def test_after_takes_up_to_100_upstreams():
    after = tuple(uuid.UUID(int=n) for n in range(1, MAX_AFTER_IDS + 1))
    _, job = apply(None, Add(JID, "q", TTR, TTL, b"", after=after), T0, 5)
    assert after_ids(job) == after and waiting_count(job) == MAX_AFTER_IDS


# ------------------------------------------------------------- the WAITING column


def test_the_table_has_a_waiting_column_and_the_workflow_rows():
    assert State.WAITING in COLUMNS
    for ctype in CommandType:
        if ctype in COMMAND_CLASSES:  # a job's command (not a queue's, nor a recurrence's)
            assert (ctype, State.WAITING) in TRANSITIONS
    assert {(t, s) for t, s in TRANSITIONS if t is CommandType.DEPEND} == {
        (CommandType.DEPEND, s) for s in COLUMNS
    }  # fmt: skip


def test_add_schedule_and_import_of_a_waiting_job_are_duplicates():
    log = dependent()
    before = log.job
    assert log(Add(JID, "q", TTR, TTL, b"")) == Rejected(ClientError(DUPLICATE_JOB))
    assert log(Schedule(JID, "q", TTR, TTL, T0, b"")) == Rejected(ClientError(DUPLICATE_JOB))
    assert log(Schedule(JID, "q", TTR, 1, T0 - 10, b"")) == Rejected(ClientError(INVALID_TIME))
    snapshot = Import.from_job(apply(None, Add(JID, "q", TTR, TTL, b""), T0, 1)[1])
    assert log(snapshot) == Rejected(ClientError(DUPLICATE_JOB))
    assert log.job == before


def test_a_waiting_job_is_never_leased():
    log = dependent()
    before = log.job
    assert log(StartAttempt(JID, 1), T0 + 10**6) == Ignored(CLAIM_REFUSED)
    assert log(TimeoutAttempt(JID, 1)) == Ignored(STALE_ATTEMPT)
    assert log(ReleaseAttempt(JID, 1, State.NEW)) == Ignored(STALE_ATTEMPT)
    assert log.job == before


def test_touch_of_a_waiting_job_is_not_found():
    log = dependent()
    assert log(Touch(JID, 1)) == Rejected(NotFound())


def test_complete_of_a_waiting_job_completes_it_and_keeps_when():
    log = dependent()
    event = event_of(log(Complete(JID, b"done"), T0 + 3))
    job = log.job
    assert event == Completed(JID, T0 + 3, log.offset, b"done")
    assert job.state is State.COMPLETED and job.result == b"done" and job.result_ok
    assert (job.finished_at, job.finished_ms) == (log.offset, T0 + 3)
    assert waiting_count(job) == 2  # never released: its upstreams are still not COMPLETED
    assert log(Complete(JID, b"again")) == Rejected(ClientError(DUPLICATE_RESULT))


def test_a_fail_with_fails_left_keeps_a_waiting_job_waiting_without_backoff():
    log = dependent(max_fails=3, backoff_ms=500)
    assert event_of(log(Fail(JID, b"x"), T0 + 1)) == FailCounted(JID, T0 + 1, log.offset)
    job = log.job
    assert job.state is State.WAITING and job.fails == 1
    assert job.returns == 0 and job.retry_ms is None and job.result is None
    event_of(log(Fail(JID, b"y")))
    assert log.job.state is State.WAITING and log.job.fails == 2
    assert isinstance(event_of(log(Fail(JID, b"last"))), Failed)
    assert log.job.state is State.FAILED and log.job.fails == 3 and log.job.group is None


def test_a_final_fail_of_a_waiting_job_fails_it_in_the_default_group():
    log = dependent()
    assert isinstance(event_of(log(Fail(JID, b"no"), T0 + 2)), Failed)
    job = log.job
    assert job.state is State.FAILED and job.result == b"no" and job.group is None
    assert job.finished_ms == T0 + 2


def test_delete_removes_a_waiting_job():
    log = dependent()
    assert event_of(log(Delete(JID))) == Deleted(JID, T0, log.offset)
    assert log.job is None


def test_ttl_evicts_a_waiting_job():
    log = dependent()
    assert due_commands(log.job, T0 + TTL) == (Expire(JID),)
    assert log(Expire(JID), T0 + TTL - 1) == Ignored(NOT_YET_DUE)
    assert event_of(log(Expire(JID), T0 + TTL)) == Expired(JID, T0 + TTL, log.offset, True)
    assert log.job is None


# ---------------------------------------------------------------------- depend row


@pytest.mark.parametrize("state", [None, *State])
def test_a_depend_never_changes_the_upstream(state):
    """The upstream (here JID) is registered with; the registration is a record beside
    it (followups.py), told at once when the upstream is finished."""
    log = Log() if state is None else dependent_in(state)
    before = log.job
    depend = Depend(JID, uuid.UUID(int=9), 3, None)
    expected = REGISTERED_FINISHED if state in (State.COMPLETED, State.FAILED) else REGISTERED
    assert log(depend) == Ignored(expected)
    assert log.job == before


def test_a_depend_at_or_below_the_upstreams_version_was_applied():
    job = dependent().job
    assert decide(job, Depend(JID, U1, 3, None), T0, job.version) == Ignored(ALREADY_APPLIED)


def test_depend_is_checked():
    Depend(U1, JID, 0, None)
    with pytest.raises(ValueError, match="own upstream"):
        Depend(U1, U1, 0, None)
    with pytest.raises(ValueError):
        Depend(U1, JID, -1, None)
    with pytest.raises(ValueError):
        Depend(U1, JID, 0, 2**64)
    assert Depend(U1, JID, 0, None).job_id == U1  # applied in the upstream's partition


# -------------------------------------------------------------------- upstream row


def test_a_notice_to_an_absent_dependent_is_ignored():
    assert Log()(notice()) == Ignored(NO_SUCH_JOB)


def test_a_completed_upstream_is_recorded_and_the_dependent_waits_for_the_others():
    log = dependent()
    event = event_of(log(notice(U1, OK, change=7, at_ms=T0 - 50), T0 + 1))
    assert event == UpstreamNoted(JID, T0 + 1, log.offset, U1, OK, 7, T0 - 50)
    job = log.job
    assert job.state is State.WAITING and waiting_count(job) == 1
    assert job.upstreams == (Link(U1, OK, 7, T0 - 50), Link(U2))


def test_the_last_completed_upstream_releases_the_dependent_at_the_latest_completion():
    log = dependent()
    event_of(log(notice(U2, OK, change=9, at_ms=T0 - 10)))
    event = event_of(log(notice(U1, OK, change=7, at_ms=T0 - 50), T0 + 2))
    assert event == Released(JID, T0 + 2, log.offset, U1, OK, 7, T0 - 50)
    job = log.job
    assert job.state is State.NEW and job.released_ms == T0 - 10 == ready_time_ms(job)
    assert waiting_count(job) == 0 and is_ready(job, T0 + 2)
    # ordered by that time, like a scheduled job that woke
    plain = apply(None, Add(U1, "q", TTR, TTL, b""), T0 - 100, 3)[1]
    assert lease_order_key(plain) < lease_order_key(job)


def test_release_time_in_the_future_is_listed_as_scheduled():
    log = dependent(U1)
    event_of(log(notice(U1, OK, at_ms=T0 + 500), T0))
    assert is_scheduled_waiting(log.job, T0) and not is_ready(log.job, T0)
    assert is_ready(log.job, T0 + 500)


def test_a_scheduled_dependent_is_released_no_earlier_than_its_time():
    log = dependent(U1, schedule_at=T0 + 5_000)
    event_of(log(notice(U1, OK, at_ms=T0 - 50)))
    assert log.job.released_ms == T0 + 5_000 and ready_time_ms(log.job) == T0 + 5_000
    log = dependent(U1, schedule_at=T0 - 5_000)
    event_of(log(notice(U1, OK, at_ms=T0 - 50)))
    assert log.job.released_ms == T0 - 50


@pytest.mark.parametrize("outcome", [FAILED_, DELETED, EVICTED])
def test_an_upstream_ending_without_completing_fails_a_waiting_dependent(outcome):
    log = dependent()
    event_of(log(notice(U1, OK, change=3)))
    event = event_of(log(notice(U2, outcome, change=4), T0 + 9))
    assert event == UpstreamFailed(JID, T0 + 9, log.offset, U2, outcome, 4, T0 - 50)
    job = log.job
    assert job.state is State.FAILED and job.group == UPSTREAM_FAILED_GROUP
    assert job.result == b"upstream c9bf9e57-1685-4c89-bafb-ff5af830be8a " + outcome.word.encode()
    assert job.result_ok is False and job.fails == 0 and job.attempts == 0
    assert (job.finished_at, job.finished_ms) == (log.offset, T0 + 9)
    assert job.upstreams[1] == Link(U2, outcome, 4)
    assert waiting_count(job) == 1  # never released: U2 is not COMPLETED


def test_the_failure_result_is_52_bytes_as_the_spec_shows():
    assert upstream_failure(U1, FAILED_) == b"upstream 16fd2706-8baf-433b-82eb-8c7fada847da failed"
    assert len(upstream_failure(U1, FAILED_)) == 52


def test_a_retried_upstream_is_unfinished_again():
    log = dependent()
    event_of(log(notice(U1, OK, change=3)))
    event = event_of(log(notice(U1, RETRIED, change=5)))
    assert isinstance(event, UpstreamNoted) and event.outcome is RETRIED
    assert log.job.upstreams[0] == Link(U1, UpstreamOutcome.UNFINISHED, 5)
    assert log.job.state is State.WAITING and waiting_count(log.job) == 2
    event_of(log(notice(U1, OK, change=6)))  # finishes again: recorded anew
    assert log.job.upstreams[0].outcome is OK


@pytest.mark.parametrize("state", [State.NEW, State.PENDING, State.LEASED, State.COMPLETED,
                                   State.FAILED])  # fmt: skip
@pytest.mark.parametrize("outcome", [OK, FAILED_, DELETED, EVICTED, RETRIED])
def test_a_notice_to_a_dependent_not_waiting_is_recorded_only(state, outcome):
    log = dependent_in(state)
    before = log.job
    event = event_of(log(notice(U1, outcome, change=99)))
    assert isinstance(event, UpstreamNoted)
    job = log.job
    assert dataclasses.replace(job, upstreams=before.upstreams, version=before.version) == before
    expected = UpstreamOutcome.UNFINISHED if outcome is RETRIED else outcome
    assert job.upstreams[0].outcome is expected and job.upstreams[0].change == 99
    assert job.upstreams[1] == before.upstreams[1]


@pytest.mark.parametrize("stale", [
    notice(created=ADDED_AT + 1),  # for another job of this id
    notice(created=ADDED_AT - 1),
    notice(upstream=uuid.UUID(int=77)),  # not one of its upstreams
])  # fmt: skip
@pytest.mark.parametrize("state", list(State))
def test_a_notice_for_another_job_or_upstream_is_stale(stale, state):
    log = dependent_in(state)
    before = log.job
    assert log(stale) == Ignored(STALE_NOTICE)
    assert log.job == before


@pytest.mark.parametrize("state", list(State))
def test_a_notice_not_after_the_last_from_its_upstream_is_stale(state):
    log = dependent_in(state)
    last = log.job.upstreams[0].change  # 10 (released) or None (waiting)
    event_of(log(notice(U1, OK, change=20)))
    before = log.job
    for change in (20, 19, 0, *([] if last is None else [last])):
        for outcome in (OK, FAILED_, DELETED, RETRIED):
            assert log(notice(U1, outcome, change=change)) == Ignored(STALE_NOTICE)
    assert log.job == before


def test_a_notice_at_or_below_the_dependents_version_was_applied():
    job = dependent().job
    assert decide(job, notice(), T0, job.version) == Ignored(ALREADY_APPLIED)


def test_a_notice_to_a_job_without_upstreams_is_stale():
    _, job = apply(None, Add(JID, "q", TTR, TTL, b""), T0, ADDED_AT)
    assert decide(job, notice(), T0, ADDED_AT + 1) == Ignored(STALE_NOTICE)


@pytest.mark.parametrize("outcome, result, error", [
    (OK, None, "result must be bytes"),
    (FAILED_, None, "result must be bytes"),
    (DELETED, b"", "carries no result"),
    (RETRIED, b"x", "carries no result"),
    (UpstreamOutcome.UNFINISHED, None, "outcome must be one of"),
    (True, None, "outcome must be one of"),
    (9, None, "outcome must be one of"),
])  # fmt: skip
def test_upstream_is_checked(outcome, result, error):
    with pytest.raises(ValueError, match=error):
        Upstream(JID, 0, U1, outcome, 0, T0, result)


def test_upstream_is_applied_in_the_dependents_partition():
    assert notice().job_id == JID
    with pytest.raises(ValueError, match="own upstream"):
        Upstream(JID, 0, JID, DELETED, 0, T0)


# -------------------------------------------------------------------- evolutions


def test_evolutions_refuse_what_the_table_would_never_decide():
    waiting, new = dependent().job, released().job
    with pytest.raises(ValueError, match="cannot apply to a NEW"):
        evolve(new, Released(JID, T0, 999, U1, OK, 50, T0))
    with pytest.raises(ValueError, match="cannot apply to a NEW"):
        evolve(new, UpstreamFailed(JID, T0, 999, U1, FAILED_, 50, T0))
    with pytest.raises(ValueError, match="cannot apply to a NEW"):
        evolve(new, FailCounted(JID, T0, 999))
    with pytest.raises(ValueError, match="not an upstream"):
        evolve(waiting, UpstreamNoted(JID, T0, 999, uuid.UUID(int=5), OK, 50, T0))
    with pytest.raises(ValueError, match="not COMPLETED"):
        evolve(waiting, Released(JID, T0, 999, U1, OK, 50, T0))  # U2 is not completed
    with pytest.raises(ValueError):
        UpstreamFailed(JID, T0, 999, U1, OK, 50, T0)
    with pytest.raises(ValueError):
        Released(JID, T0, 999, U1, FAILED_, 50, T0)


# --------------------------------------------------------------- the Job's rules


def waiting_job(**changes) -> Job:
    return dataclasses.replace(dependent().job, **changes)


@pytest.mark.parametrize("changes, error", [
    (dict(upstreams=()), "WAITING job has upstreams"),
    (dict(upstreams=[Link(U1)]), "tuple"),
    (dict(upstreams=(Link(U1), Link(U1))), "named twice"),
    (dict(upstreams=(Link(JID),)), "own upstream"),
    (dict(upstreams=(U1,)), "must be a Link"),
    (dict(added_at=None), "added_at must be an int"),
    (dict(added_at=ADDED_AT + 1), "added_at must be in"),
    (dict(released_ms=T0), "WAITING job is not released"),
    (dict(group="upstream-failed"), "only in FAILED"),
    (dict(group="bad group"), "group must be"),
    (dict(finished_at=ADDED_AT, finished_ms=T0), "only in final states"),
    (dict(upstreams=tuple(Link(uuid.UUID(int=n)) for n in range(1, 102))), "at most 100"),
])  # fmt: skip
def test_a_dependent_holds_only_what_the_rules_make(changes, error):
    with pytest.raises(ValueError, match=error):
        waiting_job(**changes)


def test_a_job_without_upstreams_has_no_workflow_fields():
    job = apply(None, Add(JID, "q", TTR, TTL, b""), T0, 5)[1]
    for changes in (dict(added_at=5), dict(released_ms=T0), dict(finished_ms=T0)):
        with pytest.raises(ValueError, match="only for a job with upstreams"):
            dataclasses.replace(job, **changes)


def test_a_finished_dependent_keeps_when_it_finished():
    job = dependent_in(State.COMPLETED).job
    assert job.finished_at == job.version and job.finished_ms == T0
    with pytest.raises(ValueError, match="finished_at must be an int"):
        dataclasses.replace(job, finished_at=None)


@pytest.mark.parametrize("fields, error", [
    ((U1, OK, None, T0), "has the position of its change"),
    ((U1, OK, 3, None), "completed_ms must be an int"),
    ((U1, FAILED_, 3, T0), "only for a COMPLETED"),
    ((U1, RETRIED, 3, None), "cannot be RETRIED"),
    ((U1, 9, 3, None), "must be an UpstreamOutcome"),
    ((U1, UpstreamOutcome.UNFINISHED, -1, None), "change must be in"),
])  # fmt: skip
def test_a_link_holds_what_a_notice_leaves(fields, error):
    with pytest.raises(ValueError, match=error):
        Link(*fields)


def test_a_dependent_has_no_import_snapshot():
    with pytest.raises(ValueError, match="cannot be imported"):
        Import.from_job(dependent().job)


# ------------------------------------------------------------ the other views


@pytest.mark.parametrize("state", list(State))
def test_the_slim_projection_of_a_dependent_has_its_release_time(state):
    log = dependent_in(state)
    record = encode_state(log.last.event, log.job)
    assert project_state(record) == slim_of(log.job)
    if log.job.released_ms is not None:
        assert slim_of(log.job).scheduled_ms == log.job.released_ms


def test_a_dependent_is_not_ready_until_released_for_the_wait_times():
    log = dependent(U1)
    added = advance(NOTHING, event_of(Log()(Add(JID, "q", TTR, TTL, b"p", after=(U1,)))), None,
                    log.job, T0)  # fmt: skip
    assert added.since == NOTHING
    waiting = log.job
    event = event_of(log(notice(U1, OK, at_ms=T0 - 7), T0 + 3))
    assert advance(NOTHING, event, waiting, log.job, T0 + 3).since == Since(T0 - 7, None)
