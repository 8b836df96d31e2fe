"""State records (``eventq.jobs`` values): ``{"v": 2, "e": event, "j": job or nil}``.

Its offsets (the event's ``o``, the job's ``ver``) are positions (eventq/core/batch.py);
a version 1 record, written when a record held one command, counted them in record
offsets and is read as position ``offset * POSITIONS_PER_OFFSET``. The event map has
``t`` (``EventType``) and the event's fields (``EVENT_COMMON_FIELDS``, then
``EVENT_FIELDS``). A state record must fit a payload and a result of 1 MiB each once
(eventq/limits.py), so each is stored once, in the job: the job of Added and Imported
is the record's job, and the result of Completed and Failed is the job's (``x`` only in
a record without a job). ``encode_job`` writes a job on its own: ``{"v": 2, "j": job}``.
A record is also inconsistent when its job cannot be the state right after its event.
"""

from __future__ import annotations

from typing import Any

from eventq.core.codec.compiled import (
    TYPE_KEY,
    VERSION_KEY,
    _check_keys,
    _Codec,
    _compiled,
    _guarded,
    _int,
    _map,
    _pack,
    _unpack,
)
from eventq.core.codec.kinds import (
    BIN,
    BOOL,
    INT,
    NOTICE_OUTCOME,
    STR,
    UUID_BYTES,
    WAITING_STATE,
    Absent,
    CodecError,
    Field,
    _missing,
)
from eventq.core.codec.rows import ATTEMPT, DELAY, JOB_FIELDS, JOB_KEYS
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
from eventq.core.job import (
    FAILED_GROUP,
    UPSTREAM_FAILED_GROUP,
    Job,
    State,
    failure_group,
    link_of,
    link_outcome,
    make_job,
    upstream_failure,
)

# State and job records: 2 counts versions in positions (eventq/core/batch.py); version
# 1 records (offsets) are still read, converted.
STATE_SCHEMA_VERSION = 2
_STATE_VERSIONS = frozenset({1, STATE_SCHEMA_VERSION})
# Positions per record offset (eventq.core.batch.POSITIONS_PER_OFFSET, which imports
# this module).
POSITIONS_PER_OFFSET = 1 << 16

# First in every event map, after ``t``.
EVENT_COMMON_FIELDS: tuple[Field, ...] = (
    Field("i", "job_id", UUID_BYTES),
    Field("a", "at_ms", INT),
    Field("o", "offset", INT),
)
# The state record's envelope {version, event, job} (the module docstring). Readers
# that project a few fields without a full decode (core/slim.py, migrate/importer.py)
# take these, VERSION_KEY and TYPE_KEY, and JOB_KEYS / EVENT_KEYS, never a spelled key.
EVENT_KEY = "e"
JOB_KEY = "j"
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
    EventType.ATTEMPT_STARTED: (ATTEMPT, _DEADLINE),
    EventType.ATTEMPTS_EXHAUSTED: (),
    EventType.ATTEMPT_TIMED_OUT: (ATTEMPT, Field("rq", "requeued", BOOL)),
    EventType.DELETED: (),
    EventType.EXPIRED: (Field("ev", "evicted", BOOL),),
    EventType.IMPORTED: (),
    EventType.ATTEMPT_RELEASED: (ATTEMPT, Field("s", "state", WAITING_STATE)),
    EventType.TOUCHED: (ATTEMPT, _DEADLINE),
    EventType.FAIL_COUNTED: (),
    EventType.UPSTREAM_NOTED: _NOTICE,
    EventType.RELEASED: _NOTICE,
    EventType.UPSTREAM_FAILED: _NOTICE,
    EventType.RETRIED: (DELAY,),
    EventType.UPSTREAM_RETRIED: _NOTICE,
}
# Registrations and inputs (eventq/core/workflow.py), each a record of its own.
# Events whose ``job`` is the record's job (stored once, with its payload).
JOB_OF_THE_RECORD = frozenset({EventType.ADDED, EventType.IMPORTED})


def _holders(f: Field) -> str:
    """The events that have field ``f`` ("Completed or Failed"), for a message."""
    return " or ".join(EVENT_CLASSES[t].__name__ for t, table in EVENT_FIELDS.items() if f in table)


def _lacking(f: Field) -> str:
    return f"a {_holders(f)} event needs its {f.attr} or the record's job"


def _event_codec(t: EventType) -> _Codec:
    table = EVENT_COMMON_FIELDS + EVENT_FIELDS[t]
    job = "job" if t in JOB_OF_THE_RECORD else None
    return _compiled(EVENT_CLASSES[t], table, frozenset({TYPE_KEY}), job, lacking=_lacking)


_EVENT_CODECS: dict[int, _Codec] = {t: _event_codec(t) for t in EventType}
_EVENT_CODEC_OF: dict[type, _Codec] = {c.cls: c for c in _EVENT_CODECS.values()}
_JOB = _compiled(Job, JOB_FIELDS, frozenset(), build=make_job)  # by name, as all of core


def _positions_from_offsets(m: dict[str, Any], *fields: tuple[str, str]) -> dict[str, Any]:
    """A version-1 state or job record counted positions in record offsets (one command
    per record): the same place is position ``offset * POSITIONS_PER_OFFSET`` now."""
    if m.get(VERSION_KEY) != 1:
        return m
    for outer, key in fields:
        inner = m.get(outer)
        if type(inner) is dict and type(inner.get(key)) is int:
            inner[key] = inner[key] * POSITIONS_PER_OFFSET
    return m


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

