"""A job's own transitions: how ``add``, ``schedule``, ``import``, a lease's attempts,
``touch``, ``complete``, ``fail``, ``delete`` and ``expire`` are decided, and how their
events change a job (the entries of eventq/core/machine.py's tables, which alone name
them: hence their leading underscore).

Import (``commands.Import``, eventq's extension type 64) installs a complete job
snapshot: on an absent job it is accepted as ``Imported`` with the snapshot as given
(``version`` = offset); on any existing job it is ``Duplicate job`` (so re-running an
import is harmless and never overwrites newer state). A snapshot whose TTL has already
passed at the command's broker time (``expires_ms <= at_ms``, the same test as
``expire``) is ``Ignored(EXPIRED_BEFORE_IMPORT)``: nothing is stored, as if the timer
had expired it at once, and nobody waits for an import's reply to be told. Import is
idempotent like the rest: a re-read import of a present job is ``ALREADY_APPLIED``,
of an absent one is decided the same way again.
"""

from __future__ import annotations

from typing import Any

from eventq.core.commands import (
    Add,
    Command,
    Complete,
    Expire,
    Fail,
    Import,
    ReleaseAttempt,
    Schedule,
    StartAttempt,
    TimeoutAttempt,
    Touch,
)
from eventq.core.events import (
    Added,
    AttemptReleased,
    AttemptsExhausted,
    AttemptStarted,
    AttemptTimedOut,
    Completed,
    Deleted,
    Event,
    Expired,
    Failed,
    FailRetried,
    Imported,
    Touched,
)
from eventq.core.job import (
    FINAL_STATES,
    Job,
    Link,
    State,
    attempt_limit,
    deadline_after,
    is_final,
    is_ready,
    job_with,
    make_job,
    retry_wait_ms,
    stored_group,
    within_ttl,
)
from eventq.core.outcomes import (
    CLAIM_REFUSED,
    EXPIRED_BEFORE_IMPORT,
    NOT_YET_DUE,
    OTHER_CLAIM,
    STALE_ATTEMPT,
    Accepted,
    Ignored,
    Outcome,
    Rejected,
)
from eventq.errors import DUPLICATE_JOB, DUPLICATE_RESULT, INVALID_TIME, ClientError, NotFound
from eventq.limits import MAX_TIME_MS

# ------------------------------------------------------------------- decide handlers


def _new_job(c: Add | Schedule, scheduled_ms: int | None, at_ms: int, offset: int) -> Job:
    if c.ttl_ms == 0:
        expires_ms = None
    else:
        start = at_ms if scheduled_ms is None else scheduled_ms
        expires_ms = deadline_after(start, c.ttl_ms)
    workflow: dict[str, Any] = {}
    if c.after:  # a dependent: WAITING, one link per upstream, in -after order
        workflow = dict(state=State.WAITING, upstreams=tuple(map(Link, c.after)), added_at=offset,
                        scope=c.scope)
    return make_job(
        dict(
            id=c.job_id,
            name=c.name,
            ttr_ms=c.ttr_ms,
            ttl_ms=c.ttl_ms,
            payload=c.payload,
            priority=c.priority,
            max_attempts=c.max_attempts,
            max_fails=c.max_fails,
            attempts=0,
            fails=0,
            state=State.NEW,
            created_ms=at_ms,
            scheduled_ms=scheduled_ms,
            expires_ms=expires_ms,
            lease_deadline_ms=None,
            result=None,
            result_ok=None,
            version=offset,
            backoff_ms=c.backoff_ms,
            tags=c.tags,
        )
        | workflow
    )


def _add(job: Job | None, c: Add, at_ms: int, offset: int) -> Outcome:
    return Accepted(Added(c.job_id, at_ms, offset, _new_job(c, None, at_ms, offset)))


def _schedule_time_invalid(c: Schedule, at_ms: int) -> bool:
    """The TTL would end at or before acceptance (a past ``time`` alone is fine)."""
    return c.time_ms + c.ttl_ms <= at_ms


def _schedule(job: Job | None, c: Schedule, at_ms: int, offset: int) -> Outcome:
    if _schedule_time_invalid(c, at_ms):
        return Rejected(ClientError(INVALID_TIME))
    return Accepted(Added(c.job_id, at_ms, offset, _new_job(c, c.time_ms, at_ms, offset)))


def _schedule_existing(job: Job | None, c: Schedule, at_ms: int, offset: int) -> Outcome:
    # Fields are checked before state (docs/protocol.md, "Errors").
    if _schedule_time_invalid(c, at_ms):
        return Rejected(ClientError(INVALID_TIME))
    return Rejected(ClientError(DUPLICATE_JOB))


def _duplicate_job(job: Job | None, c: Command, at_ms: int, offset: int) -> Outcome:
    return Rejected(ClientError(DUPLICATE_JOB))


def _duplicate_result(job: Job | None, c: Command, at_ms: int, offset: int) -> Outcome:
    return Rejected(ClientError(DUPLICATE_RESULT))


def _not_found(job: Job | None, c: Command, at_ms: int, offset: int) -> Outcome:
    return Rejected(NotFound())


def _import(job: Job | None, c: Import, at_ms: int, offset: int) -> Outcome:
    if c.expires_ms is not None and at_ms >= c.expires_ms:
        return Ignored(EXPIRED_BEFORE_IMPORT)
    return Accepted(Imported(c.job_id, at_ms, offset, c.to_job(offset)))


def _start_attempt(job: Job | None, c: StartAttempt, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if not (is_ready(job, at_ms) and within_ttl(job, at_ms)) or job.attempts != c.attempt - 1:
        return Ignored(CLAIM_REFUSED)
    if c.attempt > attempt_limit(job):
        return Accepted(AttemptsExhausted(c.job_id, at_ms, offset))
    deadline = deadline_after(at_ms, job.ttr_ms)
    return Accepted(AttemptStarted(c.job_id, at_ms, offset, c.attempt, deadline))


def _timeout_attempt(job: Job | None, c: TimeoutAttempt, at_ms: int, offset: int) -> Outcome:
    assert job is not None and job.lease_deadline_ms is not None
    if job.attempts != c.attempt:
        return Ignored(STALE_ATTEMPT)
    if at_ms < job.lease_deadline_ms:
        return Ignored(NOT_YET_DUE)
    requeued = job.attempts < attempt_limit(job)
    return Accepted(AttemptTimedOut(c.job_id, at_ms, offset, c.attempt, requeued))


def _release_attempt(job: Job | None, c: ReleaseAttempt, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if job.attempts != c.attempt:
        return Ignored(STALE_ATTEMPT)
    if c.claim is not None and job.version != c.claim:  # not as that claim left it
        return Ignored(OTHER_CLAIM)
    return Accepted(AttemptReleased(c.job_id, at_ms, offset, c.attempt, c.state))


def _touch(job: Job | None, c: Touch, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if job.attempts != c.attempt:  # another attempt holds the job now: not this lease
        return Rejected(NotFound())
    deadline = deadline_after(at_ms, job.ttr_ms if c.ttr_ms is None else c.ttr_ms)
    return Accepted(Touched(c.job_id, at_ms, offset, c.attempt, deadline))


def _complete(job: Job | None, c: Complete, at_ms: int, offset: int) -> Outcome:
    return Accepted(Completed(c.job_id, at_ms, offset, c.result))


def _fail(job: Job | None, c: Fail, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if job.fails + 1 < job.max_fails:  # fails left: the fail's group is not kept
        return Accepted(FailRetried(c.job_id, at_ms, offset))
    return Accepted(Failed(c.job_id, at_ms, offset, c.result, c.group))


def _delete(job: Job | None, c: Command, at_ms: int, offset: int) -> Outcome:
    return Accepted(Deleted(c.job_id, at_ms, offset))


def _expire(job: Job | None, c: Expire, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if job.expires_ms is None or at_ms < job.expires_ms:
        return Ignored(NOT_YET_DUE)
    return Accepted(Expired(c.job_id, at_ms, offset, evicted=not is_final(job)))


# -------------------------------------------------------------------- evolve functions


def _next(
    job: Job,
    event: Event,
    state: State,
    attempts: int,
    fails: int,
    lease_deadline_ms: int | None,
    result: bytes | None,
    result_ok: bool | None,
) -> Job:
    """``job`` with the fields an event may change (the rest is fixed at creation,
    but for a return to PENDING: see ``_returned``). A dependent keeps the position and
    time of the change that made it final (its later notices carry them)."""
    if job.upstreams and state in FINAL_STATES:
        return job_with(
            job, attempts=attempts, fails=fails, state=state, lease_deadline_ms=lease_deadline_ms,
            result=result, result_ok=result_ok, version=event.offset,
            finished_at=event.offset, finished_ms=event.at_ms,
        )  # fmt: skip
    return job_with(
        job, attempts=attempts, fails=fails, state=state, lease_deadline_ms=lease_deadline_ms,
        result=result, result_ok=result_ok, version=event.offset,
    )  # fmt: skip


def _returned(job: Job, event: Event, fails: int) -> Job:
    """``job`` back to PENDING (a fail with fails left, or a TTR timeout with attempts
    left). With a backoff it waits backoff x 2^(r-1) from now, r counting this return
    (docs/protocol.md, "eventq extensions", -backoff); without, it is ready at once, at its old place."""
    if not job.backoff_ms:
        return _next(job, event, State.PENDING, job.attempts, fails, None, None, None)
    returns = job.returns + 1
    retry_ms = min(event.at_ms + retry_wait_ms(job.backoff_ms, returns), MAX_TIME_MS)
    return job_with(
        job, fails=fails, state=State.PENDING, lease_deadline_ms=None, result=None,
        result_ok=None, version=event.offset, returns=returns, retry_ms=retry_ms,
    )  # fmt: skip


def _completed(job: Job, e: Completed) -> Job:
    return _next(job, e, State.COMPLETED, job.attempts, job.fails, None, e.result, True)


def _failed(job: Job, e: Failed) -> Job:
    failed = _next(job, e, State.FAILED, job.attempts, job.fails + 1, None, e.result, False)
    group = stored_group(failed, e.group)
    return failed if group is None else job_with(failed, group=group)


def _fail_retried(job: Job, e: FailRetried) -> Job:
    return _returned(job, e, job.fails + 1)


def _attempt_started(job: Job, e: AttemptStarted) -> Job:
    if job.attempts != e.attempt - 1:
        raise ValueError(f"attempt {e.attempt} cannot follow attempt {job.attempts}")
    return _next(job, e, State.LEASED, e.attempt, job.fails, e.deadline_ms, None, None)


def _attempts_exhausted(job: Job, e: AttemptsExhausted) -> Job:
    if job.attempts != attempt_limit(job):
        raise ValueError(f"attempts are not exhausted: {job.attempts} of {attempt_limit(job)}")
    return _next(job, e, State.FAILED, job.attempts, job.fails, None, b"", False)


def _attempt_timed_out(job: Job, e: AttemptTimedOut) -> Job:
    if job.attempts != e.attempt:
        raise ValueError(f"attempt {e.attempt} is not the current attempt {job.attempts}")
    if e.requeued:
        return _returned(job, e, job.fails)
    return _next(job, e, State.FAILED, job.attempts, job.fails, None, b"", False)


def _attempt_released(job: Job, e: AttemptReleased) -> Job:
    if job.attempts != e.attempt:
        raise ValueError(f"attempt {e.attempt} is not the current attempt {job.attempts}")
    return _next(job, e, e.state, job.attempts - 1, job.fails, None, None, None)


def _touched(job: Job, e: Touched) -> Job:
    if job.attempts != e.attempt:
        raise ValueError(f"attempt {e.attempt} is not the current attempt {job.attempts}")
    return _next(job, e, State.LEASED, job.attempts, job.fails, e.deadline_ms, None, None)


def _removed(job: Job, e: Event) -> None:
    return None
