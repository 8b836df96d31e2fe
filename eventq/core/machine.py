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

The handlers and evolutions the tables name are a job's own
(eventq/core/job_transitions.py: add, schedule, import, attempts, touch, complete,
fail, delete, expire) and workflows' (eventq/core/workflow_transitions.py: depend,
upstream notices, retry, a WAITING job's fail); the outcomes are
eventq/core/outcomes.py's.
"""

from __future__ import annotations

from eventq.core._check import check_int
from eventq.core.commands import (
    COMMAND_CLASSES,
    Command,
    CommandType,
    Complete,
    Delete,
    Expire,
    Fail,
    Retry,
    TimeoutAttempt,
    Touch,
)
from eventq.core.events import EVENT_CLASSES, Added, Event, EventType, Imported
from eventq.core.job import Job, State, upstream_failure
from eventq.core.job_transitions import (  # the tables' entries
    _add,
    _attempt_released,
    _attempt_started,
    _attempt_timed_out,
    _attempts_exhausted,
    _complete,
    _completed,
    _delete,
    _duplicate_job,
    _duplicate_result,
    _expire,
    _fail,
    _fail_retried,
    _failed,
    _import,
    _not_found,
    _release_attempt,
    _removed,
    _schedule,
    _schedule_existing,
    _start_attempt,
    _timeout_attempt,
    _touch,
    _touched,
)
from eventq.core.outcomes import (
    ALREADY_APPLIED,
    CLAIM_REFUSED,
    EXPIRED_BEFORE_IMPORT,
    NO_SUCH_JOB,
    NOT_YET_DUE,
    OTHER_CLAIM,
    REGISTERED,
    REGISTERED_FINISHED,
    STALE_ATTEMPT,
    STALE_NOTICE,
    Accepted,
    Evolution,
    Handler,
    Ignored,
    Outcome,
    Rejected,
    ignore,
)
from eventq.core.workflow_transitions import (  # the tables' entries
    _fail_counted,
    _fail_waiting,
    _noted,
    _registered_finished,
    _released,
    _retried,
    _retry,
    _upstream_failed,
    _upstream_final,
    _upstream_noted,
    _upstream_retried,
    _upstream_waiting,
    asked_again,
)
from eventq.errors import NotFound
from eventq.limits import MAX_OFFSET, MAX_TIME_MS, MIN_TIME_MS

_COMMAND_TYPES = tuple(COMMAND_CLASSES.values())
_EVENT_TYPES = tuple(EVENT_CLASSES.values())

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

_no_job = ignore(NO_SUCH_JOB)
_registered = ignore(REGISTERED)
_refused = ignore(CLAIM_REFUSED)
_stale = ignore(STALE_ATTEMPT)

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
# token's prefix, docs/security.md, "Queue-name prefixes"), a job whose queue is outside
# it is absent to them.
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



# -------------------------------------------------------------------- evolve

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
    "OTHER_CLAIM",
    "REGISTERED",
    "REGISTERED_FINISHED",
    "STALE_ATTEMPT",
    "STALE_NOTICE",
    "TRANSITIONS",
    "Accepted",
    "Evolution",
    "Handler",
    "Ignored",
    "Outcome",
    "Rejected",
    "apply",
    "asked_again",
    "decide",
    "due_commands",
    "evolve",
    "next_deadline",
    "upstream_failure",
]
