"""Commands: what the log is asked to do to one job.

Types 1-8 are workq's command-log types; eventq's own types take numbers from
``FIRST_EXTENSION_TYPE`` (64) up. Extensions: ``Import`` (64), a complete job
snapshot brought over from another system (``eventq import-cmdlog``); ``ReleaseAttempt``
(65); ``Touch`` (66); the queue commands ``Pause`` and ``Resume`` (67, 68), which
name a queue, not a job; and the workflow commands ``Depend`` (69) and ``Upstream`` (70)
that processors write to each other (docs/workflows.md, "Command types"), each keyed
by the job whose partition applies it (its ``job_id``); ``Retry`` (71), a FAILED job
made to run again under its own id (``retry``, ``retry-group``).

A command is the intent written to ``eventq.commands`` (keyed by its ``job_id``). It
carries no time: the broker stamps it (LogAppendTime) and that stamp is passed to
``machine.decide`` as ``at_ms`` together with the command's log offset.

Each command validates its own fields on construction (``ValueError``) with the limits
of the protocol, so the state machine only ever sees commands that can exist. The
protocol's v4-only rule for ids is a request check and is left to the protocol layer:
the core accepts any UUID.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from enum import IntEnum
from operator import attrgetter
from typing import ClassVar, TypeAlias

from eventq.core._check import check_bytes, check_int, check_name, check_uuid
from eventq.core.fields import (
    ADD_OPTIONS,
    AFTER,
    BACKOFF,
    MAX_ATTEMPTS,
    MAX_FAILS,
    PRIORITY,
    RECUR_OPTIONS,
    TAGS,
    TIME,
    WORKQ_OPTIONS,
    check_declared,
    checker,
    with_no_ttl,
)
from eventq.core.job import (
    JOB_FIELD_NAMES,
    NOTICE_OUTCOMES,
    WITH_RESULT,
    WORKFLOW_FIELD_NAMES,
    Job,
    State,
    UpstreamOutcome,
    has_workflow,
    make_job,
    was_retried,
)
from eventq.limits import (
    MAX_ATTEMPTS_LIMIT,
    MAX_DEADLINE_MS,
    MAX_OFFSET,
    MAX_PAYLOAD_BYTES,
    MAX_RETRY_DELAY_MS,
    MAX_TIME_MS,
    MAX_TTR_MS,
    MIN_EVERY_MS,
    MIN_TIME_MS,
    MIN_TTR_MS,
)


class CommandType(IntEnum):
    """Command type numbers: workq's command-log types one to one (1-8), then eventq's
    extensions (from ``FIRST_EXTENSION_TYPE``)."""

    ADD = 1
    SCHEDULE = 2
    COMPLETE = 3
    FAIL = 4
    DELETE = 5
    EXPIRE = 6
    START_ATTEMPT = 7
    TIMEOUT_ATTEMPT = 8
    IMPORT = 64  # eventq: a job snapshot imported from elsewhere (e.g. a workq log)
    RELEASE_ATTEMPT = 65  # eventq: a lease the gateway could not deliver is given back
    TOUCH = 66  # eventq: a worker's heartbeat sets its lease's deadline (`touch`)
    PAUSE = 67  # eventq: a queue hands out no jobs (`pause`); not a job's command
    RESUME = 68  # eventq: it does again (`resume`)
    DEPEND = 69  # eventq: a dependent registers with its upstream (keyed by the upstream)
    UPSTREAM = 70  # eventq: an upstream's outcome, told its dependent (keyed by it)
    RETRY = 71  # eventq: a FAILED job runs again under its id (`retry`, `retry-group`)
    # eventq: recurring jobs (docs/workflows.md, "Recurring jobs"), keyed
    # ``recur:<name>``: not a job's commands (eventq/core/recurrence.py)
    RECUR = 72  # define or replace a recurrence (`recur`)
    UNRECUR = 73  # remove it (`unrecur`)
    FIRE = 74  # a timer: a slot is due (re-checked by the broker's clock when applied)


FIRST_EXTENSION_TYPE = 64  # command types eventq adds beyond workq's take numbers from here
assert min(t for t in CommandType if t > CommandType.TIMEOUT_ATTEMPT) == FIRST_EXTENSION_TYPE


def check_scope(scope: object, name: str | None = None) -> None:
    """[eventq] A command's ``scope`` (docs/security.md, "Queue-name prefixes": check
    6a): None (a server without tokens, or a token without a prefix), or the token's
    queue-name prefix, made of a name's characters; when the command names its queue
    (``name``), that name is inside it."""
    if scope is None:
        return
    check_name("scope", scope)
    if name is not None and not name.startswith(scope):  # type: ignore[arg-type]  # checked a str
        raise ValueError(f"queue {name!r} is outside the scope {scope!r}")


def in_scope(scope: str | None, name: str) -> bool:
    """Whether a queue ``name`` is inside ``scope`` (None: every queue): its bytes start
    with the prefix's (docs/security.md, "Queue-name prefixes")."""
    return scope is None or name.startswith(scope)


# The options of add and schedule (eventq/core/fields.py), checked in their records'
# order; add also takes a TTL of 0, no TTL (a run job's), where schedule does not.
_check_add_options = checker(with_no_ttl(ADD_OPTIONS))
_check_schedule_options = checker(ADD_OPTIONS)


def _check_job_fields(c: Add | Schedule, check_options: Callable[[object], None]) -> None:
    check_uuid("job_id", c.job_id)
    check_options(c)
    # -after names at most MAX_AFTER_IDS distinct ids (the protocol's "1-100" is its
    # spelling: none is no -after), not the job's own.
    if c.job_id in c.after:
        raise ValueError("a job cannot be its own upstream")
    if c.scope is not None:
        check_scope(c.scope, c.name)


@dataclass(frozen=True, slots=True)
class Add:
    """Enqueue a job, ready at once. ``ttl_ms`` 0 = no TTL (a ``run`` job).
    ``backoff_ms``: each return to PENDING waits backoff x 2^(r-1) (docs/protocol.md,
    "-backoff"). ``after`` (docs/workflows.md, "Dependencies"): its upstreams; the job is
    then accepted WAITING until they complete. ``tags`` (docs/workflows.md, "Tags"): the
    job's, kept for its life (at most 16 distinct; none is no -tags). ``scope``
    (docs/security.md, "Queue-name prefixes"): the prefix of the token that issued it
    (None: none), recorded so that its upstreams outside it are absent to it (its
    ``depend``s carry it)."""

    type: ClassVar[CommandType] = CommandType.ADD
    job_id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    priority: int = PRIORITY.default
    max_attempts: int = MAX_ATTEMPTS.default
    max_fails: int = MAX_FAILS.default
    backoff_ms: int = BACKOFF.default
    after: tuple[uuid.UUID, ...] = AFTER.default
    tags: tuple[str, ...] = TAGS.default
    scope: str | None = None

    def __post_init__(self) -> None:
        _check_job_fields(self, _check_add_options)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Enqueue a job that becomes ready at ``time_ms``; its TTL counts from then."""

    type: ClassVar[CommandType] = CommandType.SCHEDULE
    job_id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    time_ms: int
    payload: bytes
    priority: int = PRIORITY.default
    max_attempts: int = MAX_ATTEMPTS.default
    max_fails: int = MAX_FAILS.default
    backoff_ms: int = BACKOFF.default
    after: tuple[uuid.UUID, ...] = AFTER.default
    tags: tuple[str, ...] = TAGS.default
    scope: str | None = None  # as Add's

    def __post_init__(self) -> None:
        _check_job_fields(self, _check_schedule_options)
        TIME.check(self.time_ms)


@dataclass(frozen=True, slots=True)
class Complete:
    """``complete``; ``scope`` (docs/security.md, "Queue-name prefixes"): the issuing
    token's prefix, a job outside it being absent to it (``-NOT-FOUND``, decided where the
    job is: machine.py). The same ``scope`` on fail, delete, retry and touch."""

    type: ClassVar[CommandType] = CommandType.COMPLETE
    job_id: uuid.UUID
    result: bytes
    scope: str | None = None

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_bytes("result", self.result, MAX_PAYLOAD_BYTES)
        check_scope(self.scope)


@dataclass(frozen=True, slots=True)
class Fail:
    """``fail``; ``group`` (docs/workflows.md, "Failure groups and retry"): the failure
    group the job is in if this fail is final (None: ``failed``); a fail that leaves fails
    keeps none."""

    type: ClassVar[CommandType] = CommandType.FAIL
    job_id: uuid.UUID
    result: bytes
    group: str | None = None
    scope: str | None = None  # as Complete's

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_bytes("result", self.result, MAX_PAYLOAD_BYTES)
        if self.group is not None:
            check_name("group", self.group)
        check_scope(self.scope)


@dataclass(frozen=True, slots=True)
class Retry:
    """``retry`` (docs/workflows.md, "retry"; type 71): a FAILED job runs again under its
    id, attempts and fails 0, ready at once (``delay_ms`` 0) or at the command's broker
    time + ``delay_ms``, or WAITING again while an upstream is not COMPLETED. Any other
    state (or an absent job) is ``-NOT-FOUND``: a retry never revives another job."""

    type: ClassVar[CommandType] = CommandType.RETRY
    job_id: uuid.UUID
    delay_ms: int = 0
    scope: str | None = None  # as Complete's

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_int("delay_ms", self.delay_ms, 0, MAX_RETRY_DELAY_MS)
        check_scope(self.scope)


@dataclass(frozen=True, slots=True)
class Delete:
    type: ClassVar[CommandType] = CommandType.DELETE
    job_id: uuid.UUID
    scope: str | None = None  # as Complete's

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_scope(self.scope)


@dataclass(frozen=True, slots=True)
class Expire:
    """Produced by a timer when the TTL has passed; re-checked when applied."""

    type: ClassVar[CommandType] = CommandType.EXPIRE
    job_id: uuid.UUID

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)


@dataclass(frozen=True, slots=True)
class StartAttempt:
    """A lease's claim of attempt number ``attempt`` (1-based) of a ready job.

    ``attempt`` may be one past the attempt limit: applying it then fails the job
    (attempts exhausted) instead of leasing it.
    """

    type: ClassVar[CommandType] = CommandType.START_ATTEMPT
    job_id: uuid.UUID
    attempt: int

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT + 1)


@dataclass(frozen=True, slots=True)
class TimeoutAttempt:
    """Produced by a timer when attempt ``attempt``'s TTR has passed."""

    type: ClassVar[CommandType] = CommandType.TIMEOUT_ATTEMPT
    job_id: uuid.UUID
    attempt: int

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)


@dataclass(frozen=True, slots=True)
class ReleaseAttempt:
    """Give back attempt ``attempt`` of a leased job whose lease never reached a client
    (docs/architecture.md, "Abandoned commands"): the gateway gave up waiting for its
    start-attempt, or the client left before the reply. Applied only while that attempt
    is current and unfinished; the job is then ``state`` again (what it was before the
    lease: NEW or PENDING), with ``attempt - 1`` attempts and its old place in lease
    order, as if the lease had never happened.

    ``claim`` is the log position of the start-attempt it gives back: then it is applied
    only while the job is exactly as that claim left it (its ``version`` is the claim's
    position). Another process's claim of the same attempt number (after the partition
    moved, docs/fencing.md, "The three fences") is then never given back by this one.
    None: by the attempt number alone (records written before claims were named).
    """

    type: ClassVar[CommandType] = CommandType.RELEASE_ATTEMPT
    job_id: uuid.UUID
    attempt: int
    state: State
    claim: int | None = None

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)
        if self.state not in (State.NEW, State.PENDING) or type(self.state) is bool:
            raise ValueError(f"state must be NEW or PENDING, not {self.state!r}")
        object.__setattr__(self, "state", State(self.state))
        if self.claim is not None:
            check_int("claim", self.claim, 0, MAX_OFFSET)


@dataclass(frozen=True, slots=True)
class Touch:
    """A worker's heartbeat (docs/protocol.md, "eventq extensions", ``touch``): attempt ``attempt``'s lease
    deadline is set to the command's broker time + ``ttr_ms`` (the job's own TTR when
    None). The gateway names the attempt it saw LEASED when the request came: applied
    to any other attempt, or to a job no longer LEASED, it is ``-NOT-FOUND``, so a
    touch never extends another attempt's lease nor brings back a finished job."""

    type: ClassVar[CommandType] = CommandType.TOUCH
    job_id: uuid.UUID
    attempt: int
    ttr_ms: int | None = None
    scope: str | None = None  # as Complete's

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        check_int("attempt", self.attempt, 1, MAX_ATTEMPTS_LIMIT)
        if self.ttr_ms is not None:
            check_int("ttr_ms", self.ttr_ms, MIN_TTR_MS, MAX_TTR_MS)
        check_scope(self.scope)


@dataclass(frozen=True, slots=True)
class Pause:
    """``pause <name>``: the queue hands out no jobs until resumed. A queue's command,
    not a job's: the gateway writes it to every partition of the log, and each
    partition's processor keeps the queue's state with its jobs (streams/processor.py),
    so it survives restarts and replays like them."""

    type: ClassVar[CommandType] = CommandType.PAUSE
    name: str

    def __post_init__(self) -> None:
        check_name("name", self.name)


@dataclass(frozen=True, slots=True)
class Resume:
    """``resume <name>``: the queue hands out jobs again (see ``Pause``)."""

    type: ClassVar[CommandType] = CommandType.RESUME
    name: str

    def __post_init__(self) -> None:
        check_name("name", self.name)


@dataclass(frozen=True, slots=True)
class Depend:
    """A dependent's registration with one of its upstreams (docs/workflows.md, "Command
    types": 69), written by the dependent's processor once it has applied the dependent's
    add, into the *upstream's* partition: ``job_id`` is ``upstream``.
    ``dependent_created`` is the position of the dependent's add (the notices for it name
    it) and ``dependent_deadline_ms`` its TTL deadline (None: it has none), after which
    the registration is told nothing and may be dropped. ``scope``
    (docs/security.md, "Queue-name prefixes"; docs/workflows.md, "Command types"): the
    dependent's (its add's token prefix; None: none): an upstream whose queue is outside
    it is absent to the dependent, which is never told of it (decided by the upstream's
    processor, machine.py and followups.py)."""

    type: ClassVar[CommandType] = CommandType.DEPEND
    upstream: uuid.UUID
    dependent: uuid.UUID
    dependent_created: int
    dependent_deadline_ms: int | None
    scope: str | None = None

    def __post_init__(self) -> None:
        check_uuid("upstream", self.upstream)
        check_uuid("dependent", self.dependent)
        if self.upstream == self.dependent:
            raise ValueError("a job cannot be its own upstream")
        check_int("dependent_created", self.dependent_created, 0, MAX_OFFSET)
        if self.dependent_deadline_ms is not None:
            check_int("dependent_deadline_ms", self.dependent_deadline_ms, MIN_TIME_MS,
                      MAX_DEADLINE_MS)
        check_scope(self.scope)

    @property
    def job_id(self) -> uuid.UUID:
        """The job whose partition applies it (its key): the upstream."""
        return self.upstream


@dataclass(frozen=True, slots=True)
class Upstream:
    """An upstream's outcome, told one dependent (docs/workflows.md, "Command types": 70),
    written by the upstream's processor into the *dependent's* partition: ``job_id`` is
    ``dependent``. ``change`` is the position of the upstream's change that had this
    outcome and ``at_ms`` its broker time; ``result`` is the upstream's result for
    ``completed`` and ``failed`` (copied to the dependent as an input), None otherwise.
    Applied only to the dependent created at ``dependent_created``, and only when
    ``change`` is after the last change applied from that upstream (machine.py)."""

    type: ClassVar[CommandType] = CommandType.UPSTREAM
    dependent: uuid.UUID
    dependent_created: int
    upstream: uuid.UUID
    outcome: UpstreamOutcome
    change: int
    at_ms: int
    result: bytes | None = None

    def __post_init__(self) -> None:
        check_uuid("dependent", self.dependent)
        check_int("dependent_created", self.dependent_created, 0, MAX_OFFSET)
        check_uuid("upstream", self.upstream)
        if self.upstream == self.dependent:
            raise ValueError("a job cannot be its own upstream")
        outcome = self.outcome
        if type(outcome) is bool or not isinstance(outcome, int) or outcome not in NOTICE_OUTCOMES:
            raise ValueError(f"outcome must be one of {sorted(o.word for o in NOTICE_OUTCOMES)}, "
                             f"got {outcome!r}")
        object.__setattr__(self, "outcome", UpstreamOutcome(outcome))
        check_int("change", self.change, 0, MAX_OFFSET)
        check_int("at_ms", self.at_ms, MIN_TIME_MS, MAX_TIME_MS)
        if self.outcome in WITH_RESULT:
            check_bytes("result", self.result, MAX_PAYLOAD_BYTES)
        elif self.result is not None:
            raise ValueError(f"a {self.outcome.word} notice carries no result")

    @property
    def job_id(self) -> uuid.UUID:
        """The job whose partition applies it (its key): the dependent."""
        return self.dependent


QueueCommand: TypeAlias = Pause | Resume
QUEUE_COMMANDS = (Pause, Resume)  # isinstance(command, QUEUE_COMMANDS): it names no job


_check_recur_options = checker(RECUR_OPTIONS)


def check_recurrence_fields(c: object) -> None:
    """The fields a recurrence's definition shares with its ``recur`` command
    (eventq/core/recurrence.py ``Definition``): a name, and an add's job fields (the
    add a slot fires must be valid: docs/workflows.md, "Recurring jobs")."""
    check_name("name", getattr(c, "name"))
    _check_recur_options(c)


@dataclass(frozen=True, slots=True)
class Recur:
    """``recur`` (docs/workflows.md, "recur"; type 72): define recurrence ``name``, or
    replace its definition. Keyed ``recur:<name>`` (``key``), so one partition owns each
    recurrence; applied by eventq/core/recurrence.py, not by the job machine. Its
    ``created`` time is the command's broker time, as every time is."""

    type: ClassVar[CommandType] = CommandType.RECUR
    name: str
    job_name: str
    ttr_ms: int
    ttl_ms: int
    every_ms: int
    payload: bytes
    priority: int = PRIORITY.default
    max_attempts: int = MAX_ATTEMPTS.default
    max_fails: int = MAX_FAILS.default
    backoff_ms: int = BACKOFF.default
    tags: tuple[str, ...] = TAGS.default
    # [eventq] docs/security.md, "Queue-name prefixes": the issuing token's prefix (its
    # job_name is inside it); a recurrence of that name whose queue is outside it is not
    # replaced (Forbidden).
    scope: str | None = None

    def __post_init__(self) -> None:
        check_recurrence_fields(self)
        check_scope(self.scope, self.job_name)

    @property
    def key(self) -> bytes:
        return recurrence_key(self.name)


@dataclass(frozen=True, slots=True)
class Unrecur:
    """``unrecur <name>`` (type 73): the recurrence is gone; the jobs it added stay."""

    type: ClassVar[CommandType] = CommandType.UNRECUR
    name: str
    # [eventq] docs/security.md, "Queue-name prefixes": a recurrence whose queue is
    # outside it is absent to it.
    scope: str | None = None

    def __post_init__(self) -> None:
        check_name("name", self.name)
        check_scope(self.scope)

    @property
    def key(self) -> bytes:
        return recurrence_key(self.name)


@dataclass(frozen=True, slots=True)
class Fire:
    """A timer's word that slot ``slot`` of recurrence ``name`` is due (type 74):
    re-checked when applied, by the broker's clock (eventq/core/recurrence.py)."""

    type: ClassVar[CommandType] = CommandType.FIRE
    name: str
    slot: int

    def __post_init__(self) -> None:
        check_name("name", self.name)
        check_int("slot", self.slot, 0, MAX_TIME_MS // MIN_EVERY_MS)

    @property
    def key(self) -> bytes:
        return recurrence_key(self.name)


RECURRENCE_KEY_PREFIX = b"recur:"


def recurrence_key(name: str) -> bytes:
    """The Kafka key of a recurrence's commands, ``recur:<name>`` (docs/workflows.md, "Command
    types"): ``:`` is in neither a canonical UUID nor a name, so it never
    meets a job's key; its partition is murmur2's of it, as for every key."""
    return RECURRENCE_KEY_PREFIX + name.encode()


RecurrenceCommand: TypeAlias = Recur | Unrecur | Fire
RECURRENCE_COMMANDS = (Recur, Unrecur, Fire)  # isinstance: a recurrence's, not a job's
RECURRENCE_COMMAND_CLASSES: dict[CommandType, type] = {c.type: c for c in RECURRENCE_COMMANDS}
# Every command that names no job (no ``job_id``): a reader of jobs passes over them.
NO_JOB_COMMANDS = QUEUE_COMMANDS + RECURRENCE_COMMANDS


def command_key(command: "Command | QueueCommand | RecurrenceCommand") -> bytes:
    """The Kafka key a command is written under: a recurrence's ``recur:<name>``, else
    its job's canonical UUID (eventq.core.partitioner.job_key)."""
    if isinstance(command, RECURRENCE_COMMANDS):
        return command.key
    return str(command.job_id).encode()  # type: ignore[union-attr]  # a job's command


def is_paused_after(command: QueueCommand) -> bool:
    """The queue's paused state once ``command`` is applied (the whole fold: the last
    queue command of a partition decides, so re-reading a tail is harmless)."""
    return command.type is CommandType.PAUSE


@dataclass(frozen=True, slots=True)
class Import:
    """Install a complete job snapshot taken elsewhere (``eventq import-cmdlog``).

    It carries every ``Job`` field but ``version`` (that is the offset of this command
    once applied), so an imported job keeps its created time, TTL deadline, scheduled
    time, attempts, fails, state and result, where an ``add`` would restart the TTL at
    import time and lose the state. The snapshot must be a valid ``Job``: construction
    checks it exactly as ``Job`` does (``ValueError`` otherwise).

    Applied (``machine.decide``): to an absent job, it creates the job as given
    (``Imported``), unless its TTL has already passed at the command's broker time,
    then it is ``Ignored`` ("expired before import"); to an existing job it is a
    duplicate (``Duplicate job``), so re-running an import never overwrites newer state.

    Any valid state may be imported. A LEASED snapshot keeps its lease deadline, and the
    timers time it out as any lease; the workq importer never sends one (a workq log
    has no lease deadline and the lease's worker is gone: it imports LEASED as PENDING).
    """

    type: ClassVar[CommandType] = CommandType.IMPORT
    job_id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    priority: int
    max_attempts: int
    max_fails: int
    attempts: int
    fails: int
    state: State
    created_ms: int
    scheduled_ms: int | None
    expires_ms: int | None
    lease_deadline_ms: int | None
    result: bytes | None
    result_ok: bool | None
    backoff_ms: int = BACKOFF.default
    returns: int = 0
    retry_ms: int | None = None
    tags: tuple[str, ...] = TAGS.default

    def __post_init__(self) -> None:
        check_uuid("job_id", self.job_id)
        # Job validates every field and their consistency (and turns an int state into
        # a State); keep its state so the snapshot compares equal to the job's fields.
        object.__setattr__(self, "state", self.to_job(0).state)

    def to_job(self, version: int) -> Job:
        """The job this snapshot describes, at ``version`` (the applying offset)."""
        fields = dict(zip(SNAPSHOT_FIELD_NAMES, _snapshot_values(self)))
        return make_job({"id": self.job_id, **fields, "version": version})

    @classmethod
    def from_job(cls, job: Job) -> Import:
        """The snapshot of ``job`` (every field but ``version``). A job of a workflow has
        no snapshot: its links and its creation's position are those of its own log."""
        if has_workflow(job) or was_retried(job):
            raise ValueError("a job with upstreams, a failure group or a retry's time cannot "
                             "be imported")
        return cls(job_id=job.id, **dict(zip(SNAPSHOT_FIELD_NAMES, _snapshot_values(job))))


# An import's snapshot: every Job field but its id (the command's ``job_id``), its
# version (the applying offset) and the workflow's fields (an imported job has no
# upstreams); its tags are in it. Import must declare them all, in Job's order.
SNAPSHOT_FIELD_NAMES = tuple(
    name for name in JOB_FIELD_NAMES if name not in ("id", "version", *WORKFLOW_FIELD_NAMES)
)
_snapshot_values = attrgetter(*SNAPSHOT_FIELD_NAMES)  # of a Job or an Import, in that order
assert tuple(f.name for f in dataclass_fields(Import)) == ("job_id", *SNAPSHOT_FIELD_NAMES)


Command: TypeAlias = (
    Add | Schedule | Complete | Fail | Delete | Expire | StartAttempt | TimeoutAttempt | Import
    | ReleaseAttempt | Touch | Depend | Upstream | Retry
)

COMMAND_CLASSES: dict[CommandType, type] = {
    cls.type: cls
    for cls in (
        Add, Schedule, Complete, Fail, Delete, Expire, StartAttempt, TimeoutAttempt, Import,
        ReleaseAttempt, Touch, Depend, Upstream, Retry,
    )
}
"""The job commands (each names a job: ``job_id``); queue commands are apart."""

QUEUE_COMMAND_CLASSES: dict[CommandType, type] = {cls.type: cls for cls in QUEUE_COMMANDS}

# The table of options (eventq/core/fields.py) and the classes that hold them agree.
for _cls, _options in ((Add, ADD_OPTIONS), (Schedule, ADD_OPTIONS + (TIME,)),
                       (Recur, RECUR_OPTIONS), (Import, (BACKOFF, TAGS))):
    check_declared(_cls, _options)
check_declared(Import, WORKQ_OPTIONS, defaults=False)  # a snapshot: every field given
