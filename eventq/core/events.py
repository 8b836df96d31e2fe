"""Events: what happened to a job when a command was applied.

``machine.decide`` turns an accepted command into exactly one event and
``machine.evolve`` folds it into the job. Every event carries the job id, the broker time
of the command (``at_ms``) and the command's log ``offset`` (it becomes ``Job.version``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, TypeAlias

from eventq.core._check import check_bool, check_bytes, check_int, check_name, check_uuid
from eventq.core.job import (
    ENDED_UNCOMPLETED,
    NOTICE_OUTCOMES,
    Job,
    State,
    UpstreamOutcome,
)
from eventq.limits import (
    MAX_ATTEMPTS_LIMIT,
    MAX_DEADLINE_MS,
    MAX_OFFSET,
    MAX_PAYLOAD_BYTES,
    MAX_RETRY_DELAY_MS,
    MAX_TIME_MS,
    MIN_TIME_MS,
)


class EventType(IntEnum):
    """Event type numbers, as written to the state log."""

    ADDED = 1
    COMPLETED = 2
    FAILED = 3
    FAIL_RETRIED = 4
    ATTEMPT_STARTED = 5
    ATTEMPTS_EXHAUSTED = 6
    ATTEMPT_TIMED_OUT = 7
    DELETED = 8
    EXPIRED = 9
    IMPORTED = 10
    ATTEMPT_RELEASED = 11
    TOUCHED = 12
    FAIL_COUNTED = 13  # [eventq] a WAITING job's fail (docs/workflows.md, "Dependencies")
    UPSTREAM_NOTED = 14
    RELEASED = 15
    UPSTREAM_FAILED = 16
    RETRIED = 17  # [eventq] retry (docs/workflows.md, "Failure groups and retry")
    UPSTREAM_RETRIED = 18


def _check_common(e: Event) -> None:
    check_uuid("job_id", e.job_id)
    check_int("at_ms", e.at_ms, MIN_TIME_MS, MAX_TIME_MS)
    check_int("offset", e.offset, 0, MAX_OFFSET)


@dataclass(frozen=True, slots=True)
class Added:
    """add or schedule created ``job`` (state NEW, or WAITING with upstreams; version =
    offset)."""

    type: ClassVar[EventType] = EventType.ADDED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    job: Job

    def __post_init__(self) -> None:
        _check_common(self)
        if not isinstance(self.job, Job):
            raise ValueError(f"job must be a Job, got {type(self.job).__name__}")
        j = self.job
        if j.id != self.job_id or j.version != self.offset or j.created_ms != self.at_ms:
            raise ValueError("an added job has the event's id, version = offset, created = at")
        if j.state is not (State.WAITING if j.upstreams else State.NEW) or j.attempts or j.fails:
            raise ValueError(
                "an added job is NEW (WAITING with upstreams) with no attempts and no fails"
            )


@dataclass(frozen=True, slots=True)
class Completed:
    """complete: COMPLETED with ``result``."""

    type: ClassVar[EventType] = EventType.COMPLETED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    result: bytes

    def __post_init__(self) -> None:
        _check_common(self)
        check_bytes("result", self.result, MAX_PAYLOAD_BYTES)


@dataclass(frozen=True, slots=True)
class Failed:
    """fail with no retries left: FAILED with ``result``, fails + 1, in the fail's
    ``group`` (None: ``failed``)."""

    type: ClassVar[EventType] = EventType.FAILED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    result: bytes
    group: str | None = None

    def __post_init__(self) -> None:
        _check_common(self)
        check_bytes("result", self.result, MAX_PAYLOAD_BYTES)
        if self.group is not None:
            check_name("group", self.group)


@dataclass(frozen=True, slots=True)
class FailRetried:
    """fail with retries left: fails + 1, back to PENDING at its old position."""

    type: ClassVar[EventType] = EventType.FAIL_RETRIED
    job_id: uuid.UUID
    at_ms: int
    offset: int

    def __post_init__(self) -> None:
        _check_common(self)


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    """A lease was granted: LEASED, attempts = ``attempt``, TTR ends at ``deadline_ms``."""

    type: ClassVar[EventType] = EventType.ATTEMPT_STARTED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    attempt: int
    deadline_ms: int

    def __post_init__(self) -> None:
        _check_common(self)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)
        check_int("deadline_ms", self.deadline_ms, MIN_TIME_MS, MAX_DEADLINE_MS)


@dataclass(frozen=True, slots=True)
class AttemptsExhausted:
    """A lease would exceed the attempt limit: FAILED with an empty result."""

    type: ClassVar[EventType] = EventType.ATTEMPTS_EXHAUSTED
    job_id: uuid.UUID
    at_ms: int
    offset: int

    def __post_init__(self) -> None:
        _check_common(self)


@dataclass(frozen=True, slots=True)
class AttemptTimedOut:
    """The TTR of ``attempt`` passed: PENDING (``requeued``) or FAILED, empty result."""

    type: ClassVar[EventType] = EventType.ATTEMPT_TIMED_OUT
    job_id: uuid.UUID
    at_ms: int
    offset: int
    attempt: int
    requeued: bool

    def __post_init__(self) -> None:
        _check_common(self)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)
        check_bool("requeued", self.requeued)


@dataclass(frozen=True, slots=True)
class AttemptReleased:
    """release-attempt: attempt ``attempt`` never reached a client; the job is ``state``
    (NEW or PENDING) again with ``attempt - 1`` attempts."""

    type: ClassVar[EventType] = EventType.ATTEMPT_RELEASED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    attempt: int
    state: State

    def __post_init__(self) -> None:
        _check_common(self)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)
        if self.state not in (State.NEW, State.PENDING) or type(self.state) is bool:
            raise ValueError(f"state must be NEW or PENDING, not {self.state!r}")
        object.__setattr__(self, "state", State(self.state))


@dataclass(frozen=True, slots=True)
class Touched:
    """touch: attempt ``attempt`` stays LEASED, its deadline now ``deadline_ms``."""

    type: ClassVar[EventType] = EventType.TOUCHED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    attempt: int
    deadline_ms: int

    def __post_init__(self) -> None:
        _check_common(self)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)
        check_int("deadline_ms", self.deadline_ms, MIN_TIME_MS, MAX_DEADLINE_MS)


@dataclass(frozen=True, slots=True)
class Deleted:
    """delete: the job is gone."""

    type: ClassVar[EventType] = EventType.DELETED
    job_id: uuid.UUID
    at_ms: int
    offset: int

    def __post_init__(self) -> None:
        _check_common(self)


@dataclass(frozen=True, slots=True)
class Expired:
    """The TTL passed: the job is gone; ``evicted`` if it was not COMPLETED or FAILED."""

    type: ClassVar[EventType] = EventType.EXPIRED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    evicted: bool

    def __post_init__(self) -> None:
        _check_common(self)
        check_bool("evicted", self.evicted)


@dataclass(frozen=True, slots=True)
class Imported:
    """import created ``job`` from a snapshot: any state, its own created time and
    counters (only ``version`` = offset comes from the log)."""

    type: ClassVar[EventType] = EventType.IMPORTED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    job: Job

    def __post_init__(self) -> None:
        _check_common(self)
        if not isinstance(self.job, Job):
            raise ValueError(f"job must be a Job, got {type(self.job).__name__}")
        if self.job.id != self.job_id or self.job.version != self.offset:
            raise ValueError("an imported job has the event's id and version = offset")


@dataclass(frozen=True, slots=True)
class FailCounted:
    """fail with fails left on a WAITING job: fails + 1, still WAITING (no backoff)."""

    type: ClassVar[EventType] = EventType.FAIL_COUNTED
    job_id: uuid.UUID
    at_ms: int
    offset: int

    def __post_init__(self) -> None:
        _check_common(self)


def _check_notice(
    e: UpstreamNoted | Released | UpstreamFailed | UpstreamRetried, outcomes: frozenset
) -> None:
    _check_common(e)
    check_uuid("upstream", e.upstream)
    if type(e.outcome) is bool or not isinstance(e.outcome, int) or e.outcome not in outcomes:
        raise ValueError(f"outcome cannot be {e.outcome!r} in {type(e).__name__}")
    object.__setattr__(e, "outcome", UpstreamOutcome(e.outcome))
    check_int("change", e.change, 0, MAX_OFFSET)
    check_int("change_ms", e.change_ms, MIN_TIME_MS, MAX_TIME_MS)


@dataclass(frozen=True, slots=True)
class UpstreamNoted:
    """An upstream notice recorded in the dependent's link to ``upstream`` (its outcome,
    the position ``change`` and broker time ``change_ms`` of the upstream's change); the
    dependent's state does not change."""

    type: ClassVar[EventType] = EventType.UPSTREAM_NOTED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    upstream: uuid.UUID
    outcome: UpstreamOutcome
    change: int
    change_ms: int

    def __post_init__(self) -> None:
        _check_notice(self, NOTICE_OUTCOMES)


@dataclass(frozen=True, slots=True)
class Released:
    """The last upstream of a WAITING dependent completed: NEW, ready at max(schedule
    time, the latest completion among its upstreams)."""

    type: ClassVar[EventType] = EventType.RELEASED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    upstream: uuid.UUID
    outcome: UpstreamOutcome
    change: int
    change_ms: int

    def __post_init__(self) -> None:
        _check_notice(self, frozenset({UpstreamOutcome.COMPLETED}))


@dataclass(frozen=True, slots=True)
class UpstreamFailed:
    """An upstream of a WAITING dependent ended without completing: FAILED, group
    ``upstream-failed``, result ``upstream <id> <failed|deleted|evicted>``."""

    type: ClassVar[EventType] = EventType.UPSTREAM_FAILED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    upstream: uuid.UUID
    outcome: UpstreamOutcome
    change: int
    change_ms: int

    def __post_init__(self) -> None:
        _check_notice(self, ENDED_UNCOMPLETED)


@dataclass(frozen=True, slots=True)
class Retried:
    """retry of a FAILED job: attempts, fails and returns 0, result and group gone;
    NEW when every upstream is COMPLETED (ready at once, or at ``at_ms + delay_ms``),
    else WAITING, asking again the upstreams it knew ended (machine.py)."""

    type: ClassVar[EventType] = EventType.RETRIED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    delay_ms: int = 0

    def __post_init__(self) -> None:
        _check_common(self)
        check_int("delay_ms", self.delay_ms, 0, MAX_RETRY_DELAY_MS)


@dataclass(frozen=True, slots=True)
class UpstreamRetried:
    """The upstream that failed a dependent (FAILED in ``upstream-failed``, its result
    naming it) was retried: the dependent is retried too (WAITING), or, when another
    of its upstreams has ended too, stays FAILED, its result naming that one."""

    type: ClassVar[EventType] = EventType.UPSTREAM_RETRIED
    job_id: uuid.UUID
    at_ms: int
    offset: int
    upstream: uuid.UUID
    outcome: UpstreamOutcome
    change: int
    change_ms: int

    def __post_init__(self) -> None:
        _check_notice(self, frozenset({UpstreamOutcome.RETRIED}))


# An upstream notice applied.
NOTICE_EVENTS = (UpstreamNoted, Released, UpstreamFailed, UpstreamRetried)

Event: TypeAlias = (
    Added
    | Completed
    | Failed
    | FailRetried
    | AttemptStarted
    | AttemptsExhausted
    | AttemptTimedOut
    | Deleted
    | Expired
    | Imported
    | AttemptReleased
    | Touched
    | FailCounted
    | UpstreamNoted
    | Released
    | UpstreamFailed
    | Retried
    | UpstreamRetried
)

EVENT_CLASSES: dict[EventType, type] = {
    cls.type: cls
    for cls in (
        Added,
        Completed,
        Failed,
        FailRetried,
        AttemptStarted,
        AttemptsExhausted,
        AttemptTimedOut,
        Deleted,
        Expired,
        Imported,
        AttemptReleased,
        Touched,
        FailCounted,
        UpstreamNoted,
        Released,
        UpstreamFailed,
        Retried,
        UpstreamRetried,
    )
}

REMOVING_EVENTS = frozenset({EventType.DELETED, EventType.EXPIRED})  # evolve → None
