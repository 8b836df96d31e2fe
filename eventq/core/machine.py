"""The transition rules: ``decide`` a command against a job, ``evolve`` a job by an event.

Both are pure: the broker time of the command (``at_ms``) and its log ``offset`` are
passed in. ``offset`` is the command's *position* (eventq/core/batch.py): record offset
and index within a batch record as one growing integer; "offset" below means it. The
rules are data: ``TRANSITIONS`` maps (command type, job state) to the handler that
decides, and ``EVOLUTIONS`` maps an event type to the states it may apply
to and the function that applies it. Nothing else branches on states.

Idempotency. Commands are applied at least once (after a crash the uncommitted tail of
a partition is read again), so every decision is a function of (job, command, offset):

- For a present job, ``offset <= job.version`` means the command's effect is already in
  the state (``version`` is the offset of the last command applied to the job, and one
  partition is read in offset order): ``Ignored(ALREADY_APPLIED)``.
- For an absent job the core cannot tell "never existed" from "deleted at a later
  offset" (a re-read ``add`` after a ``delete`` would otherwise bring the job back).
  The processor must therefore keep a per-partition watermark, the offset of the last
  command it applied in that partition (stored atomically with the table), and skip
  every command at or below it before calling ``decide``. ``version`` then makes the
  per-job check cheap and self-evident in the stored state, and lets state-log replays
  verify that versions only grow.

Workflows (docs/workflows.md, "Dependencies"). An add or schedule with ``after`` makes a
WAITING job (state 5), never leased; ``complete`` and ``fail`` apply to it as to any
non-final job, but a fail with fails left keeps it WAITING (``FailCounted``, no backoff
wait); touch is ``-NOT-FOUND``. The workflow commands are rows of the table too:
``Depend`` (69) never changes the upstream it is applied to: it is ``Ignored`` as
``REGISTERED`` (or ``REGISTERED_FINISHED`` when the upstream is COMPLETED or FAILED,
which it is told at once), and the registration beside the job is what
eventq/core/followups.py makes of it. ``Upstream`` (70) is applied to the dependent
it names, created at ``dependent_created`` (its ``added_at``), and only when its
``change`` is after the last change applied from that upstream (else
``STALE_NOTICE``): recorded in the link (``UpstreamNoted``), releasing a WAITING job
whose last upstream completed (``Released``: NEW), or failing one whose upstream ended
without completing (``UpstreamFailed``). Positions of an upstream's changes grow (one
upstream's commands are all in one partition), so a repeated notice is ignored.

Failure groups and retry (docs/workflows.md, "Failure groups and retry"). A final
``fail`` puts the job in its ``-group`` (``Failed.group``; the job's ``group`` keeps it
unless it is the one its fields give, job.failure_group). ``Retry`` (71) applies to a
FAILED job only (``-NOT-FOUND`` otherwise): ``Retried`` makes it NEW, or WAITING while an
upstream is not COMPLETED, asking again the upstreams it knew ended (``asked_again``).
A notice that the upstream which failed a FAILED dependent was retried retries the
dependent too (``UpstreamRetried``), and its own retry tells its dependents in turn.

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

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from eventq.core._check import check_int
from eventq.core.commands import (
    COMMAND_CLASSES,
    Add,
    Command,
    CommandType,
    Complete,
    Delete,
    Depend,
    Expire,
    Fail,
    Import,
    ReleaseAttempt,
    Retry,
    Schedule,
    StartAttempt,
    TimeoutAttempt,
    Touch,
    Upstream,
)
from eventq.core.events import (
    EVENT_CLASSES,
    Added,
    AttemptReleased,
    AttemptsExhausted,
    AttemptStarted,
    AttemptTimedOut,
    Completed,
    Deleted,
    Event,
    EventType,
    Expired,
    FailCounted,
    Failed,
    FailRetried,
    Imported,
    Released,
    Retried,
    Touched,
    UpstreamFailed,
    UpstreamNoted,
    UpstreamRetried,
)
from eventq.core.job import (
    ENDED_UNCOMPLETED,
    FINAL_STATES,
    UPSTREAM_FAILED_GROUP,
    Job,
    Link,
    State,
    UpstreamOutcome,
    attempt_limit,
    deadline_after,
    is_final,
    is_ready,
    job_with,
    link_of,
    link_outcome,
    make_job,
    ready_time_ms,
    retry_wait_ms,
    stored_group,
    upstream_failure,
)
from eventq.errors import (
    DUPLICATE_JOB,
    DUPLICATE_RESULT,
    INVALID_TIME,
    ClientError,
    EventqError,
    NotFound,
)
from eventq.limits import MAX_OFFSET, MAX_TIME_MS, MIN_TIME_MS

_COMMAND_TYPES = tuple(COMMAND_CLASSES.values())
_EVENT_TYPES = tuple(EVENT_CLASSES.values())

# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Accepted:
    """The command changes the job: ``event`` says how (fold it with ``evolve``)."""

    event: Event

    def __post_init__(self) -> None:
        if not isinstance(self.event, _EVENT_TYPES):
            raise ValueError(f"not an event: {self.event!r:.100}")


@dataclass(frozen=True, slots=True)
class Rejected:
    """The command is refused; ``error`` is the reply for whoever issued it."""

    error: EventqError

    def __post_init__(self) -> None:
        if not isinstance(self.error, EventqError):
            raise ValueError(f"not an EventqError: {self.error!r:.100}")


@dataclass(frozen=True, slots=True)
class Ignored:
    """No state change and nobody to tell (duplicate delivery, stale claim or timer)."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            raise ValueError(f"reason must be a str, got {type(self.reason).__name__}")


Outcome: TypeAlias = Accepted | Rejected | Ignored

# Reasons of Ignored outcomes.
ALREADY_APPLIED = "already applied"  # offset <= job.version
NO_SUCH_JOB = "no such job"  # a timer or claim for a job that is gone
CLAIM_REFUSED = "claim refused"  # start-attempt on a job not ready at that attempt
STALE_ATTEMPT = "stale attempt"  # timeout-attempt for an attempt that is not current
OTHER_CLAIM = "other claim"  # a give-back of a claim that did not start this attempt
NOT_YET_DUE = "not yet due"  # a timer fired before the deadline (by the broker's clock)
EXPIRED_BEFORE_IMPORT = "expired before import"  # an import whose TTL passed at at_ms
REGISTERED = "registered"  # a depend: the upstream is unchanged (followups.py registers)
REGISTERED_FINISHED = "registered, upstream finished"  # ... and told at once of its end
STALE_NOTICE = "stale notice"  # an upstream notice for another creation, or not newer

# ------------------------------------------------------------------- decide handlers

# The command is Any: each handler takes the command type of its row of TRANSITIONS, a
# pairing the table makes and the type system cannot state.
Handler: TypeAlias = Callable[[Job | None, Any, int, int], Outcome]


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


def _ignore(reason: str) -> Handler:
    outcome = Ignored(reason)

    def handler(job: Job | None, c: Command, at_ms: int, offset: int) -> Outcome:
        return outcome

    handler.__name__ = f"_ignore_{reason.replace(' ', '_')}"
    return handler


def _import(job: Job | None, c: Import, at_ms: int, offset: int) -> Outcome:
    if c.expires_ms is not None and at_ms >= c.expires_ms:
        return Ignored(EXPIRED_BEFORE_IMPORT)
    return Accepted(Imported(c.job_id, at_ms, offset, c.to_job(offset)))


def _start_attempt(job: Job | None, c: StartAttempt, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if not is_ready(job, at_ms) or job.attempts != c.attempt - 1:
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


def _fail_waiting(job: Job | None, c: Fail, at_ms: int, offset: int) -> Outcome:
    """A WAITING job's fail: with fails left it stays WAITING, counted (spec)."""
    assert job is not None
    if job.fails + 1 < job.max_fails:
        return Accepted(FailCounted(c.job_id, at_ms, offset))
    return Accepted(Failed(c.job_id, at_ms, offset, c.result, c.group))


def _retry(job: Job | None, c: Retry, at_ms: int, offset: int) -> Outcome:
    """retry of a FAILED job (any other state is ``-NOT-FOUND``: the grid)."""
    return Accepted(Retried(c.job_id, at_ms, offset, c.delay_ms))


def _stale_notice(job: Job, c: Upstream) -> bool:
    """A notice for another job of this id, or not after the last from its upstream."""
    if job.added_at != c.dependent_created:
        return True
    link = link_of(job, c.upstream)
    return link is None or (link.change is not None and c.change <= link.change)


def _upstream_noted(job: Job | None, c: Upstream, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if _stale_notice(job, c):
        return Ignored(STALE_NOTICE)
    return Accepted(UpstreamNoted(c.dependent, at_ms, offset, c.upstream, c.outcome, c.change,
                                  c.at_ms))


def _failed_by(job: Job, upstream: uuid.UUID) -> bool:
    """The job is FAILED in ``upstream-failed`` because ``upstream`` failed (its result
    names it): a retry of that upstream retries it too (docs/workflows.md, retry)."""
    link = link_of(job, upstream)
    return (
        job.group == UPSTREAM_FAILED_GROUP and link is not None
        and link.outcome is UpstreamOutcome.FAILED
        and job.result == upstream_failure(upstream, link.outcome)
    )  # fmt: skip


def _upstream_final(job: Job | None, c: Upstream, at_ms: int, offset: int) -> Outcome:
    """A notice to a FAILED dependent: the upstream that failed it was retried (it is
    retried too: ``UpstreamRetried``), or any other (recorded)."""
    assert job is not None
    if _stale_notice(job, c):
        return Ignored(STALE_NOTICE)
    fields = (c.dependent, at_ms, offset, c.upstream, c.outcome, c.change, c.at_ms)
    if c.outcome is UpstreamOutcome.RETRIED and _failed_by(job, c.upstream):
        return Accepted(UpstreamRetried(*fields))
    return Accepted(UpstreamNoted(*fields))


def _upstream_waiting(job: Job | None, c: Upstream, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if _stale_notice(job, c):
        return Ignored(STALE_NOTICE)
    fields = (c.dependent, at_ms, offset, c.upstream, c.outcome, c.change, c.at_ms)
    if c.outcome in ENDED_UNCOMPLETED:
        return Accepted(UpstreamFailed(*fields))
    if c.outcome is UpstreamOutcome.COMPLETED and all(
        link.outcome is UpstreamOutcome.COMPLETED for link in job.upstreams if link.id != c.upstream
    ):
        return Accepted(Released(*fields))
    return Accepted(UpstreamNoted(*fields))


def _delete(job: Job | None, c: Command, at_ms: int, offset: int) -> Outcome:
    return Accepted(Deleted(c.job_id, at_ms, offset))


def _expire(job: Job | None, c: Expire, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if job.expires_ms is None or at_ms < job.expires_ms:
        return Ignored(NOT_YET_DUE)
    return Accepted(Expired(c.job_id, at_ms, offset, evicted=not is_final(job)))


# ------------------------------------------------------------------ the transition table

ABSENT = None  # the "state" of a job that is not in the table
COLUMNS: tuple[State | None, ...] = (
    ABSENT,
    State.NEW,
    State.PENDING,
    State.LEASED,
    State.COMPLETED,
    State.FAILED,
    State.WAITING,
)

_no_job = _ignore(NO_SUCH_JOB)
_registered = _ignore(REGISTERED)
_REGISTERED, _REGISTERED_FINISHED = Ignored(REGISTERED), Ignored(REGISTERED_FINISHED)


def _registered_finished(job: Job | None, c: Depend, at_ms: int, offset: int) -> Outcome:
    """A depend on a finished upstream, told at once of its end, unless the upstream's
    queue is outside the dependent's scope (docs/security.md: such an upstream is
    absent to it, so it is registered as if unfinished and never told: the dependent
    waits, deterministically, as every replay decides here)."""
    assert job is not None
    if c.scope is not None and not job.name.startswith(c.scope):
        return _REGISTERED
    return _REGISTERED_FINISHED

_refused = _ignore(CLAIM_REFUSED)
_stale = _ignore(STALE_ATTEMPT)

# fmt: off
_GRID: dict[CommandType, tuple[Handler, ...]] = {
    # command                    absent       NEW                 PENDING             LEASED              COMPLETED             FAILED                WAITING  # noqa: E501 (a row of the grid)
    CommandType.ADD:             (_add,       _duplicate_job,     _duplicate_job,     _duplicate_job,     _duplicate_job,       _duplicate_job,       _duplicate_job),      # noqa: E501 (a row of the grid)
    CommandType.SCHEDULE:        (_schedule,  _schedule_existing, _schedule_existing, _schedule_existing, _schedule_existing,   _schedule_existing,   _schedule_existing),  # noqa: E501 (a row of the grid)
    CommandType.START_ATTEMPT:   (_no_job,    _start_attempt,     _start_attempt,     _refused,           _refused,             _refused,             _refused),            # noqa: E501 (a row of the grid)
    CommandType.TIMEOUT_ATTEMPT: (_no_job,    _stale,             _stale,             _timeout_attempt,   _stale,               _stale,               _stale),              # noqa: E501 (a row of the grid)
    CommandType.COMPLETE:        (_not_found, _complete,          _complete,          _complete,          _duplicate_result,    _duplicate_result,    _complete),           # noqa: E501 (a row of the grid)
    CommandType.FAIL:            (_not_found, _fail,              _fail,              _fail,              _duplicate_result,    _duplicate_result,    _fail_waiting),       # noqa: E501 (a row of the grid)
    CommandType.DELETE:          (_not_found, _delete,            _delete,            _delete,            _delete,              _delete,              _delete),             # noqa: E501 (a row of the grid)
    CommandType.EXPIRE:          (_no_job,    _expire,            _expire,            _expire,            _expire,              _expire,              _expire),             # noqa: E501 (a row of the grid)
    CommandType.IMPORT:          (_import,    _duplicate_job,     _duplicate_job,     _duplicate_job,     _duplicate_job,       _duplicate_job,       _duplicate_job),      # noqa: E501 (a row of the grid)
    CommandType.RELEASE_ATTEMPT: (_no_job,    _stale,             _stale,             _release_attempt,   _stale,               _stale,               _stale),              # noqa: E501 (a row of the grid)
    CommandType.TOUCH:           (_not_found, _not_found,         _not_found,         _touch,             _not_found,           _not_found,           _not_found),          # noqa: E501 (a row of the grid)
    CommandType.DEPEND:          (_registered, _registered,       _registered,        _registered,        _registered_finished, _registered_finished, _registered),         # noqa: E501 (a row of the grid)
    CommandType.UPSTREAM:        (_no_job,    _upstream_noted,    _upstream_noted,    _upstream_noted,    _upstream_noted,      _upstream_final,      _upstream_waiting),   # noqa: E501 (a row of the grid)
    CommandType.RETRY:           (_not_found, _not_found,         _not_found,         _not_found,         _not_found,           _retry,               _not_found),          # noqa: E501 (a row of the grid)
}
# fmt: on

TRANSITIONS: dict[tuple[CommandType, State | None], Handler] = {
    (ctype, column): handler
    for ctype, row in _GRID.items()
    for column, handler in zip(COLUMNS, row, strict=True)
}
"""(command type, job state or ABSENT) → the handler that decides the outcome."""


def _check_position(at_ms: int, offset: int) -> None:
    check_int("at_ms", at_ms, MIN_TIME_MS, MAX_TIME_MS)
    check_int("offset", offset, 0, MAX_OFFSET)


# [eventq] Commands a client issues about an existing job: with a ``scope`` (the issuing
# token's prefix, docs/security.md), a job whose queue is outside it is absent to them.
_SCOPED = frozenset({Complete, Fail, Delete, Retry, Touch})


def decide(job: Job | None, command: Command, at_ms: int, offset: int) -> Outcome:
    """Decide what ``command``, stamped ``at_ms`` at log ``offset``, does to ``job``.

    ``job`` is the current state of ``command.job_id`` (None when absent). Raises
    ``ValueError`` only for impossible input (a job with another id, a bad time or
    offset); every possible command has an outcome.
    """
    _check_position(at_ms, offset)
    if not isinstance(command, _COMMAND_TYPES):
        raise ValueError(f"not a command: {command!r:.100}")
    if job is not None:
        if job.id != command.job_id:
            raise ValueError(f"command for {command.job_id} applied to job {job.id}")
        if offset <= job.version:
            return Ignored(ALREADY_APPLIED)
        if type(command) in _SCOPED:
            scope = command.scope  # type: ignore[union-attr]  # every _SCOPED type has one
            if scope is not None and not job.name.startswith(scope):
                return Rejected(NotFound())  # outside the token's prefix: absent to it
    return TRANSITIONS[command.type, None if job is None else job.state](
        job, command, at_ms, offset
    )


# -------------------------------------------------------------------- evolve functions

# The event is Any: each evolution takes the event type of its key in EVOLUTIONS.
Evolution: TypeAlias = Callable[[Job, Any], Job | None]


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


def _fail_counted(job: Job, e: FailCounted) -> Job:
    return job_with(job, fails=job.fails + 1, version=e.offset)


def _links_after(
    job: Job, e: UpstreamNoted | Released | UpstreamFailed | UpstreamRetried
) -> tuple[Link, ...]:
    """The job's links with the notice of ``e`` recorded in its upstream's."""
    if link_of(job, e.upstream) is None:
        raise ValueError(f"{e.upstream} is not an upstream of job {job.id}")
    outcome = link_outcome(e.outcome)
    completed = e.change_ms if outcome is UpstreamOutcome.COMPLETED else None
    noted = Link(e.upstream, outcome, e.change, completed)
    return tuple(noted if link.id == e.upstream else link for link in job.upstreams)


def _noted(job: Job, e: UpstreamNoted) -> Job:
    return job_with(job, upstreams=_links_after(job, e), version=e.offset)


def _released(job: Job, e: Released) -> Job:
    links = _links_after(job, e)
    times = [link.completed_ms for link in links]
    if None in times:
        raise ValueError(f"job {job.id} is released with an upstream not COMPLETED")
    if job.scheduled_ms is not None:
        times.append(job.scheduled_ms)
    if job.delayed_ms is not None:  # a retry -delay: released no earlier than its time
        times.append(job.delayed_ms)
    return job_with(job, upstreams=links, state=State.NEW, released_ms=max(times),  # type: ignore[type-var]  # None is not in times: checked
                    version=e.offset)


def _upstream_failed(job: Job, e: UpstreamFailed) -> Job:
    return job_with(
        job, upstreams=_links_after(job, e), state=State.FAILED,
        result=upstream_failure(e.upstream, e.outcome), result_ok=False,
        group=UPSTREAM_FAILED_GROUP, finished_at=e.offset, finished_ms=e.at_ms, version=e.offset,
    )  # fmt: skip


def _retry_fields(offset: int) -> dict[str, Any]:
    """What every retry clears (spec: attempts, fails and backoff returns 0; result,
    group and failure time cleared; the TTL deadline does not change)."""
    return dict(
        attempts=0, fails=0, returns=0, retry_ms=None, lease_deadline_ms=None, result=None,
        result_ok=None, group=None, finished_at=None, finished_ms=None, version=offset,
    )  # fmt: skip


def asked_again(link: Link) -> Link:
    """A retried dependent's link to an upstream it knew ended: unfinished again and
    asked again (eventq/core/followups.py writes it a ``depend``). For a FAILED one, the
    last change applied goes back to just before the one that failed it, so that the
    upstream's answer, that change again while it is still FAILED, applies once more
    (and fails the dependent again); any older notice stays stale. A deleted or
    evicted one is waited for (an absent upstream): its next life's changes come later."""
    if link.outcome is UpstreamOutcome.FAILED:
        assert link.change is not None
        return Link(link.id, UpstreamOutcome.UNFINISHED, link.change - 1 if link.change else None)
    if link.outcome in ENDED_UNCOMPLETED:
        return Link(link.id, UpstreamOutcome.UNFINISHED, link.change)
    return link


def _retried(job: Job, e: Retried) -> Job:
    """A FAILED job retried (docs/workflows.md, retry): NEW when every upstream is
    COMPLETED (or it has none), at its old place in lease order, or at now + delay;
    else WAITING, its ended upstreams asked again (``asked_again``)."""
    links = tuple(map(asked_again, job.upstreams))
    delayed = min(e.at_ms + e.delay_ms, MAX_TIME_MS) if e.delay_ms else None
    common = _retry_fields(e.offset)
    if any(link.outcome is not UpstreamOutcome.COMPLETED for link in links):
        return job_with(job, state=State.WAITING, upstreams=links, released_ms=None,
                        delayed_ms=delayed, early=False, **common)
    released = None
    if links:  # released again at once: as a release would, no earlier than the delay
        times = [link.completed_ms for link in links]
        times += [t for t in (job.scheduled_ms, delayed) if t is not None]
        released = max(times)  # type: ignore[type-var]  # every link is COMPLETED: no None
    retried = job_with(job, state=State.NEW, released_ms=released, delayed_ms=delayed,
                       early=False, **common)
    time_ms = ready_time_ms(retried)
    if delayed is None and time_ms is not None and time_ms > e.at_ms:
        return job_with(retried, early=True)  # ready at once; its time stays (spec)
    return retried


def _upstream_retried(job: Job, e: UpstreamRetried) -> Job:
    """The upstream that failed the job was retried: the job is retried too, as by
    ``retry`` without delay (WAITING, for that upstream at least), unless another of
    its upstreams has ended too: then it stays FAILED (same group and failure time), its
    result naming that one (the first in -after order)."""
    links = _links_after(job, e)
    for link in links:
        if link.outcome in ENDED_UNCOMPLETED:
            return job_with(job, upstreams=links, result=upstream_failure(link.id, link.outcome),
                            version=e.offset)
    return job_with(job, state=State.WAITING, upstreams=links, released_ms=None,
                    delayed_ms=None, early=False, **_retry_fields(e.offset))


_LIVE = frozenset({State.NEW, State.PENDING, State.LEASED})
_NOT_FINAL = _LIVE | {State.WAITING}
_LEASABLE = frozenset({State.NEW, State.PENDING})
_WAITING = frozenset({State.WAITING})
_FAILED = frozenset({State.FAILED})
_ANY = frozenset(State)

EVOLUTIONS: dict[EventType, tuple[frozenset[State], Evolution]] = {
    # event type                      states it applies to   how
    EventType.COMPLETED:              (_NOT_FINAL,           _completed),
    EventType.FAILED:                 (_NOT_FINAL,           _failed),
    EventType.FAIL_RETRIED:           (_LIVE,                _fail_retried),
    EventType.ATTEMPT_STARTED:        (_LEASABLE,            _attempt_started),
    EventType.ATTEMPTS_EXHAUSTED:     (_LEASABLE,            _attempts_exhausted),
    EventType.ATTEMPT_TIMED_OUT:      (frozenset({State.LEASED}), _attempt_timed_out),
    EventType.ATTEMPT_RELEASED:       (frozenset({State.LEASED}), _attempt_released),
    EventType.TOUCHED:                (frozenset({State.LEASED}), _touched),
    EventType.DELETED:                (_ANY,                 _removed),
    EventType.EXPIRED:                (_ANY,                 _removed),
    EventType.FAIL_COUNTED:           (_WAITING,             _fail_counted),
    EventType.UPSTREAM_NOTED:         (_ANY,                 _noted),
    EventType.RELEASED:               (_WAITING,             _released),
    EventType.UPSTREAM_FAILED:        (_WAITING,             _upstream_failed),
    EventType.RETRIED:                (_FAILED,              _retried),
    EventType.UPSTREAM_RETRIED:       (_FAILED,              _upstream_retried),
}  # fmt: skip
"""Event type → (the job states it may apply to, the function applying it).

``ADDED`` and ``IMPORTED`` are not here: they are the only events that apply to an absent
job (and only to one)."""


def evolve(job: Job | None, event: Event) -> Job | None:
    """The job after ``event``; None when the job is gone (a tombstone).

    Raises ``ValueError`` for an event that cannot follow ``job`` (it was not decided on
    this state): the fold of a log must never silently diverge.
    """
    if not isinstance(event, _EVENT_TYPES):
        raise ValueError(f"not an event: {event!r:.100}")
    if isinstance(event, (Added, Imported)):
        if job is not None:
            raise ValueError(f"job {job.id} already exists")
        return event.job
    if job is None:
        raise ValueError(f"{type(event).__name__} for absent job {event.job_id}")
    if job.id != event.job_id:
        raise ValueError(f"event for {event.job_id} applied to job {job.id}")
    if event.offset <= job.version:
        raise ValueError(f"event at offset {event.offset} is not after version {job.version}")
    states, evolution = EVOLUTIONS[event.type]
    if job.state not in states:
        raise ValueError(f"{type(event).__name__} cannot apply to a {job.state.name} job")
    return evolution(job, event)


def apply(job: Job | None, command: Command, at_ms: int, offset: int) -> tuple[Outcome, Job | None]:
    """``decide`` then, when accepted, ``evolve``: the outcome and the job after it."""
    outcome = decide(job, command, at_ms, offset)
    if isinstance(outcome, Accepted):
        return outcome, evolve(job, outcome.event)
    return outcome, job


# ------------------------------------------------------------------------ timer helpers


def next_deadline(job: Job) -> int | None:
    """The earliest time a timer must act on ``job``: the lease deadline while LEASED,
    and the TTL expiry; None when neither applies (e.g. a run job that is not leased)."""
    lease = job.lease_deadline_ms if job.state is State.LEASED else None
    expiry = job.expires_ms
    if lease is None:
        return expiry
    if expiry is None:
        return lease
    return min(lease, expiry)


def due_commands(job: Job, now_ms: int) -> tuple[TimeoutAttempt | Expire, ...]:
    """The commands a timer should produce for ``job`` at ``now_ms`` (maybe none).

    They are re-checked when applied (by the broker's clock), so producing one early or
    twice is harmless: it is ``Ignored``.
    """
    due: list[TimeoutAttempt | Expire] = []
    if job.state is State.LEASED and job.lease_deadline_ms is not None:
        if now_ms >= job.lease_deadline_ms:
            due.append(TimeoutAttempt(job.id, job.attempts))
    if job.expires_ms is not None and now_ms >= job.expires_ms:
        due.append(Expire(job.id))
    return tuple(due)


__all__ = [
    "ABSENT",
    "ALREADY_APPLIED",
    "CLAIM_REFUSED",
    "COLUMNS",
    "EVOLUTIONS",
    "EXPIRED_BEFORE_IMPORT",
    "NOT_YET_DUE",
    "NO_SUCH_JOB",
    "REGISTERED",
    "REGISTERED_FINISHED",
    "STALE_ATTEMPT",
    "STALE_NOTICE",
    "TRANSITIONS",
    "Accepted",
    "Ignored",
    "Outcome",
    "Rejected",
    "apply",
    "decide",
    "due_commands",
    "evolve",
    "next_deadline",
    "upstream_failure",
]
