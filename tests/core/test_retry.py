"""Failure groups and retry in the pure core (docs/workflows.md, "Failure groups and retry"): every
FAILED job is in exactly one group, a final fail's ``-group`` or the
group its fields give; ``retry`` (type 71) applies to a FAILED job only, under its id,
and a dependent failed because of a retried upstream is retried too."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import (
    ATTEMPTS_EXHAUSTED_GROUP,
    FAILED_GROUP,
    UPSTREAM_FAILED_GROUP,
    Accepted,
    Add,
    Complete,
    Depend,
    Fail,
    Job,
    Rejected,
    Retried,
    Retry,
    Schedule,
    StartAttempt,
    State,
    TimeoutAttempt,
    Upstream,
    UpstreamOutcome,
    UpstreamRetried,
    apply,
    decode_state,
    encode_state,
    failure_group,
    failure_time_ms,
    input_key,
    is_ready,
    is_scheduled_waiting,
    lease_order_key,
    ready_time_ms,
    shown_group,
    upstream_failure,
)
from eventq.core.batch import position
from eventq.core.followups import Notify
from eventq.core.step import step
from eventq.errors import NotFound
from support.core_strategies import FEW_IDS, histories

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
UP1 = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
UP2 = uuid.UUID("c9bf9e57-1685-4c89-bafb-ff5af830be8a")
T0 = 1_700_000_000_000
OK, FAILED = UpstreamOutcome.COMPLETED, UpstreamOutcome.FAILED


def run(*commands, job: Job | None = None, at: int = T0, offset: int = 100, step_ms: int = 10):
    """Apply ``commands`` in turn (``step_ms`` apart); every one must be accepted."""
    for n, command in enumerate(commands):
        outcome, job = apply(job, command, at + step_ms * n, position(offset + n))
        assert isinstance(outcome, Accepted), (command, outcome)
    return job


def notice(upstream, outcome, change, at_ms=T0, result=None, dependent=JID):
    return Upstream(dependent, position(100), upstream, outcome, change, at_ms, result)


# ----------------------------------------------------------------- failure groups


def test_a_final_fail_puts_the_job_in_its_group_and_the_block_shows_it():
    job = run(Add(JID, "q", 1000, 60_000, b""), StartAttempt(JID, 1), Fail(JID, b"x", "deploy-7"))
    assert job.state is State.FAILED and failure_group(job) == "deploy-7"
    assert shown_group(job) == "deploy-7" and job.group == "deploy-7"


def test_a_fail_without_group_is_in_failed_and_shows_no_group():
    job = run(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x"))
    assert (failure_group(job), shown_group(job), job.group) == (FAILED_GROUP, None, None)


def test_naming_a_built_in_group_is_allowed_and_hidden():
    named = run(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x", "failed"))
    plain = run(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x"))
    assert named == plain  # one record for one state
    exhausted = run(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x", "attempts-exhausted"))
    assert failure_group(exhausted) == ATTEMPTS_EXHAUSTED_GROUP and shown_group(exhausted) is None


def test_the_group_of_a_fail_that_leaves_fails_is_not_kept():
    job = run(Add(JID, "q", 1000, 60_000, b"", max_fails=2), StartAttempt(JID, 1),
              Fail(JID, b"again", "kept-not"), StartAttempt(JID, 2), Fail(JID, b"end"))
    assert job.state is State.FAILED and failure_group(job) == FAILED_GROUP


@pytest.mark.parametrize("how", ["lease over the limit", "last TTR passed"])
def test_attempts_used_up_are_attempts_exhausted_with_an_empty_result(how):
    add = Add(JID, "q", 5, 60_000, b"", max_attempts=1, max_fails=3)
    if how == "last TTR passed":
        job = run(add, StartAttempt(JID, 1), TimeoutAttempt(JID, 1))
    else:
        job = run(add, StartAttempt(JID, 1), Fail(JID, b"1"), StartAttempt(JID, 2))
    assert job.state is State.FAILED and job.result == b""
    assert failure_group(job) == ATTEMPTS_EXHAUSTED_GROUP and shown_group(job) is None


def test_an_upstream_ending_is_upstream_failed_and_shown():
    job = run(Add(JID, "q", 1000, 60_000, b"", after=(UP1,)),
              notice(UP1, UpstreamOutcome.DELETED, 5))
    assert failure_group(job) == UPSTREAM_FAILED_GROUP == shown_group(job)


@given(histories(max_steps=40))
@settings(max_examples=200, deadline=None)
def test_every_failed_job_is_in_exactly_one_group_and_no_other_is_in_any(steps):
    for _command, at, _offset, outcome, after in steps:
        if after is None:
            continue
        group = failure_group(after)
        assert (group is not None) is (after.state is State.FAILED)
        # Its failure time: the event its record holds, when it made the job FAILED.
        if isinstance(outcome, Accepted) and after.state is State.FAILED:
            event, job = decode_state(encode_state(outcome.event, after))
            assert failure_time_ms(job, event.at_ms) == at


def test_a_dependents_failure_time_stays_through_later_notices():
    job = run(Add(JID, "q", 1000, 60_000, b"", after=(UP1, UP2)),
              notice(UP1, FAILED, 5, result=b"f"), notice(UP2, OK, 6, result=b"r"), step_ms=1000)
    assert job.state is State.FAILED and failure_time_ms(job, T0 + 2000) == T0 + 1000


# -------------------------------------------------------------------------- retry

STATES_BUT_FAILED = [State.NEW, State.PENDING, State.LEASED, State.COMPLETED, State.WAITING]


@given(histories(max_steps=40), st.integers(0, 1000), st.sampled_from(FEW_IDS))
@settings(max_examples=200, deadline=None)
def test_a_retry_never_revives_a_job_that_is_not_failed(steps, delay, job_id):
    """Whatever state a history leaves a job in, a retry of one that is not FAILED
    (or absent) is ``-NOT-FOUND`` and changes nothing; of a FAILED one, it is the same
    job (id, name, payload, TTL deadline) run again from scratch."""
    jobs: dict[uuid.UUID, Job] = {}
    at, offset = T0, 0
    for command, at, offset, _outcome, after in steps:
        if after is None:
            jobs.pop(command.job_id, None)
        else:
            jobs[command.job_id] = after
    job = jobs.get(job_id)
    outcome, after = apply(job, Retry(job_id, delay), at + 1, offset + 1)
    if job is None or job.state is not State.FAILED:
        assert outcome == Rejected(NotFound()) and after is job
        return
    assert isinstance(outcome, Accepted) and isinstance(outcome.event, Retried)
    assert after is not None and after.state is State.NEW
    assert (after.id, after.name, after.payload, after.expires_ms, after.created_ms) == (
        job.id, job.name, job.payload, job.expires_ms, job.created_ms)
    assert (after.attempts, after.fails, after.returns, after.retry_ms) == (0, 0, 0, None)
    assert (after.result, after.result_ok, after.group, failure_group(after)) == (None,) * 4
    if delay:
        assert ready_time_ms(after) == at + 1 + delay and not is_ready(after, at + delay)
    else:
        assert is_ready(after, at + 1)


@pytest.mark.parametrize("state", STATES_BUT_FAILED)
def test_a_retry_of_each_other_state_is_not_found(state):
    add = Add(JID, "q", 1000, 60_000, b"", after=(UP1,) if state is State.WAITING else ())
    then = {
        State.NEW: (), State.PENDING: (StartAttempt(JID, 1), TimeoutAttempt(JID, 1)),
        State.LEASED: (StartAttempt(JID, 1),), State.COMPLETED: (Complete(JID, b""),),
        State.WAITING: (),
    }[state]  # fmt: skip
    job = run(add, *then, step_ms=2000)
    assert job.state is state
    assert apply(job, Retry(JID), T0 + 10**6, position(999)) == (Rejected(NotFound()), job)
    assert apply(None, Retry(JID), T0, position(1)) == (Rejected(NotFound()), None)


def test_a_retried_job_returns_to_its_place_in_lease_order():
    add = Add(JID, "q", 1000, 60_000, b"", priority=3, max_fails=2, backoff_ms=500)
    fresh = run(add)
    failed = run(StartAttempt(JID, 1), Fail(JID, b"1"), StartAttempt(JID, 2), Fail(JID, b"2"),
                 job=fresh, offset=101, step_ms=1000)
    assert failed.retry_ms is not None  # a backoff wait was its time
    retried = run(Retry(JID), job=failed, at=T0 + 10_000, offset=200)
    assert lease_order_key(retried) == lease_order_key(fresh) and is_ready(retried, T0 + 10_000)
    assert retried.expires_ms == fresh.expires_ms  # the TTL deadline does not change


def test_a_retry_with_a_delay_is_scheduled_until_then():
    failed = run(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x"))
    retried = run(Retry(JID, 5000), job=failed, at=T0 + 100, offset=200)
    assert ready_time_ms(retried) == T0 + 5100
    assert is_scheduled_waiting(retried, T0 + 5099) and is_ready(retried, T0 + 5100)


def test_a_retry_without_delay_of_a_job_scheduled_ahead_is_ready_and_keeps_its_time():
    failed = run(Schedule(JID, "q", 1000, 60_000, T0 + 50_000, b""), Fail(JID, b"x"))
    retried = run(Retry(JID), job=failed, at=T0 + 100, offset=200)
    assert retried.early and ready_time_ms(retried) == T0 + 50_000
    assert is_ready(retried, T0 + 100) and not is_scheduled_waiting(retried, T0 + 100)
    # Leased and failed with fails left (no backoff): ready at once still.
    again = run(StartAttempt(JID, 1), job=retried, at=T0 + 200, offset=300)
    assert again.state is State.LEASED


def test_a_retried_job_tells_its_dependents_it_is_unfinished_again():
    failed = run(Add(JID, "q", 1000, 60_000, b""), Fail(JID, b"x"))
    result = step(failed, Retry(JID), T0 + 100, position(200))
    assert result.then == Notify(JID, UpstreamOutcome.RETRIED, position(200), T0 + 100, name="q")


# ------------------------------------------------------------- dependents retried


def failed_dependent() -> Job:
    """A dependent of UP1 (completed) and UP2 (failed it)."""
    return run(Add(JID, "q", 1000, 60_000, b"", after=(UP1, UP2)),
               notice(UP1, OK, position(5), result=b"r"),
               notice(UP2, FAILED, position(7), result=b"f"))


def test_a_dependent_whose_upstreams_all_completed_is_new_at_once():
    job = run(Add(JID, "q", 1000, 60_000, b"", after=(UP1,)),
              notice(UP1, OK, position(5), at_ms=T0 - 50, result=b"r"),
              StartAttempt(JID, 1), Fail(JID, b"own"))
    retried = run(Retry(JID), job=job, at=T0 + 1000, offset=200)
    assert retried.state is State.NEW and retried.released_ms == T0 - 50
    delayed = run(Retry(JID, 10), job=job, at=T0 + 1000, offset=200)
    assert delayed.released_ms == T0 + 1010 and ready_time_ms(delayed) == T0 + 1010


def test_a_dependent_asks_a_failed_upstream_again_and_fails_again_at_once():
    job = failed_dependent()
    result = step(job, Retry(JID), T0 + 1000, position(200))
    retried = result.job
    assert retried.state is State.WAITING and failure_group(retried) is None
    # It asks UP2 again (a depend into its partition) and drops UP2's failed input.
    assert [f.command for f in result.follow_ups] == [
        Depend(UP2, JID, position(100), job.expires_ms)]
    assert result.side == ((input_key(JID, UP2), None),)
    # UP2, still FAILED, answers with the change that failed it: applied once more.
    again = run(notice(UP2, FAILED, position(7), result=b"f"), job=retried, at=T0 + 2000,
                offset=300)
    assert again.state is State.FAILED and again.group == UPSTREAM_FAILED_GROUP
    assert failure_time_ms(again, T0 + 2000) == T0 + 2000  # a new failure time
    # An older notice stays stale.
    stale = apply(retried, notice(UP2, FAILED, position(6), result=b"f"), T0, position(400))
    assert stale[1] is retried


def test_a_dependent_waits_for_a_deleted_upstream_after_a_retry():
    job = run(Add(JID, "q", 1000, 60_000, b"", after=(UP1,)),
              notice(UP1, UpstreamOutcome.DELETED, position(5)))
    result = step(job, Retry(JID), T0 + 1000, position(200))
    assert result.job.state is State.WAITING and result.side == ()
    assert [f.command.upstream for f in result.follow_ups] == [UP1]


def test_the_upstream_that_failed_a_dependent_retried_brings_it_back_waiting():
    job = failed_dependent()
    result = step(job, notice(UP2, UpstreamOutcome.RETRIED, position(9)), T0 + 500,
                  position(200))
    assert isinstance(result.outcome.event, UpstreamRetried)
    assert result.job.state is State.WAITING and result.job.attempts == 0
    assert result.side == ((input_key(JID, UP2), None),)  # unfinished again: no input
    # ... and it tells its own dependents in turn (the cascade, down the graph).
    assert result.then == Notify(JID, UpstreamOutcome.RETRIED, position(200), T0 + 500, name="q")


def test_a_dependent_with_another_ended_upstream_stays_failed_naming_it():
    job = run(Add(JID, "q", 1000, 60_000, b"", after=(UP1, UP2)),
              notice(UP2, FAILED, position(7), result=b"f"),
              notice(UP1, UpstreamOutcome.EVICTED, position(3)))
    assert job.result == upstream_failure(UP2, FAILED)
    result = step(job, notice(UP2, UpstreamOutcome.RETRIED, position(9)), T0 + 500,
                  position(200))
    after = result.job
    assert after.state is State.FAILED and after.group == UPSTREAM_FAILED_GROUP
    assert after.result == upstream_failure(UP1, UpstreamOutcome.EVICTED)
    assert after.finished_ms == job.finished_ms  # same failure time
    # Still FAILED: its dependents are told its new result (their inputs copy it).
    assert result.then == Notify(JID, FAILED, position(200), T0 + 500, after.result, name="q")


def test_a_dependent_failed_by_its_own_fail_is_not_retried_by_its_upstream():
    job = run(Add(JID, "q", 1000, 60_000, b"", after=(UP1,)), Fail(JID, b"own", "mine"),
              notice(UP1, FAILED, position(7), result=b"f"))
    after = run(notice(UP1, UpstreamOutcome.RETRIED, position(9)), job=job, at=T0 + 500,
                offset=200)
    assert after.state is State.FAILED and failure_group(after) == "mine"
