"""msgpack codecs for the two topics.

Command record (``eventq.commands`` value), a msgpack map with short keys:

====  ===========================================  =================================
key   meaning                                      present in
====  ===========================================  =================================
v     schema version, 1                            all
t     command type (``CommandType``)               all
i     job id, the 16 raw UUID bytes                all
n     name (str)                                   add, schedule
r     ttr_ms                                       add, schedule
l     ttl_ms                                       add, schedule
s     time_ms                                      schedule
d     payload (bin)                                add, schedule
p     priority                                     add, schedule
a     max_attempts                                 add, schedule
f     max_fails                                    add, schedule
x     result (bin)                                 complete, fail
k     attempt                                      start-attempt, timeout-attempt,
                                                   release-attempt, touch
c     claim: the start-attempt's position,         release-attempt
      optional (absent: by attempt number)
b     backoff_ms, optional (absent: 0)             add, schedule
r     ttr_ms, optional (absent: the job's)         touch
n     queue name                                   pause, resume (which have no ``i``)
j     job snapshot (map, below)                    import
o     issuing node (str), optional                 any
q     request id (uint64), optional                any
====  ===========================================  =================================

The import snapshot ``j`` is the job map below without ``i`` (the command's own) and
``ver`` (the applying offset): ``n r l d p ma mf at fa s c w e ld x ok``, all required.

State record (``eventq.jobs`` value): ``{"v": 2, "e": event, "j": job or nil}``. Its
offsets (the event's ``o``, the job's ``ver``) are positions (eventq/core/batch.py);
a version 1 record, written when a record held one command, counted them in record
offsets and is read as position ``offset * POSITIONS_PER_OFFSET``.
The event map has ``t`` (``EventType``), ``i``, ``a`` (at_ms), ``o`` (offset) and its
fields: ``x`` result (Completed, Failed; only when the record has no job, since the
job holds the result and a state record must fit a payload and a result once), ``k`` attempt and ``dl`` deadline_ms
(AttemptStarted), ``k`` and ``rq`` requeued (AttemptTimedOut), ``ev`` evicted (Expired),
nothing more for Added and Imported (the job is the record's job, so the payload is
stored once).
The job map has every
``Job`` field (nil for None): ``i n r l d p ma mf at fa s c w e ld x ok ver``, and the
backoff fields only when set: ``b`` backoff_ms, ``rn`` returns, ``rt`` retry_ms (a job
without a backoff has the record it had before backoffs existed). Touched has ``k``
and ``dl`` like AttemptStarted.

Decoding never raises anything but ``CodecError`` (a ``ValueError``): not msgpack, a
wrong schema version, a missing, unknown or mistyped field, an out-of-range value, or a
record that is inconsistent (a job whose id or version differs from its event).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from eventq.core.commands import (
    Add,
    Command,
    CommandType,
    Complete,
    Delete,
    Expire,
    Fail,
    Import,
    QUEUE_COMMAND_CLASSES,
    QUEUE_COMMANDS,
    QueueCommand,
    Schedule,
    ReleaseAttempt,
    StartAttempt,
    TimeoutAttempt,
    Touch,
)
from eventq.core.events import (
    REMOVING_EVENTS,
    Added,
    AttemptsExhausted,
    AttemptReleased,
    AttemptStarted,
    AttemptTimedOut,
    Completed,
    Deleted,
    Event,
    EventType,
    Expired,
    Failed,
    FailRetried,
    Imported,
    Touched,
)
from eventq.core.job import Job, State
from eventq.limits import MAX_NODE_BYTES, MAX_REQUEST_ID

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


# ------------------------------------------------------------------ field readers


def _missing(key: str) -> CodecError:
    return CodecError(f"missing field {key!r}")


def _int(m: dict[str, Any], key: str) -> int:
    try:
        v = m[key]
    except KeyError:
        raise _missing(key) from None
    if type(v) is not int:
        raise CodecError(f"field {key!r} must be an int, got {type(v).__name__}")
    return v


def _waiting_state(m: dict[str, Any]) -> State:
    value = _int(m, "s")
    if value not in (State.NEW, State.PENDING):
        raise CodecError(f"field 's' must be NEW (0) or PENDING (3), not {value}")
    return State(value)


def _opt_int(m: dict[str, Any], key: str) -> int | None:
    if key not in m:
        raise _missing(key)
    return None if m[key] is None else _int(m, key)


def _bool(m: dict[str, Any], key: str) -> bool:
    try:
        v = m[key]
    except KeyError:
        raise _missing(key) from None
    if type(v) is not bool:
        raise CodecError(f"field {key!r} must be a bool, got {type(v).__name__}")
    return v


def _int_or(m: dict[str, Any], key: str, default: int) -> int:
    """An optional int field (absent: ``default``)."""
    return _int(m, key) if key in m else default


def _opt_bool(m: dict[str, Any], key: str) -> bool | None:
    if key not in m:
        raise _missing(key)
    return None if m[key] is None else _bool(m, key)


def _bin(m: dict[str, Any], key: str) -> bytes:
    try:
        v = m[key]
    except KeyError:
        raise _missing(key) from None
    if type(v) is not bytes:
        raise CodecError(f"field {key!r} must be bin, got {type(v).__name__}")
    return v


def _opt_bin(m: dict[str, Any], key: str) -> bytes | None:
    if key not in m:
        raise _missing(key)
    return None if m[key] is None else _bin(m, key)


def _str(m: dict[str, Any], key: str) -> str:
    try:
        v = m[key]
    except KeyError:
        raise _missing(key) from None
    if type(v) is not str:
        raise CodecError(f"field {key!r} must be a str, got {type(v).__name__}")
    return v


def _id(m: dict[str, Any], key: str = "i") -> uuid.UUID:
    raw = _bin(m, key)
    if len(raw) != 16:
        raise CodecError(f"field {key!r} must be 16 bytes of UUID, got {len(raw)}")
    return uuid.UUID(bytes=raw)


def _map(v: object, what: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise CodecError(f"{what} must be a msgpack map, got {type(v).__name__}")
    return v


def _check_keys(m: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if not m.keys() <= allowed:
        extra = sorted(map(str, m.keys() - allowed))
        raise CodecError(f"unknown field(s) in {what}: {', '.join(extra)}")


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
    return msgpack.packb(m, use_bin_type=True)


def _guarded(what: str, fn: Callable[[Any], Any], data: object) -> Any:
    """Run a decoder; any error but CodecError becomes one (decoders never leak others)."""
    try:
        return fn(data)
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"invalid {what}: {exc}") from None


# ----------------------------------------------------------------------- commands

_COMMON_KEYS = frozenset({"v", "t", "i", "o", "q"})
_JOB_FIELD_KEYS = frozenset({"n", "r", "l", "d", "p", "a", "f", "b"})


def _with_backoff(m: dict[str, Any], backoff_ms: int) -> dict[str, Any]:
    if backoff_ms:  # absent when 0: records of workq's commands keep their bytes
        m["b"] = backoff_ms
    return m


def _enc_add(c: Add) -> dict[str, Any]:
    return _with_backoff({
        "n": c.name, "r": c.ttr_ms, "l": c.ttl_ms, "d": c.payload,
        "p": c.priority, "a": c.max_attempts, "f": c.max_fails,
    }, c.backoff_ms)  # fmt: skip


def _enc_schedule(c: Schedule) -> dict[str, Any]:
    return _with_backoff({
        "n": c.name, "r": c.ttr_ms, "l": c.ttl_ms, "s": c.time_ms, "d": c.payload,
        "p": c.priority, "a": c.max_attempts, "f": c.max_fails,
    }, c.backoff_ms)  # fmt: skip


def _enc_result(c: Complete | Fail) -> dict[str, Any]:
    return {"x": c.result}


def _enc_nothing(c: Command) -> dict[str, Any]:
    return {}


def _enc_attempt(c: StartAttempt | TimeoutAttempt) -> dict[str, Any]:
    return {"k": c.attempt}


def _dec_add(m: dict[str, Any]) -> Add:
    return Add(
        _id(m), _str(m, "n"), _int(m, "r"), _int(m, "l"), _bin(m, "d"),
        _int(m, "p"), _int(m, "a"), _int(m, "f"), _int_or(m, "b", 0),
    )  # fmt: skip


def _dec_schedule(m: dict[str, Any]) -> Schedule:
    return Schedule(
        _id(m), _str(m, "n"), _int(m, "r"), _int(m, "l"), _int(m, "s"), _bin(m, "d"),
        _int(m, "p"), _int(m, "a"), _int(m, "f"), _int_or(m, "b", 0),
    )  # fmt: skip


def _enc_touch(c: Touch) -> dict[str, Any]:
    return {"k": c.attempt} if c.ttr_ms is None else {"k": c.attempt, "r": c.ttr_ms}


def _dec_touch(m: dict[str, Any]) -> Touch:
    return Touch(_id(m), _int(m, "k"), _int(m, "r") if "r" in m else None)


def _enc_release(c: ReleaseAttempt) -> dict[str, Any]:
    m = {"k": c.attempt, "s": int(c.state)}
    if c.claim is not None:  # absent: a give-back by attempt number (older records)
        m["c"] = c.claim
    return m


def _dec_release(m: dict[str, Any]) -> ReleaseAttempt:
    claim = _int(m, "c") if "c" in m else None
    return ReleaseAttempt(_id(m), _int(m, "k"), _waiting_state(m), claim)


def _enc_import(c: Import) -> dict[str, Any]:
    return {"j": _snapshot_fields(c)}


def _dec_import(m: dict[str, Any]) -> Import:
    if "j" not in m:
        raise _missing("j")
    j = _map(m["j"], "import snapshot")
    _check_keys(j, _SNAPSHOT_KEYS, "import snapshot")
    return Import(
        _id(m), _str(j, "n"), _int(j, "r"), _int(j, "l"), _bin(j, "d"), _int(j, "p"),
        _int(j, "ma"), _int(j, "mf"), _int(j, "at"), _int(j, "fa"), State(_int(j, "s")),
        _int(j, "c"), _opt_int(j, "w"), _opt_int(j, "e"), _opt_int(j, "ld"),
        _opt_bin(j, "x"), _opt_bool(j, "ok"), *_backoff_fields(j),
    )  # fmt: skip


# command type → (class, encoder of its fields, decoder, keys allowed in its map)
_COMMAND_CODECS: dict[int, tuple[type, Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], Any], frozenset[str]]] = {  # noqa: E501
    CommandType.ADD: (Add, _enc_add, _dec_add, _COMMON_KEYS | _JOB_FIELD_KEYS),
    CommandType.SCHEDULE: (Schedule, _enc_schedule, _dec_schedule, _COMMON_KEYS | _JOB_FIELD_KEYS | {"s"}),  # noqa: E501
    CommandType.COMPLETE: (Complete, _enc_result, lambda m: Complete(_id(m), _bin(m, "x")), _COMMON_KEYS | {"x"}),  # noqa: E501
    CommandType.FAIL: (Fail, _enc_result, lambda m: Fail(_id(m), _bin(m, "x")), _COMMON_KEYS | {"x"}),  # noqa: E501
    CommandType.DELETE: (Delete, _enc_nothing, lambda m: Delete(_id(m)), _COMMON_KEYS),
    CommandType.EXPIRE: (Expire, _enc_nothing, lambda m: Expire(_id(m)), _COMMON_KEYS),
    CommandType.START_ATTEMPT: (StartAttempt, _enc_attempt, lambda m: StartAttempt(_id(m), _int(m, "k")), _COMMON_KEYS | {"k"}),  # noqa: E501
    CommandType.TIMEOUT_ATTEMPT: (TimeoutAttempt, _enc_attempt, lambda m: TimeoutAttempt(_id(m), _int(m, "k")), _COMMON_KEYS | {"k"}),  # noqa: E501
    CommandType.IMPORT: (Import, _enc_import, _dec_import, _COMMON_KEYS | {"j"}),
    CommandType.TOUCH: (Touch, _enc_touch, _dec_touch, _COMMON_KEYS | {"k", "r"}),
    CommandType.RELEASE_ATTEMPT: (ReleaseAttempt, _enc_release, _dec_release, _COMMON_KEYS | {"k", "s", "c"}),  # noqa: E501
}


_COMMAND_CLASSES = tuple(c[0] for c in _COMMAND_CODECS.values())
# Queue commands name a queue, not a job: no ``i``, and ``n`` the name.
_QUEUE_KEYS = frozenset({"v", "t", "n", "o", "q"})


def encode_command(
    command: Command | QueueCommand, *, node: str | None = None, request_id: int | None = None
) -> bytes:
    """The command record of ``command``, with the issuer's optional correlation fields."""
    if isinstance(command, QUEUE_COMMANDS):
        m: dict[str, Any] = {"v": SCHEMA_VERSION, "t": int(command.type), "n": command.name}
    else:
        codec = _COMMAND_CODECS[command.type] if isinstance(command, _COMMAND_CLASSES) else None
        if codec is None or type(command) is not codec[0]:
            raise CodecError(f"not a command: {command!r:.100}")
        m = {"v": SCHEMA_VERSION, "t": int(command.type), "i": command.job_id.bytes}
        m.update(codec[1](command))
    if node is not None:
        if type(node) is not str or len(node.encode()) > MAX_NODE_BYTES:
            raise CodecError(f"node must be a str of at most {MAX_NODE_BYTES} bytes")
        m["o"] = node
    if request_id is not None:
        if type(request_id) is not int or not 0 <= request_id <= MAX_REQUEST_ID:
            raise CodecError(f"request_id must be an int in 0..{MAX_REQUEST_ID}")
        m["q"] = request_id
    return _pack(m)


def _decode_command(data: object) -> DecodedCommand:
    m = _unpack(data)
    t = _int(m, "t")
    queue_class = QUEUE_COMMAND_CLASSES.get(t)  # type: ignore[call-overload]
    codec = _COMMAND_CODECS.get(t)
    if queue_class is not None:
        _check_keys(m, _QUEUE_KEYS, f"command type {t}")
        command = queue_class(_str(m, "n"))
    elif codec is None:
        raise CodecError(f"unknown command type {t}")
    else:
        _check_keys(m, codec[3], f"command type {t}")
        command = codec[2](m)
    node = m.get("o")
    if node is not None and (type(node) is not str or len(node.encode()) > MAX_NODE_BYTES):
        raise CodecError(f"field 'o' (node) must be a str of at most {MAX_NODE_BYTES} bytes")
    request_id = m.get("q")
    if request_id is not None and (
        type(request_id) is not int or not 0 <= request_id <= MAX_REQUEST_ID
    ):
        raise CodecError(f"field 'q' (request id) must be an int in 0..{MAX_REQUEST_ID}")
    return DecodedCommand(command, node, request_id)


def decode_command(data: bytes) -> DecodedCommand:
    """The command (and correlation fields) of a command record; ``CodecError`` if bad."""
    return _guarded("command", _decode_command, data)  # type: ignore[no-any-return]


def correlation_of(data: object) -> tuple[str | None, int | None]:
    """The issuer (node, request id) of a record that may not decode as a command, so
    that whoever waits for it can be told it was rejected; (None, None) if unknown.
    Never raises."""
    try:
        m = msgpack.unpackb(data, raw=False, strict_map_key=False)  # type: ignore[arg-type]
    except Exception:
        return None, None
    if type(m) is not dict:
        return None, None
    node, request_id = m.get("o"), m.get("q")
    if type(node) is not str or type(request_id) is not int:
        return None, None
    return node, request_id


# ---------------------------------------------------------------------------- jobs

_JOB_KEYS = frozenset(
    {"i", "n", "r", "l", "d", "p", "ma", "mf", "at", "fa", "s", "c", "w", "e", "ld", "x", "ok", "ver"}  # noqa: E501
)


_BACKOFF_KEYS = frozenset({"b", "rn", "rt"})  # present only when set (module docstring)
_JOB_KEYS = _JOB_KEYS | _BACKOFF_KEYS
_SNAPSHOT_KEYS = _JOB_KEYS - {"i", "ver"}  # an import's snapshot: the job map minus these


def _snapshot_fields(j: Job | Import) -> dict[str, Any]:
    """The job map without id and version (shared by jobs and import snapshots)."""
    m = {
        "n": j.name, "r": j.ttr_ms, "l": j.ttl_ms, "d": j.payload,
        "p": j.priority, "ma": j.max_attempts, "mf": j.max_fails, "at": j.attempts,
        "fa": j.fails, "s": int(j.state), "c": j.created_ms, "w": j.scheduled_ms,
        "e": j.expires_ms, "ld": j.lease_deadline_ms, "x": j.result, "ok": j.result_ok,
    }  # fmt: skip
    if j.backoff_ms:
        m["b"] = j.backoff_ms
    if j.returns:
        m["rn"] = j.returns
    if j.retry_ms is not None:
        m["rt"] = j.retry_ms
    return m


def _backoff_fields(m: dict[str, Any]) -> tuple[int, int, int | None]:
    """(backoff_ms, returns, retry_ms) of a job map (absent: 0, 0, None)."""
    return _int_or(m, "b", 0), _int_or(m, "rn", 0), _int(m, "rt") if "rt" in m else None


def _enc_job(j: Job) -> dict[str, Any]:
    m = {"i": j.id.bytes}
    m.update(_snapshot_fields(j))
    m["ver"] = j.version
    return m


def _dec_job(v: object) -> Job:
    m = _map(v, "job")
    _check_keys(m, _JOB_KEYS, "job")
    return Job(
        _id(m), _str(m, "n"), _int(m, "r"), _int(m, "l"), _bin(m, "d"), _int(m, "p"),
        _int(m, "ma"), _int(m, "mf"), _int(m, "at"), _int(m, "fa"), State(_int(m, "s")),
        _int(m, "c"), _opt_int(m, "w"), _opt_int(m, "e"), _opt_int(m, "ld"),
        _opt_bin(m, "x"), _opt_bool(m, "ok"), _int(m, "ver"), *_backoff_fields(m),
    )  # fmt: skip


# -------------------------------------------------------------------------- events

_EVENT_COMMON = frozenset({"t", "i", "a", "o"})


def _dec_added(m: dict[str, Any], job: Job | None) -> Added:
    if job is None:
        raise CodecError("an Added event needs the record's job")
    return Added(_id(m), _int(m, "a"), _int(m, "o"), job)


def _dec_imported(m: dict[str, Any], job: Job | None) -> Imported:
    if job is None:
        raise CodecError("an Imported event needs the record's job")
    return Imported(_id(m), _int(m, "a"), _int(m, "o"), job)


def _enc_result_event(e: Completed | Failed, job: Job | None) -> dict[str, Any]:
    """The result is stored once, in the job (a state record must hold a payload and a
    result of 1 MiB each: eventq/limits.py); only a record without a job carries it."""
    return {} if job is not None else {"x": e.result}


def _event_result(m: dict[str, Any], job: Job | None) -> bytes:
    if "x" in m:  # records written before the result was stored once, or without a job
        return _bin(m, "x")
    if job is None or job.result is None:
        raise CodecError("a Completed or Failed event needs its result or the record's job")
    return job.result


def _common(m: dict[str, Any]) -> tuple[uuid.UUID, int, int]:
    return _id(m), _int(m, "a"), _int(m, "o")


# event type → (class, encoder of its fields, decoder, keys allowed in its map)
_EVENT_CODECS: dict[int, tuple[type, Callable[[Any, Job | None], dict[str, Any]], Callable[[dict[str, Any], Job | None], Any], frozenset[str]]] = {  # noqa: E501
    EventType.ADDED: (Added, lambda e, j: {}, _dec_added, _EVENT_COMMON),
    EventType.COMPLETED: (Completed, _enc_result_event, lambda m, j: Completed(*_common(m), _event_result(m, j)), _EVENT_COMMON | {"x"}),  # noqa: E501
    EventType.FAILED: (Failed, _enc_result_event, lambda m, j: Failed(*_common(m), _event_result(m, j)), _EVENT_COMMON | {"x"}),  # noqa: E501
    EventType.FAIL_RETRIED: (FailRetried, lambda e, j: {}, lambda m, j: FailRetried(*_common(m)), _EVENT_COMMON),  # noqa: E501
    EventType.ATTEMPT_STARTED: (AttemptStarted, lambda e, j: {"k": e.attempt, "dl": e.deadline_ms}, lambda m, j: AttemptStarted(*_common(m), _int(m, "k"), _int(m, "dl")), _EVENT_COMMON | {"k", "dl"}),  # noqa: E501
    EventType.ATTEMPTS_EXHAUSTED: (AttemptsExhausted, lambda e, j: {}, lambda m, j: AttemptsExhausted(*_common(m)), _EVENT_COMMON),  # noqa: E501
    EventType.ATTEMPT_TIMED_OUT: (AttemptTimedOut, lambda e, j: {"k": e.attempt, "rq": e.requeued}, lambda m, j: AttemptTimedOut(*_common(m), _int(m, "k"), _bool(m, "rq")), _EVENT_COMMON | {"k", "rq"}),  # noqa: E501
    EventType.DELETED: (Deleted, lambda e, j: {}, lambda m, j: Deleted(*_common(m)), _EVENT_COMMON),  # noqa: E501
    EventType.EXPIRED: (Expired, lambda e, j: {"ev": e.evicted}, lambda m, j: Expired(*_common(m), _bool(m, "ev")), _EVENT_COMMON | {"ev"}),  # noqa: E501
    EventType.IMPORTED: (Imported, lambda e, j: {}, _dec_imported, _EVENT_COMMON),
    EventType.TOUCHED: (Touched, lambda e, j: {"k": e.attempt, "dl": e.deadline_ms}, lambda m, j: Touched(*_common(m), _int(m, "k"), _int(m, "dl")), _EVENT_COMMON | {"k", "dl"}),  # noqa: E501
    EventType.ATTEMPT_RELEASED: (AttemptReleased, lambda e, j: {"k": e.attempt, "s": int(e.state)}, lambda m, j: AttemptReleased(*_common(m), _int(m, "k"), _waiting_state(m)), _EVENT_COMMON | {"k", "s"}),  # noqa: E501
}

_EVENT_CLASSES = tuple(c[0] for c in _EVENT_CODECS.values())

# The state a job is in right after an event of each type (None: gone).
_STATES_AFTER: dict[int, frozenset[State] | None] = {
    EventType.ADDED: frozenset({State.NEW}),
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
}
assert set(_STATES_AFTER) == set(EventType) and set(_EVENT_CODECS) == set(EventType)
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
        return f"the {'added' if isinstance(event, Added) else 'imported'} job differs from the record's job"  # noqa: E501
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
    return None


def encode_state(event: Event, job: Job | None) -> bytes:
    """The state record: ``event`` (the last change) and the job's state after it."""
    codec = _EVENT_CODECS[event.type] if isinstance(event, _EVENT_CLASSES) else None
    if codec is None or type(event) is not codec[0]:
        raise CodecError(f"not an event: {event!r:.100}")
    if job is not None and not isinstance(job, Job):
        raise CodecError(f"not a job: {job!r:.100}")
    problem = _inconsistency(event, job)
    if problem is not None:
        raise CodecError(problem)
    e: dict[str, Any] = {
        "t": int(event.type), "i": event.job_id.bytes, "a": event.at_ms, "o": event.offset,
    }  # fmt: skip
    e.update(codec[1](event, job))
    return _pack(
        {"v": STATE_SCHEMA_VERSION, "e": e, "j": None if job is None else _enc_job(job)}
    )


def _decode_state(data: object) -> tuple[Event, Job | None]:
    m = _positions_from_offsets(_unpack(data, _STATE_VERSIONS), ("e", "o"), ("j", "ver"))
    _check_keys(m, frozenset({"v", "e", "j"}), "state record")
    if "e" not in m:
        raise _missing("e")
    if "j" not in m:
        raise _missing("j")
    job = None if m["j"] is None else _dec_job(m["j"])
    em = _map(m["e"], "event")
    t = _int(em, "t")
    codec = _EVENT_CODECS.get(t)
    if codec is None:
        raise CodecError(f"unknown event type {t}")
    _check_keys(em, codec[3], f"event type {t}")
    event = codec[2](em, job)
    problem = _inconsistency(event, job)
    if problem is not None:
        raise CodecError(problem)
    return event, job


def decode_state(data: bytes) -> tuple[Event, Job | None]:
    """The (event, job) of a state record; ``CodecError`` if it is malformed."""
    return _guarded("state record", _decode_state, data)  # type: ignore[no-any-return]


def encode_job(job: Job) -> bytes:
    """A job on its own (its full state), e.g. for snapshots and exports."""
    if not isinstance(job, Job):
        raise CodecError(f"not a job: {job!r:.100}")
    return _pack({"v": STATE_SCHEMA_VERSION, "j": _enc_job(job)})


def _decode_job(data: object) -> Job:
    m = _positions_from_offsets(_unpack(data, _STATE_VERSIONS), ("j", "ver"))
    _check_keys(m, frozenset({"v", "j"}), "job record")
    if "j" not in m:
        raise _missing("j")
    return _dec_job(m["j"])


def decode_job(data: bytes) -> Job:
    """The job of an ``encode_job`` record; ``CodecError`` if it is malformed."""
    return _guarded("job record", _decode_job, data)  # type: ignore[no-any-return]
