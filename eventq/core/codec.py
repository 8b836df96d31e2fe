"""msgpack codecs for the two topics.

Command record (``eventq.commands`` value): a msgpack map with short keys, ``v`` the
schema version (1), ``t`` the command type (``CommandType``), then the command's fields,
then the issuer's optional correlation fields ``o`` and ``q`` and [eventq] its audit
field ``by``, the name of the token that issued it (docs/security.md; never the token).
A job's command names the job by ``i``; a queue's (pause, resume) has the queue's name
``n`` and no ``i``.

State record (``eventq.jobs`` value): ``{"v": 2, "e": event, "j": job or nil}``. Its
offsets (the event's ``o``, the job's ``ver``) are positions (eventq/core/batch.py);
a version 1 record, written when a record held one command, counted them in record
offsets and is read as position ``offset * POSITIONS_PER_OFFSET``. The event map has
``t`` (``EventType``) and the event's fields. A state record must fit a payload and a
result of 1 MiB each once (eventq/limits.py), so each is stored once, in the job: the
job of Added and Imported is the record's job, and the result of Completed and Failed
is the job's (``x`` only in a record without a job). ``encode_job`` writes a job on its
own: ``{"v": 2, "j": job}``.

[eventq] Workflows' records beside the jobs (eventq/core/workflow.py) are maps of their
own: ``encode_registration`` ``{"v": 1, "dp", "c", "dl"}`` and ``encode_input``
``{"v": 1, "ok", "x"}`` (``REGISTRATION_FIELDS``, ``INPUT_FIELDS``).

The fields of every map are data, in the order they are written: ``COMMAND_FIELDS``
(then ``CORRELATION_FIELDS``), ``EVENT_FIELDS`` (after ``EVENT_COMMON_FIELDS``),
``JOB_FIELDS`` and ``SNAPSHOT_FIELDS`` (an import's job) give each field's key, the
attribute it holds, its kind, and what its absence means. The encoders, the decoders,
the keys each map allows and the tables below are all derived from them: a new field
is one row (and its dataclass attribute; the module does not load if either is missing).

Decoding never raises anything but ``CodecError`` (a ``ValueError``): not msgpack, a
wrong schema version, a missing, unknown or mistyped field, an out-of-range value, or a
record that is inconsistent (a job whose id or version differs from its event).
"""

from __future__ import annotations

import builtins
import textwrap
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from enum import Enum
from operator import attrgetter
from typing import Any, TypeAlias

import msgpack

from eventq.core.commands import (
    COMMAND_CLASSES,
    QUEUE_COMMAND_CLASSES,
    RECURRENCE_COMMAND_CLASSES,
    SNAPSHOT_FIELD_NAMES,
    Command,
    CommandType,
    QueueCommand,
)
from eventq.core.events import (
    EVENT_CLASSES,
    NOTICE_EVENTS,
    REMOVING_EVENTS,
    Added,
    AttemptReleased,
    AttemptStarted,
    AttemptTimedOut,
    Completed,
    Event,
    EventType,
    Failed,
    Imported,
    Retried,
    Touched,
    UpstreamFailed,
    UpstreamRetried,
)
from eventq.core.ids import uuid_of_bytes
from eventq.core.job import (
    FAILED_GROUP,
    NOTICE_OUTCOMES,
    UPSTREAM_FAILED_GROUP,
    Job,
    Link,
    State,
    UpstreamOutcome,
    failure_group,
    link_of,
    link_outcome,
    make_job,
    upstream_failure,
)
from eventq.core.recurrence import Definition, Recurrence
from eventq.core.workflow import Input, Registration
from eventq.limits import MAX_AFTER_IDS, MAX_ISSUER_BYTES, MAX_NODE_BYTES, MAX_REQUEST_ID, MAX_TAGS

SCHEMA_VERSION = 1  # of command records
# State and job records: 2 counts versions in positions (eventq/core/batch.py); version
# 1 records (offsets) are still read, converted.
STATE_SCHEMA_VERSION = 2
_STATE_VERSIONS = frozenset({1, STATE_SCHEMA_VERSION})
# Positions per record offset (eventq.core.batch.POSITIONS_PER_OFFSET, which imports
# this module).
POSITIONS_PER_OFFSET = 1 << 16


class CodecError(ValueError):
    """A record that cannot be decoded (or a value that cannot be encoded)."""


@dataclass(frozen=True, slots=True)
class DecodedCommand:
    """A command with the optional correlation fields of its issuer (a job's command,
    or a queue's: ``Pause``/``Resume``, which name no job)."""

    command: Command | QueueCommand
    node: str | None = None
    request_id: int | None = None
    # [eventq] audit (docs/security.md): the name of the token that issued it (Grant.name,
    # e.g. ``line-3``, never the token); None: a server without tokens, or a command
    # eventq wrote itself (timers, follow-ups) or written before audit existed.
    issuer: str | None = None


# -------------------------------------------------------------------- field kinds


def _missing(key: str) -> CodecError:
    return CodecError(f"missing field {key!r}")


class _Unchecked:
    """The type of no msgpack value: a kind with it as ``plain`` reads every value."""


@dataclass(frozen=True, slots=True)
class Kind:
    """How a field's value is held in msgpack.

    ``read(key, value)`` returns the attribute's value of a msgpack value, or raises
    ``CodecError`` if it is none of this kind; ``write`` turns an attribute's value into
    its msgpack value (None: as it is) and may refuse it. A value of type ``plain`` is
    the attribute's value as it is, and ``read`` is not called: for most fields reading
    is one type test (the decoders are on the processor's hot path).
    """

    name: str  # in the docstring's tables
    read: Callable[[str, Any], Any]
    write: Callable[[Any], Any] | None = None
    plain: type = _Unchecked


def _typed(plain: type, what: str) -> Callable[[str, Any], Any]:
    def read(key: str, value: Any) -> Any:
        if type(value) is not plain:
            raise CodecError(f"field {key!r} must be {what}, got {type(value).__name__}")
        return value

    return read


INT = Kind("int", _typed(int, "an int"), plain=int)
STR = Kind("str", _typed(str, "a str"), plain=str)
BIN = Kind("bin", _typed(bytes, "bin"), plain=bytes)
BOOL = Kind("bool", _typed(bool, "a bool"), plain=bool)


def _read_uuid(key: str, value: Any) -> uuid.UUID:
    raw = value if type(value) is bytes else BIN.read(key, value)
    if len(raw) != 16:
        raise CodecError(f"field {key!r} must be 16 bytes of UUID, got {len(raw)}")
    return uuid_of_bytes(raw)


def _read_state(key: str, value: Any) -> State:
    # Not a state: ValueError, which _guarded makes a CodecError.
    return State(value if type(value) is int else INT.read(key, value))


def _read_waiting_state(key: str, value: Any) -> State:
    value = INT.read(key, value)
    if value not in (State.NEW, State.PENDING):
        raise CodecError(f"field {key!r} must be NEW (0) or PENDING (3), not {value}")
    return State(value)


_NODE_RULE = f"a str of at most {MAX_NODE_BYTES} bytes"
_REQUEST_ID_RULE = f"an int in 0..{MAX_REQUEST_ID}"


def _is_node(value: Any) -> bool:
    return type(value) is str and len(value.encode()) <= MAX_NODE_BYTES


def _read_node(key: str, value: Any) -> str:
    if not _is_node(value):
        raise CodecError(f"field {key!r} (node) must be {_NODE_RULE}")
    return value  # type: ignore[no-any-return]  # an unpacked value: Any, checked a str


def _write_node(node: Any) -> str:
    if not _is_node(node):
        raise CodecError(f"node must be {_NODE_RULE}")
    return node  # type: ignore[no-any-return]  # Any, checked a str just above


_ISSUER_RULE = f"a str of 1 to {MAX_ISSUER_BYTES} bytes"


def _is_issuer(value: Any) -> bool:
    return type(value) is str and 0 < len(value.encode()) <= MAX_ISSUER_BYTES


def _read_issuer(key: str, value: Any) -> str:
    if not _is_issuer(value):
        raise CodecError(f"field {key!r} (issuer) must be {_ISSUER_RULE}")
    return value  # type: ignore[no-any-return]  # an unpacked value: Any, checked a str


def _write_issuer(issuer: Any) -> str:
    if not _is_issuer(issuer):
        raise CodecError(f"issuer must be {_ISSUER_RULE}")
    return issuer  # type: ignore[no-any-return]  # Any, checked a str just above


def _is_request_id(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_REQUEST_ID


def _read_request_id(key: str, value: Any) -> int:
    if not _is_request_id(value):
        raise CodecError(f"field {key!r} (request id) must be {_REQUEST_ID_RULE}")
    return value  # type: ignore[no-any-return]  # an unpacked value: Any, checked an int


def _write_request_id(request_id: Any) -> int:
    if not _is_request_id(request_id):
        raise CodecError(f"request_id must be {_REQUEST_ID_RULE}")
    return request_id  # type: ignore[no-any-return]  # Any, checked an int just above


def _read_uuids(key: str, value: Any) -> tuple[uuid.UUID, ...]:
    if type(value) is not tuple or not 1 <= len(value) <= MAX_AFTER_IDS:
        raise CodecError(f"field {key!r} must be an array of 1 to {MAX_AFTER_IDS} UUIDs")
    return tuple(_read_uuid(key, item) for item in value)


def _write_uuids(ids: tuple[uuid.UUID, ...]) -> list[bytes]:
    return [u.bytes for u in ids]


def _read_notice_outcome(key: str, value: Any) -> UpstreamOutcome:
    if type(value) is not int or value not in NOTICE_OUTCOMES:
        raise CodecError(f"field {key!r} must be an upstream notice's outcome (1 to 5), "
                         f"got {value!r:.40}")
    return UpstreamOutcome(value)


_LINK_RULE = "an array of 1 to %d links [id, outcome, change or nil, completed or nil]" % MAX_AFTER_IDS


def _read_links(key: str, value: Any) -> tuple[Link, ...]:
    if type(value) is not tuple or not 1 <= len(value) <= MAX_AFTER_IDS:
        raise CodecError(f"field {key!r} must be {_LINK_RULE}")
    links = []
    for item in value:
        if type(item) is not tuple or len(item) != 4:
            raise CodecError(f"field {key!r} must be {_LINK_RULE}")
        raw_id, outcome, change, completed = item
        if type(outcome) is not int or (change is not None and type(change) is not int) or (
            completed is not None and type(completed) is not int
        ):
            raise CodecError(f"field {key!r} must be {_LINK_RULE}")
        try:
            links.append(Link(_read_uuid(key, raw_id), UpstreamOutcome(outcome), change, completed))
        except ValueError as error:
            raise CodecError(f"field {key!r}: {error}") from None
    return tuple(links)


def _write_links(links: tuple[Link, ...]) -> list[list[Any]]:
    return [[x.id.bytes, int(x.outcome), x.change, x.completed_ms] for x in links]


_TAGS_RULE = f"an array of 1 to {MAX_TAGS} tags (str)"


def _read_tags(key: str, value: Any) -> tuple[str, ...]:
    """A job's tags (each checked by the job or command the map builds)."""
    if type(value) is not tuple or not 1 <= len(value) <= MAX_TAGS or any(
        type(tag) is not str for tag in value
    ):
        raise CodecError(f"field {key!r} must be {_TAGS_RULE}")
    return value


UUID_BYTES = Kind("UUID: 16 bytes", _read_uuid, write=attrgetter("bytes"))
TAGS = Kind("array of tags", _read_tags)
UUIDS = Kind("array of UUIDs", _read_uuids, write=_write_uuids)
NOTICE_OUTCOME = Kind("UpstreamOutcome: 1 to 5", _read_notice_outcome, write=int)
LINKS = Kind("array of links", _read_links, write=_write_links)
STATE = Kind("State", _read_state, write=int)
WAITING_STATE = Kind("State: NEW or PENDING", _read_waiting_state, write=int)
NODE = Kind(_NODE_RULE.removeprefix("a "), _read_node, write=_write_node)
REQUEST_ID = Kind(_REQUEST_ID_RULE.removeprefix("an "), _read_request_id, write=_write_request_id)
ISSUER = Kind(_ISSUER_RULE.removeprefix("a "), _read_issuer, write=_write_issuer)


# ------------------------------------------------------------------------- fields


class Absent(Enum):
    """What a missing key means, when it is not a default value (``Field.absent``)."""

    REQUIRED = "required"  # a map without it is malformed
    IN_JOB = "in the job"  # the record's job holds the value: written only without one


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a map: ``key`` holds attribute ``attr`` of the record's dataclass.

    ``absent`` is what a missing key means: ``Absent.REQUIRED``, ``Absent.IN_JOB`` (the
    record's job's ``attr``), or a default value. A value equal to the default is not
    written, so that the records of commands and jobs that do not use a field added
    later keep the bytes they had (and older records read as what they meant). ``nil``:
    nil stands for None (and is written).
    """

    key: str
    attr: str
    kind: Kind
    absent: object = Absent.REQUIRED
    nil: bool = False
    note: str = ""  # more for the docstring's tables


@dataclass(frozen=True, slots=True)
class Nested:
    """A map under ``key`` whose ``fields`` are attributes of the record's own dataclass
    (an import's job snapshot); ``what`` names it in messages."""

    key: str
    what: str
    fields: tuple[Field, ...]


Table: TypeAlias = tuple[Field | Nested, ...]

# ------------------------------------------------------------------------- tables

JOB_FIELDS: tuple[Field, ...] = (
    Field("i", "id", UUID_BYTES),
    Field("n", "name", STR),
    Field("r", "ttr_ms", INT),
    Field("l", "ttl_ms", INT),
    Field("d", "payload", BIN),
    Field("p", "priority", INT),
    Field("ma", "max_attempts", INT),
    Field("mf", "max_fails", INT),
    Field("at", "attempts", INT),
    Field("fa", "fails", INT),
    Field("s", "state", STATE),
    Field("c", "created_ms", INT),
    Field("w", "scheduled_ms", INT, nil=True),
    Field("e", "expires_ms", INT, nil=True),
    Field("ld", "lease_deadline_ms", INT, nil=True),
    Field("x", "result", BIN, nil=True),
    Field("ok", "result_ok", BOOL, nil=True),
    # -backoff's, only when set: a job without a backoff has the record it had before
    # backoffs existed.
    Field("b", "backoff_ms", INT, absent=0),
    Field("rn", "returns", INT, absent=0),
    Field("rt", "retry_ms", INT, absent=None),
    # Workflows', only when set: a job without upstreams has the record it had before
    # workflows existed.
    Field("up", "upstreams", LINKS, absent=(), note="[id, outcome, change, completed ms]"),
    Field("ca", "added_at", INT, absent=None, note="the add's position"),
    Field("rl", "released_ms", INT, absent=None),
    Field("fp", "finished_at", INT, absent=None, note="a position"),
    Field("fm", "finished_ms", INT, absent=None),
    Field("g", "group", STR, absent=None, note="None: failed or attempts-exhausted"),
    # Tags', only when set (docs/workflows.md, "Tags"): likewise.
    Field("tg", "tags", TAGS, absent=()),
    # Retry's, only when set: a job never retried has the record it had before.
    Field("dt", "delayed_ms", INT, absent=None, note="retry -delay's time"),
    Field("er", "early", BOOL, absent=False, note="a retry made it ready before its time"),
    # A dependent's scope (docs/security.md), only when its add had one.
    Field("sc", "scope", STR, absent=None, note="a dependent's token prefix"),
    Field("ver", "version", INT),  # last: after the snapshot's fields (SNAPSHOT_FIELDS)
)
# An import's snapshot: the job map without ``i`` (the command's own) and ``ver`` (the
# applying offset).
SNAPSHOT_FIELDS = tuple(f for f in JOB_FIELDS if f.attr in SNAPSHOT_FIELD_NAMES)

_JOB_ID = Field("i", "job_id", UUID_BYTES)
_ATTEMPT = Field("k", "attempt", INT)
_RESULT = Field("x", "result", BIN)
_QUEUE_NAME = Field("n", "name", STR)
# [eventq] The issuing token's prefix (docs/security.md), only when it has one: a
# command of a token without a prefix keeps the bytes it had.
_SCOPE = Field("sc", "scope", STR, absent=None, note="the token's prefix")
# A new job's settings (add, schedule): schedule's time goes between these two parts.
_NEW_JOB = (_JOB_ID, _QUEUE_NAME, Field("r", "ttr_ms", INT), Field("l", "ttl_ms", INT))
_NEW_JOB_REST = (
    Field("d", "payload", BIN),
    Field("p", "priority", INT),
    Field("a", "max_attempts", INT),
    Field("f", "max_fails", INT),
    Field("b", "backoff_ms", INT, absent=0),  # absent when 0: workq's commands' bytes
    Field("af", "after", UUIDS, absent=()),  # absent when none, likewise
    Field("tg", "tags", TAGS, absent=()),  # likewise
    _SCOPE,
)
_DEPENDENT_CREATED = Field("c", "dependent_created", INT, note="the add's position")
_RECURRENCE_NAME = Field("rn", "name", STR)
# A recurrence's definition, as ``recur`` carries it (its record adds ``created``).
_RECURRENCE_FIELDS = (
    _RECURRENCE_NAME,
    Field("n", "job_name", STR),
    Field("r", "ttr_ms", INT),
    Field("l", "ttl_ms", INT),
    Field("ev", "every_ms", INT),
    Field("d", "payload", BIN),
    Field("p", "priority", INT),
    Field("a", "max_attempts", INT),
    Field("f", "max_fails", INT),
    Field("b", "backoff_ms", INT, absent=0),
    Field("tg", "tags", TAGS, absent=()),
)
_DELAY = Field("dl", "delay_ms", INT, absent=0)

COMMAND_FIELDS: dict[CommandType, Table] = {
    CommandType.ADD: _NEW_JOB + _NEW_JOB_REST,
    CommandType.SCHEDULE: _NEW_JOB + (Field("s", "time_ms", INT),) + _NEW_JOB_REST,
    CommandType.COMPLETE: (_JOB_ID, _RESULT, _SCOPE),
    # -group: absent when none, so workq's fails keep their bytes.
    CommandType.FAIL: (_JOB_ID, _RESULT, Field("fd", "group", STR, absent=None), _SCOPE),
    CommandType.DELETE: (_JOB_ID, _SCOPE),
    CommandType.EXPIRE: (_JOB_ID,),
    CommandType.START_ATTEMPT: (_JOB_ID, _ATTEMPT),
    CommandType.TIMEOUT_ATTEMPT: (_JOB_ID, _ATTEMPT),
    CommandType.IMPORT: (_JOB_ID, Nested("j", "import snapshot", SNAPSHOT_FIELDS)),
    CommandType.RELEASE_ATTEMPT: (
        _JOB_ID,
        _ATTEMPT,
        Field("s", "state", WAITING_STATE),
        # Absent: a give-back by attempt number (records written before claims).
        Field("c", "claim", INT, absent=None, note="the start-attempt's position"),
    ),
    CommandType.TOUCH: (
        _JOB_ID,
        _ATTEMPT,
        Field("r", "ttr_ms", INT, absent=None, note="None: the job's TTR"),
        _SCOPE,
    ),
    CommandType.PAUSE: (_QUEUE_NAME,),  # a queue's command: no job, no ``i``
    CommandType.RESUME: (_QUEUE_NAME,),
    # Workflows': ``i`` is the id of the job whose partition applies it, as for all.
    CommandType.DEPEND: (
        Field("i", "upstream", UUID_BYTES),
        Field("dp", "dependent", UUID_BYTES),
        _DEPENDENT_CREATED,
        Field("dl", "dependent_deadline_ms", INT, nil=True),
        _SCOPE,
    ),
    CommandType.UPSTREAM: (
        Field("i", "dependent", UUID_BYTES),
        _DEPENDENT_CREATED,
        Field("u", "upstream", UUID_BYTES),
        Field("oc", "outcome", NOTICE_OUTCOME),
        Field("ch", "change", INT, note="a position"),
        Field("a", "at_ms", INT),
        Field("x", "result", BIN, absent=None, note="completed, failed"),
    ),
    # Recurring jobs' (docs/workflows.md, "Recurring jobs"): keyed ``recur:<name>``,
    # with the recurrence's name ``rn`` and no ``i``.
    CommandType.RECUR: _RECURRENCE_FIELDS + (_SCOPE,),
    CommandType.UNRECUR: (_RECURRENCE_NAME, _SCOPE),
    CommandType.FIRE: (_RECURRENCE_NAME, Field("sl", "slot", INT)),
    CommandType.RETRY: (_JOB_ID, _DELAY, _SCOPE),
}
# Last in every command record: its issuer, when known (absent or nil: unknown).
CORRELATION_FIELDS: tuple[Field, ...] = (
    Field("o", "node", NODE, absent=None, nil=True),
    Field("q", "request_id", REQUEST_ID, absent=None, nil=True),
    # [eventq] audit (docs/security.md): who issued it, the token's name; absent: none.
    Field("by", "issuer", ISSUER, absent=None, nil=True, note="the token's name"),
)

# First in every event map, after ``t``.
EVENT_COMMON_FIELDS: tuple[Field, ...] = (
    Field("i", "job_id", UUID_BYTES),
    Field("a", "at_ms", INT),
    Field("o", "offset", INT),
)
# The keys around the field tables: every record's schema version and type, and the
# state record's envelope {version, event, job} (the module docstring). Readers that
# project a few fields without a full decode (core/slim.py, migrate/importer.py) take
# these and JOB_KEYS / EVENT_KEYS, never a spelled key.
VERSION_KEY = "v"
TYPE_KEY = "t"
EVENT_KEY = "e"
JOB_KEY = "j"
JOB_KEYS: dict[str, str] = {f.attr: f.key for f in JOB_FIELDS}  # Job attribute -> key
EVENT_KEYS: dict[str, str] = {f.attr: f.key for f in EVENT_COMMON_FIELDS}
_RESULT_IN_JOB = Field("x", "result", BIN, absent=Absent.IN_JOB)
_DEADLINE = Field("dl", "deadline_ms", INT)
_UPSTREAM = Field("u", "upstream", UUID_BYTES)
_NOTICE = (
    _UPSTREAM, Field("oc", "outcome", NOTICE_OUTCOME), Field("ch", "change", INT),
    Field("cm", "change_ms", INT),
)  # fmt: skip
EVENT_FIELDS: dict[EventType, tuple[Field, ...]] = {
    EventType.ADDED: (),
    EventType.COMPLETED: (_RESULT_IN_JOB,),
    EventType.FAILED: (_RESULT_IN_JOB, Field("g", "group", STR, absent=None)),
    EventType.FAIL_RETRIED: (),
    EventType.ATTEMPT_STARTED: (_ATTEMPT, _DEADLINE),
    EventType.ATTEMPTS_EXHAUSTED: (),
    EventType.ATTEMPT_TIMED_OUT: (_ATTEMPT, Field("rq", "requeued", BOOL)),
    EventType.DELETED: (),
    EventType.EXPIRED: (Field("ev", "evicted", BOOL),),
    EventType.IMPORTED: (),
    EventType.ATTEMPT_RELEASED: (_ATTEMPT, Field("s", "state", WAITING_STATE)),
    EventType.TOUCHED: (_ATTEMPT, _DEADLINE),
    EventType.FAIL_COUNTED: (),
    EventType.UPSTREAM_NOTED: _NOTICE,
    EventType.RELEASED: _NOTICE,
    EventType.UPSTREAM_FAILED: _NOTICE,
    EventType.RETRIED: (_DELAY,),
    EventType.UPSTREAM_RETRIED: _NOTICE,
}
# Registrations and inputs (eventq/core/workflow.py), each a record of its own.
REGISTRATION_FIELDS: tuple[Field, ...] = (
    Field("dp", "dependent", UUID_BYTES),
    _DEPENDENT_CREATED,
    Field("dl", "deadline_ms", INT, nil=True),
    Field("sc", "scope", STR, absent=None, note="the dependent's"),
)
INPUT_FIELDS: tuple[Field, ...] = (Field("ok", "completed", BOOL), Field("x", "result", BIN))
WORKFLOW_RECORD_VERSION = 1
# A recurrence's record (eventq/core/recurrence.py), a record of its own beside the
# jobs: ``{"v": 1, "df": definition, "fs", "lf", "ver"}``.
DEFINITION_FIELDS: tuple[Field, ...] = _RECURRENCE_FIELDS + (Field("c", "created_ms", INT),)
RECURRENCE_FIELDS: tuple[Field, ...] = (
    Field("fs", "first_slot", INT),
    Field("lf", "fired_ms", INT, absent=None, note="the last fired slot's due time"),
    Field("ver", "version", INT),
)
RECURRENCE_RECORD_VERSION = 1
DEFINITION_KEY = "df"
# Events whose ``job`` is the record's job (stored once, with its payload).
JOB_OF_THE_RECORD = frozenset({EventType.ADDED, EventType.IMPORTED})

# ------------------------------------------------------------------- map helpers

_NOT_THERE = object()  # what ``dict.get`` gives for a missing key (nil is None)


def _map(v: object, what: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise CodecError(f"{what} must be a msgpack map, got {type(v).__name__}")
    return v


def _check_keys(m: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if not m.keys() <= allowed:
        extra = sorted(map(str, m.keys() - allowed))
        raise CodecError(f"unknown field(s) in {what}: {', '.join(extra)}")


def _int(m: dict[str, Any], key: str) -> int:
    try:
        v = m[key]
    except KeyError:
        raise _missing(key) from None
    return INT.read(key, v) if type(v) is not int else v


def _keys(table: Table) -> frozenset[str]:
    return frozenset(f.key for f in table)


def _holders(f: Field) -> str:
    """The events that have field ``f`` ("Completed or Failed"), for a message."""
    return " or ".join(EVENT_CLASSES[t].__name__ for t, table in EVENT_FIELDS.items() if f in table)


def _slow_read(f: Field) -> Callable[[Any, Job | None], Any]:
    """Field ``f``'s value when its msgpack value ``v`` is not simply of the kind's
    ``plain`` type: absent (``_NOT_THERE``), nil, or one that ``read`` checks (and
    converts, or refuses)."""
    key, attr, read, absent, nil = f.key, f.attr, f.kind.read, f.absent, f.nil
    lacking = f"a {_holders(f)} event needs its {attr} or the record's job"

    def slow_read(v: Any, job: Job | None) -> Any:  # job: the record's, for an event
        if v is _NOT_THERE:
            if absent is Absent.REQUIRED:
                raise _missing(key)
            if absent is not Absent.IN_JOB:
                return absent
            # Not in a record with a job, nor in one written before the job held it.
            if job is None or getattr(job, attr) is None:
                raise CodecError(lacking)
            return getattr(job, attr)
        return None if v is None and nil else read(key, v)

    return slow_read


def _inner_map(n: Nested) -> Callable[[Any], dict[str, Any]]:
    key, what, allowed = n.key, n.what, _keys(n.fields)

    def inner_map(v: Any) -> dict[str, Any]:
        if v is _NOT_THERE:
            raise _missing(key)
        inner = _map(v, what)
        _check_keys(inner, allowed, what)
        return inner

    return inner_map


# ------------------------------------------------------------ compiled tables
# Each table is compiled once, when the module loads, into a reader and a writer made as
# Python source (as ``dataclasses`` makes ``__init__``; a function's ``__source__`` shows
# it). A field then costs what a hand-written line did, a dict lookup and a type test: a
# loop over the table's fields cost a call per field, 20% more per record, and the codec
# is on the processor's hot path.

_Read: TypeAlias = Callable[[dict[str, Any], Any], Any]
_Write: TypeAlias = Callable[[Any, Job | None, dict[str, Any]], None]


class _Source:
    """The lines of one generated function, and the objects they name."""

    def __init__(self, name: str, params: str) -> None:
        self.function_name = name
        self.lines = [f"def {name}({params}):"]
        self.names: dict[str, object] = {"_NOT_THERE": _NOT_THERE}
        self.locals = 0

    def name(self, obj: object) -> str:
        """A name the source can use for ``obj``."""
        name = f"_{len(self.names)}"
        self.names[name] = obj
        return name

    def local(self, prefix: str) -> str:
        self.locals += 1
        return f"{prefix}{self.locals}"

    def add(self, *lines: str, indent: int = 1) -> None:
        self.lines += ["    " * indent + line for line in lines]

    def function(self, label: str) -> Callable[..., Any]:
        """The function the lines define (``label`` is its file name in tracebacks)."""
        text = "\n".join(self.lines)
        namespace: dict[str, Any] = dict(self.names)
        exec(compile(text, f"<eventq.core.codec: {label}>", "exec"), namespace)
        function = namespace[self.function_name]
        function.__source__ = text  # for whoever debugs a table
        return function  # type: ignore[no-any-return]  # exec's namespace holds Any


def _plain_name(src: _Source, plain: type) -> str:
    """How the source names a kind's plain type (a builtin by its name: readable)."""
    return plain.__name__ if getattr(builtins, plain.__name__, None) is plain else src.name(plain)


def _read_fields(src: _Source, table: Table, m: str, into: list[tuple[str, str]]) -> None:
    """Lines reading ``table``'s fields from map ``m`` in order: the first malformed
    field is the one reported. ``into`` collects (attribute, local variable)."""
    for f in table:
        if isinstance(f, Nested):
            inner = src.local("m")
            src.add(f"{inner} = {src.name(_inner_map(f))}({m}.get({f.key!r}, _NOT_THERE))")
            _read_fields(src, f.fields, inner, into)
            continue
        value, slow = src.local("a"), f"{src.name(_slow_read(f))}(v, given)"
        # The common case is one test: a value of the kind's plain type (or nil, when
        # nil is None) is the attribute's value as it is. A kind without a plain type
        # reads every value that is there.
        if f.kind.plain is _Unchecked:
            read = f"{src.name(f.kind.read)}({f.key!r}, v)"
            tests, otherwise = [], f"{read} if v is not _NOT_THERE else {slow}"
        else:
            tests, otherwise = [f"type(v) is {_plain_name(src, f.kind.plain)}"], slow
        tests += ["v is None"] if f.nil else []
        src.add(
            f"v = {m}.get({f.key!r}, _NOT_THERE)",
            f"{value} = " + (f"v if {' or '.join(tests)} else {otherwise}" if tests else otherwise),
        )
        into.append((f.attr, value))


def _reader(table: Table, build: Callable[..., Any], given: str | None, label: str) -> _Read:
    """What builds the object a map holds: ``build`` called with its attributes by name
    (``make_job``: with one mapping of them), the attribute ``given`` (if any) being
    what the reader is given besides the map (an event's job: the record's)."""
    src, values = _Source("read", "m, given"), []  # type: ignore[var-annotated]  # (value, name) pairs
    _read_fields(src, table, "m", values)
    values += [(given, "given")] if given is not None else []
    if build is make_job:
        arguments = "{" + ", ".join(f"{a!r}: {v}" for a, v in values) + "}"
    else:
        arguments = ", ".join(f"{a}={v}" for a, v in values)
    src.add(f"return {src.name(build)}({arguments})")
    return src.function(label)


def _msgpack_value(src: _Source, f: Field, v: str) -> str:
    """The expression of field ``f``'s msgpack value, its attribute's value being ``v``."""
    if f.kind.write is None:
        return v
    written = f"{src.name(f.kind.write)}({v})"
    return f"None if {v} is None else {written}" if f.nil and f.absent is not None else written


def _write_fields(src: _Source, table: Table, m: str) -> None:
    """Lines writing ``table``'s fields of object ``o`` into map ``m``, in order."""
    for f in table:
        if isinstance(f, Nested):
            inner = src.local("m")
            src.add(f"{m}[{f.key!r}] = {inner} = {{}}")
            _write_fields(src, f.fields, inner)
            continue
        assert f.attr.isidentifier(), f
        store = f"{m}[{f.key!r}] = "
        if f.absent is Absent.REQUIRED:
            src.add(store + _msgpack_value(src, f, f"o.{f.attr}"))
        elif f.absent is Absent.IN_JOB:  # the record's job holds it
            src.add("if job is None:", "    " + store + _msgpack_value(src, f, f"o.{f.attr}"))
        else:  # left out when it is the default: the bytes records had before the field
            literal = type(f.absent) in (int, str, bytes, bool)  # readable in the source
            default = repr(f.absent) if literal else src.name(f.absent)
            src.add(
                f"v = o.{f.attr}",
                "if v is not None:" if f.absent is None else f"if v != {default}:",
                "    " + store + _msgpack_value(src, f, "v"),
            )


def _writer(table: Table, label: str) -> _Write:
    """What writes ``table``'s fields of an object into a map (after what it holds)."""
    src = _Source("write", "o, job, m")
    _write_fields(src, table, "m")
    return src.function(label)


# -------------------------------------------------------------------- record codecs


@dataclass(frozen=True, slots=True)
class _Codec:
    """A record type's table, compiled once: its dataclass, the keys its map may have,
    what writes an object's fields into a map, and what reads a map into an object."""

    cls: type
    keys: frozenset[str]
    write: _Write
    read: _Read


def _attrs(table: Iterable[Field | Nested]) -> set[str]:
    return {a for f in table for a in (_attrs(f.fields) if isinstance(f, Nested) else [f.attr])}


def _compiled(
    cls: type, table: Table, around: frozenset[str], given: str | None = None,
    build: Callable[..., Any] | None = None,
) -> _Codec:
    """``around``: the other keys of the map (a record's header and trailer); ``given``:
    the attribute of ``cls`` that the map does not hold, given to the reader."""
    # An attribute without a field, or a field of no attribute: the table is wrong.
    not_in_map = {given} if given is not None else set()
    if _attrs(table) | not_in_map != {f.name for f in dataclass_fields(cls)}:
        raise AssertionError(f"the fields of {cls.__name__} and its table differ")
    return _Codec(
        cls, around | _keys(table), _writer(table, cls.__name__),
        _reader(table, build or cls, given, cls.__name__),
    )  # fmt: skip


def _command_codec(t: CommandType) -> _Codec:
    cls = COMMAND_CLASSES.get(t) or QUEUE_COMMAND_CLASSES.get(t) or RECURRENCE_COMMAND_CLASSES[t]
    return _compiled(cls, COMMAND_FIELDS[t], _COMMAND_AROUND)


def _event_codec(t: EventType) -> _Codec:
    table = EVENT_COMMON_FIELDS + EVENT_FIELDS[t]
    job = "job" if t in JOB_OF_THE_RECORD else None
    return _compiled(EVENT_CLASSES[t], table, frozenset({"t"}), job)


_COMMAND_AROUND = frozenset({"v", "t"}) | _keys(CORRELATION_FIELDS)
_COMMAND_CODECS: dict[int, _Codec] = {t: _command_codec(t) for t in CommandType}
_COMMAND_CODEC_OF: dict[type, _Codec] = {c.cls: c for c in _COMMAND_CODECS.values()}
_CORRELATION = _compiled(DecodedCommand, CORRELATION_FIELDS, frozenset(), "command")
_EVENT_CODECS: dict[int, _Codec] = {t: _event_codec(t) for t in EventType}
_EVENT_CODEC_OF: dict[type, _Codec] = {c.cls: c for c in _EVENT_CODECS.values()}
_JOB = _compiled(Job, JOB_FIELDS, frozenset(), build=make_job)  # by name, as all of core
_REGISTRATION = _compiled(Registration, REGISTRATION_FIELDS, frozenset({VERSION_KEY}))
_INPUT = _compiled(Input, INPUT_FIELDS, frozenset({VERSION_KEY}))
_DEFINITION = _compiled(Definition, DEFINITION_FIELDS, frozenset())
_RECURRENCE = _compiled(Recurrence, RECURRENCE_FIELDS, frozenset({VERSION_KEY, DEFINITION_KEY}),
                        given="definition")

# ------------------------------------------------------------------------ records


def _unpack(data: object, versions: frozenset[int] = frozenset({SCHEMA_VERSION})) -> dict[str, Any]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"a record must be bytes, got {type(data).__name__}")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"not a msgpack record: {exc}") from None
    m = _map(obj, "a record")
    v = m.get("v")
    if type(v) is not int or v not in versions:
        expected = " or ".join(str(x) for x in sorted(versions))
        raise CodecError(f"unsupported schema version {v!r} (expected {expected})")
    return m


def _positions_from_offsets(m: dict[str, Any], *fields: tuple[str, str]) -> dict[str, Any]:
    """A version-1 state or job record counted positions in record offsets (one command
    per record): the same place is position ``offset * POSITIONS_PER_OFFSET`` now."""
    if m.get("v") != 1:
        return m
    for outer, key in fields:
        inner = m.get(outer)
        if type(inner) is dict and type(inner.get(key)) is int:
            inner[key] = inner[key] * POSITIONS_PER_OFFSET
    return m


def _pack(m: dict[str, Any]) -> bytes:
    return msgpack.packb(m, use_bin_type=True)  # type: ignore[no-any-return]  # msgpack is untyped


def _guarded(what: str, fn: Callable[[Any], Any], data: object) -> Any:
    """Run a decoder; any error but CodecError becomes one (decoders never leak others)."""
    try:
        return fn(data)
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"invalid {what}: {exc}") from None


# ----------------------------------------------------------------------- commands


def encode_command(
    command: Command | QueueCommand, *, node: str | None = None, request_id: int | None = None,
    issuer: str | None = None,
) -> bytes:
    """The command record of ``command``, with the issuer's optional correlation fields
    and [eventq] audit name (``issuer``: the token's name, docs/security.md)."""
    codec = _COMMAND_CODEC_OF.get(type(command))
    if codec is None:
        raise CodecError(f"not a command: {command!r:.100}")
    m: dict[str, Any] = {"v": SCHEMA_VERSION, "t": int(command.type)}
    codec.write(command, None, m)
    if node is not None or request_id is not None or issuer is not None:
        _CORRELATION.write(DecodedCommand(command, node, request_id, issuer), None, m)
    return _pack(m)


def _decode_command(data: object) -> DecodedCommand:
    m = _unpack(data)
    t = _int(m, "t")
    codec = _COMMAND_CODECS.get(t)
    if codec is None:
        raise CodecError(f"unknown command type {t}")
    _check_keys(m, codec.keys, f"command type {t}")
    return _CORRELATION.read(m, codec.read(m, None))  # type: ignore[no-any-return]  # exec-built reader


def decode_command(data: bytes) -> DecodedCommand:
    """The command (and correlation fields) of a command record; ``CodecError`` if bad."""
    return _guarded("command", _decode_command, data)  # type: ignore[no-any-return]  # _guarded: Any


def correlation_of(data: object) -> tuple[str | None, int | None]:
    """The issuer (node, request id) of a record that may not decode as a command, so
    that whoever waits for it can be told it was rejected; (None, None) if unknown.
    Never raises."""
    try:
        m = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:
        return None, None
    if type(m) is not dict:
        return None, None
    node, request_id = m.get("o"), m.get("q")
    if type(node) is not str or type(request_id) is not int:
        return None, None
    return node, request_id


# ------------------------------------------------------------------- state records

# The state a job is in right after an event of each type (None: gone).
_STATES_AFTER: dict[int, frozenset[State] | None] = {
    EventType.ADDED: frozenset({State.NEW, State.WAITING}),
    EventType.COMPLETED: frozenset({State.COMPLETED}),
    EventType.FAILED: frozenset({State.FAILED}),
    EventType.FAIL_RETRIED: frozenset({State.PENDING}),
    EventType.ATTEMPT_STARTED: frozenset({State.LEASED}),
    EventType.ATTEMPTS_EXHAUSTED: frozenset({State.FAILED}),
    EventType.ATTEMPT_TIMED_OUT: frozenset({State.PENDING, State.FAILED}),
    EventType.DELETED: None,
    EventType.EXPIRED: None,
    EventType.IMPORTED: frozenset(State),  # a snapshot may be in any state
    EventType.ATTEMPT_RELEASED: frozenset({State.NEW, State.PENDING}),
    EventType.TOUCHED: frozenset({State.LEASED}),
    EventType.FAIL_COUNTED: frozenset({State.WAITING}),
    EventType.UPSTREAM_NOTED: frozenset(State),  # recorded in any state
    EventType.RELEASED: frozenset({State.NEW}),
    EventType.UPSTREAM_FAILED: frozenset({State.FAILED}),
    EventType.RETRIED: frozenset({State.NEW, State.WAITING}),
    EventType.UPSTREAM_RETRIED: frozenset({State.WAITING, State.FAILED}),
}
assert set(_STATES_AFTER) == set(EventType) and set(EVENT_FIELDS) == set(EventType)
assert {t for t, s in _STATES_AFTER.items() if s is None} == REMOVING_EVENTS


def _inconsistency(event: Event, job: Job | None) -> str | None:
    """Why ``job`` cannot be the state right after ``event`` (None if it can)."""
    states = _STATES_AFTER[event.type]
    if job is None:
        # A removed job is written as a Kafka tombstone; a record with no job is still
        # accepted after any event (e.g. an audit copy), but a live job needs its state.
        return None if states is None else f"{type(event).__name__} leaves a live job"
    if states is None:
        return f"{type(event).__name__} leaves no job"
    if job.id != event.job_id:
        return f"job {job.id} stored under an event for {event.job_id}"
    if job.version != event.offset:
        return f"job version {job.version} differs from the event offset {event.offset}"
    if job.state not in states:
        return f"a {job.state.name} job cannot follow {type(event).__name__}"
    if isinstance(event, (Added, Imported)) and event.job != job:
        return f"the {'added' if isinstance(event, Added) else 'imported'} job differs from the record's job"
    if isinstance(event, (AttemptStarted, Touched)) and (
        job.attempts != event.attempt or job.lease_deadline_ms != event.deadline_ms
    ):
        return f"the leased job's attempt or deadline differs from {type(event).__name__}"
    if isinstance(event, AttemptTimedOut) and (
        job.attempts != event.attempt or event.requeued is not (job.state is State.PENDING)
    ):
        return "the job's attempt or state differs from AttemptTimedOut"
    if isinstance(event, AttemptReleased) and (
        job.attempts != event.attempt - 1 or job.state is not event.state
    ):
        return "the job's attempts or state differ from AttemptReleased"
    if isinstance(event, (Completed, Failed)) and job.result != event.result:
        return "the job's result differs from the event's"
    if isinstance(event, Failed) and failure_group(job) != (event.group or FAILED_GROUP):
        return "the job's failure group differs from the fail's"
    if isinstance(event, Retried) and (job.attempts or job.fails or job.returns):
        return "a retried job has no attempts, fails nor returns"
    if isinstance(event, NOTICE_EVENTS):
        link = link_of(job, event.upstream)
        if link is None or link.change != event.change or link.outcome is not link_outcome(
            event.outcome
        ):
            return f"the job's link to its upstream differs from {type(event).__name__}"
        if isinstance(event, UpstreamFailed) and (
            job.group != UPSTREAM_FAILED_GROUP
            or job.result != upstream_failure(event.upstream, event.outcome)
        ):
            return "the job's group or result differs from UpstreamFailed"
        if isinstance(event, UpstreamRetried) and job.state is State.FAILED and (
            job.group != UPSTREAM_FAILED_GROUP
        ):
            return "a dependent UpstreamRetried leaves FAILED is in upstream-failed"
    return None


def _enc_job(job: Job) -> dict[str, Any]:
    m: dict[str, Any] = {}
    _JOB.write(job, None, m)
    return m


def _dec_job(v: object) -> Job:
    m = _map(v, "job")
    _check_keys(m, _JOB.keys, "job")
    return _JOB.read(m, None)  # type: ignore[no-any-return]  # exec-built reader


def encode_state(event: Event, job: Job | None) -> bytes:
    """The state record: ``event`` (the last change) and the job's state after it."""
    codec = _EVENT_CODEC_OF.get(type(event))
    if codec is None:
        raise CodecError(f"not an event: {event!r:.100}")
    if job is not None and not isinstance(job, Job):
        raise CodecError(f"not a job: {job!r:.100}")
    problem = _inconsistency(event, job)
    if problem is not None:
        raise CodecError(problem)
    e: dict[str, Any] = {TYPE_KEY: int(event.type)}
    codec.write(event, job, e)
    return _pack({VERSION_KEY: STATE_SCHEMA_VERSION, EVENT_KEY: e,
                  JOB_KEY: None if job is None else _enc_job(job)})


def _decode_event(v: object, job: Job | None) -> Event:
    em = _map(v, "event")
    t = _int(em, TYPE_KEY)
    codec = _EVENT_CODECS.get(t)
    if codec is None:
        raise CodecError(f"unknown event type {t}")
    _check_keys(em, codec.keys, f"event type {t}")
    if t in JOB_OF_THE_RECORD and job is None:
        raise CodecError(f"an {codec.cls.__name__} event needs the record's job")
    return codec.read(em, job)  # type: ignore[no-any-return]  # exec-built reader


def _decode_state(data: object) -> tuple[Event, Job | None]:
    m = _positions_from_offsets(_unpack(data, _STATE_VERSIONS),
                                (EVENT_KEY, EVENT_KEYS["offset"]), (JOB_KEY, JOB_KEYS["version"]))
    _check_keys(m, frozenset({VERSION_KEY, EVENT_KEY, JOB_KEY}), "state record")
    if EVENT_KEY not in m:
        raise _missing(EVENT_KEY)
    if JOB_KEY not in m:
        raise _missing(JOB_KEY)
    job = None if m[JOB_KEY] is None else _dec_job(m[JOB_KEY])
    event = _decode_event(m[EVENT_KEY], job)
    problem = _inconsistency(event, job)
    if problem is not None:
        raise CodecError(problem)
    return event, job


def decode_state(data: bytes) -> tuple[Event, Job | None]:
    """The (event, job) of a state record; ``CodecError`` if it is malformed."""
    return _guarded("state record", _decode_state, data)  # type: ignore[no-any-return]  # _guarded: Any


def encode_job(job: Job) -> bytes:
    """A job on its own (its full state), e.g. for snapshots and exports."""
    if not isinstance(job, Job):
        raise CodecError(f"not a job: {job!r:.100}")
    return _pack({VERSION_KEY: STATE_SCHEMA_VERSION, JOB_KEY: _enc_job(job)})


def _decode_job(data: object) -> Job:
    m = _positions_from_offsets(_unpack(data, _STATE_VERSIONS), (JOB_KEY, JOB_KEYS["version"]))
    _check_keys(m, frozenset({VERSION_KEY, JOB_KEY}), "job record")
    if JOB_KEY not in m:
        raise _missing(JOB_KEY)
    return _dec_job(m[JOB_KEY])


def decode_job(data: bytes) -> Job:
    """The job of an ``encode_job`` record; ``CodecError`` if it is malformed."""
    return _guarded("job record", _decode_job, data)  # type: ignore[no-any-return]  # _guarded: Any


# ------------------------------------------------------- registrations and inputs


def encode_registration(registration: Registration) -> bytes:
    """The value of a registration record (eventq/core/workflow.py)."""
    if not isinstance(registration, Registration):
        raise CodecError(f"not a registration: {registration!r:.100}")
    m: dict[str, Any] = {VERSION_KEY: WORKFLOW_RECORD_VERSION}
    _REGISTRATION.write(registration, None, m)
    return _pack(m)


def _decode_side(codec: _Codec, what: str) -> Callable[[object], Any]:
    versions = frozenset({WORKFLOW_RECORD_VERSION})

    def decode(data: object) -> Any:
        m = _unpack(data, versions)
        _check_keys(m, codec.keys, what)
        return codec.read(m, None)

    return decode


_decode_registration = _decode_side(_REGISTRATION, "registration")
_decode_input = _decode_side(_INPUT, "input")


def decode_registration(data: bytes) -> Registration:
    """The registration of a registration record; ``CodecError`` if it is malformed."""
    return _guarded("registration", _decode_registration, data)  # type: ignore[no-any-return]  # _guarded: Any


def encode_input(input_: Input) -> bytes:
    """The value of an input record (eventq/core/workflow.py)."""
    if not isinstance(input_, Input):
        raise CodecError(f"not an input: {input_!r:.100}")
    m: dict[str, Any] = {VERSION_KEY: WORKFLOW_RECORD_VERSION}
    _INPUT.write(input_, None, m)
    return _pack(m)


def decode_input(data: bytes) -> Input:
    """The input of an input record; ``CodecError`` if it is malformed."""
    return _guarded("input", _decode_input, data)  # type: ignore[no-any-return]  # _guarded: Any


# ---------------------------------------------------------------- recurrences


def encode_recurrence(record: Recurrence) -> bytes:
    """The value of a recurrence's record (eventq/core/recurrence.py)."""
    if not isinstance(record, Recurrence):
        raise CodecError(f"not a recurrence: {record!r:.100}")
    definition: dict[str, Any] = {}
    _DEFINITION.write(record.definition, None, definition)
    m: dict[str, Any] = {VERSION_KEY: RECURRENCE_RECORD_VERSION, DEFINITION_KEY: definition}
    _RECURRENCE.write(record, None, m)
    return _pack(m)


def _decode_recurrence(data: object) -> Recurrence:
    m = _unpack(data, frozenset({RECURRENCE_RECORD_VERSION}))
    _check_keys(m, _RECURRENCE.keys, "recurrence")
    if DEFINITION_KEY not in m:
        raise _missing(DEFINITION_KEY)
    inner = _map(m[DEFINITION_KEY], "definition")
    _check_keys(inner, _DEFINITION.keys, "definition")
    definition = _DEFINITION.read(inner, None)
    return _RECURRENCE.read(m, definition)  # type: ignore[no-any-return]  # exec-built reader


def decode_recurrence(data: bytes) -> Recurrence:
    """The recurrence of a recurrence record; ``CodecError`` if it is malformed."""
    return _guarded("recurrence", _decode_recurrence, data)  # type: ignore[no-any-return]  # _guarded: Any


def encode_links(links: tuple[Link, ...]) -> bytes:
    """A dependent's links on their own, as its job map holds them (``up``): for
    readers that keep them apart from the job (eventq/spark/rows.py)."""
    return msgpack.packb(_write_links(links), use_bin_type=True)  # type: ignore[no-any-return]  # msgpack is untyped


def _decode_links(data: object) -> tuple[Link, ...]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"links must be bytes, got {type(data).__name__}")
    try:
        value = msgpack.unpackb(data, raw=False, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"not msgpack links: {exc}") from None
    return _read_links(JOB_KEYS["upstreams"], value)


def decode_links(data: bytes) -> tuple[Link, ...]:
    """The links of ``encode_links``; ``CodecError`` if they are malformed."""
    return _guarded("links", _decode_links, data)  # type: ignore[no-any-return]  # _guarded: Any


# ------------------------------------------------------------ the tables, as text
# The docstring's tables are made of the field tables, so they cannot disagree.

_TABLE_WIDTH = 88


def _describe(f: Field | Nested) -> str:
    """A field as the docstring's tables show it: attribute (kind), and its absence."""
    if isinstance(f, Nested):
        return f"{f.what} (map, below)"
    text = f"{f.attr} ({f.kind.name})" + (f", {f.note}" if f.note else "")
    if f.absent is Absent.IN_JOB:
        return text + ", only in a record without a job (absent: the job's)"
    if f.absent is Absent.REQUIRED:
        return text + (", nil for None" if f.nil else "")
    return text + f", optional (absent{' or nil' if f.nil else ''}: {f.absent!r})"


def _type_name(t: Enum) -> str:
    return t.name.lower().replace("_", "-")


def _where(present: list[str], every: list[str]) -> str:
    """Which record types have a row: the short way of saying it."""
    missing = [name for name in every if name not in present]
    if not missing:
        return "all"
    return f"all but {', '.join(missing)}" if len(missing) < len(present) else ", ".join(present)


def _rows(tables: Mapping[Any, Table], head: Table, tail: Table) -> list[tuple[str, str, str]]:
    """(key, field, where) of the fields of every table, ``head`` and ``tail`` those of
    all: in the order they are first written, a field written alike by several record
    types in one row."""
    every = [_type_name(t) for t in tables]
    seen: dict[tuple[str, str], list[str]] = {}
    for part in (lambda table: head, lambda table: table, lambda table: tail):
        for t, table in tables.items():
            for f in part(table):
                seen.setdefault((f.key, _describe(f)), []).append(_type_name(t))
    return [(key, text, _where(present, every)) for (key, text), present in seen.items()]


def _text_table(heads: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """An RST simple table; the last two columns wrap (their lines continue the row)."""
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    room = _TABLE_WIDTH - sum(widths[:-2]) - 2 * (len(heads) - 1)
    if len(heads) > 1:
        widths[-2] = min(widths[-2], room * 3 // 5)
    widths[-1] = min(widths[-1], _TABLE_WIDTH - sum(widths[:-1]) - 2 * (len(heads) - 1))
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip(), rule]
    for row in rows:
        cells = [textwrap.wrap(c, w) or [""] for c, w in zip(row, widths)]
        for n in range(max(map(len, cells))):
            parts = [c[n] if n < len(c) else "" for c in cells]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths)).rstrip())
    return "\n".join([*lines, rule])


def _tables_text() -> str:
    """The docstring's tables of every record's fields, made of the field tables."""
    version = Field("v", "schema version", Kind(str(SCHEMA_VERSION), INT.read))
    command_type = Field("t", "type", Kind("CommandType", INT.read))
    event_type = Field("t", "type", Kind("EventType", INT.read))
    left_out = [f.key for f in JOB_FIELDS if f not in SNAPSHOT_FIELDS]
    commands = _rows(COMMAND_FIELDS, (version, command_type), CORRELATION_FIELDS)
    events = _rows(EVENT_FIELDS, (event_type,) + EVENT_COMMON_FIELDS, ())
    jobs = [(f.key, _describe(f)) for f in JOB_FIELDS]
    job_events = " and ".join(EVENT_CLASSES[t].__name__ for t in sorted(JOB_OF_THE_RECORD))
    return "\n\n".join([
        "Command record fields (``COMMAND_FIELDS``, ``CORRELATION_FIELDS``):",
        _text_table(("key", "field", "in"), commands),
        textwrap.fill(
            "Event map fields (``EVENT_COMMON_FIELDS``, ``EVENT_FIELDS``); the event's "
            f"job, of {job_events}, is the record's job:", _TABLE_WIDTH,
        ),
        _text_table(("key", "field", "in"), events),
        textwrap.fill(
            "Job map fields (``JOB_FIELDS``); an import's snapshot (``SNAPSHOT_FIELDS``) "
            f"is the job map without {' and '.join(f'``{k}``' for k in left_out)}:",
            _TABLE_WIDTH,
        ),
        _text_table(("key", "field"), jobs),
    ])  # fmt: skip


if __doc__ is not None:  # None under python -OO
    __doc__ += "\n" + _tables_text() + "\n"
