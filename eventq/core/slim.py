"""The slim projection of a job: only what the in-memory indexes need
(docs/architecture.md, "Memory and restores").

Rebuilding the indexes after a restart reads every live job. A full ``decode_state``
validates the event and builds a ``Job`` (11.4 us per record measured on 225-byte
records); the indexes need eleven of its fields. ``project_state`` unpacks the record once
with msgpack's C unpacker (1.5 us) and checks only the fields it returns, so a rebuild
of 1,000,000 jobs costs seconds, not minutes. ``slim_of`` is the same projection of a
decoded ``Job``: both feed ``JobIndex``, which therefore has one code path, and the
property test in tests/state/indexes/test_job_index.py holds them equal on every valid record.

A record whose projected fields are malformed raises ``CodecError`` (as ``decode_state``
would); a record malformed only in fields the index does not read (say, a payload over
the limit) is indexed and fails later, when the job itself is read.
"""

from __future__ import annotations

from typing import NamedTuple

import msgpack

from eventq.core.codec import (
    EVENT_KEY,
    EVENT_KEYS,
    JOB_KEY,
    JOB_KEYS,
    POSITIONS_PER_OFFSET,
    VERSION_KEY,
    CodecError,
)
from eventq.core.job import (
    ATTEMPTS_EXHAUSTED_GROUP,
    FAILED_GROUP,
    Job,
    State,
    failure_group,
    failure_time_ms,
    ready_time_ms,
)

_STATES = {int(state): state for state in State}
_STATE_RECORD_VERSIONS = (1, 2)  # codec/states.py: version 1 counted positions in offsets
# The keys of the fields projected (the codec's job table, codec/rows.py, names them).
_ID, _NAME, _STATE, _PRIORITY, _CREATED, _TIME, _EXPIRES, _LEASE_DEADLINE, _ATTEMPTS = (
    JOB_KEYS[attr] for attr in ("id", "name", "state", "priority", "created_ms",
                                "scheduled_ms", "expires_ms", "lease_deadline_ms", "attempts"))
_VERSION, _RETRY, _RELEASED = JOB_KEYS["version"], JOB_KEYS["retry_ms"], JOB_KEYS["released_ms"]
_TAGS = JOB_KEYS["tags"]
_DELAYED, _EARLY, _GROUP = JOB_KEYS["delayed_ms"], JOB_KEYS["early"], JOB_KEYS["group"]
_FAILS, _MAX_FAILS, _FINISHED = JOB_KEYS["fails"], JOB_KEYS["max_fails"], JOB_KEYS["finished_ms"]
_EVENT_AT = EVENT_KEYS["at_ms"]


class Slim(NamedTuple):
    """The fields of a job the indexes read; ``id`` is the UUID's 128-bit integer;
    ``tags`` (docs/workflows.md, "Tags") the job's, () for a job without."""

    id: int
    name: str
    state: State
    priority: int
    created_ms: int
    scheduled_ms: int | None
    expires_ms: int | None
    lease_deadline_ms: int | None
    attempts: int
    version: int
    tags: tuple[str, ...] = ()
    # [eventq] retry and failure groups (docs/workflows.md, "Failure groups and retry"):
    # ready at once whatever its time (job.wake_time_ms); a FAILED job's group and failure
    # time (None otherwise).
    early: bool = False
    group: str | None = None
    failed_ms: int | None = None


def slim_of(job: Job, record_ms: int | None = None) -> Slim:
    """``scheduled_ms`` is the job's time: a backoff's retry time, a dependent's release
    time or a retry's delay replaces it. ``record_ms``: the broker time of the event the
    job's state record holds (a FAILED job's failure time, job.failure_time_ms)."""
    failed_ms = job.finished_ms if record_ms is None else failure_time_ms(job, record_ms)
    return Slim(
        job.id.int, job.name, job.state, job.priority, job.created_ms, ready_time_ms(job),
        job.expires_ms, job.lease_deadline_ms, job.attempts, job.version, job.tags,
        job.early and job.retry_ms is None, failure_group(job),
        failed_ms if job.state is State.FAILED else None,
    )  # fmt: skip


def _int(m: dict, key: str) -> int:
    value = m.get(key)
    if type(value) is not int:
        raise CodecError(f"job field {key!r} must be an integer, got {value!r:.40}")
    return value


def _opt_int(m: dict, key: str) -> int | None:
    value = m.get(key)
    if value is not None and type(value) is not int:
        raise CodecError(f"job field {key!r} must be an integer or nil, got {value!r:.40}")
    return value


def project_state(data: bytes) -> Slim | None:
    """The slim projection of a state record's job (None: the record has no job)."""
    try:
        record = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=False)
    except Exception as error:  # msgpack raises several unrelated types
        raise CodecError(f"not a msgpack record: {error}") from None
    if type(record) is not dict:
        raise CodecError("a state record must be a msgpack map")
    version = record.get(VERSION_KEY)
    if version not in _STATE_RECORD_VERSIONS or type(version) is not int:
        raise CodecError(f"unsupported schema version {version!r} (expected 1 or 2)")
    job = record.get(JOB_KEY, ...)
    if job is None:
        return None
    if type(job) is not dict:
        raise CodecError(f"field {JOB_KEY!r} of a state record must be a job map")
    raw_id, name, state = job.get(_ID), job.get(_NAME), job.get(_STATE)
    if type(raw_id) is not bytes or len(raw_id) != 16:
        raise CodecError(f"job field {_ID!r} must be 16 bytes of UUID")
    if type(name) is not str or not name:
        raise CodecError(f"job field {_NAME!r} must be a queue name")
    if type(state) is not int or state not in _STATES:
        raise CodecError(f"job field {_STATE!r} must be a job state, got {state!r:.40}")
    position = _int(job, _VERSION)
    if version == 1:
        position *= POSITIONS_PER_OFFSET
    # A backoff's retry time is the job's time, else a dependent's release time, else
    # a retry's delay, else its schedule time (job.ready_time_ms).
    retry_ms = time_ms = _opt_int(job, _RETRY)
    if time_ms is None:
        time_ms = _opt_int(job, _RELEASED)
        if time_ms is None:
            time_ms = _opt_int(job, _DELAYED)
            if time_ms is None:
                time_ms = _opt_int(job, _TIME)
    tags = job.get(_TAGS, ())
    if type(tags) is not tuple or any(type(tag) is not str for tag in tags):
        raise CodecError(f"job field {_TAGS!r} must be an array of tags, got {tags!r:.40}")
    early = job.get(_EARLY, False)
    if type(early) is not bool:
        raise CodecError(f"job field {_EARLY!r} must be a bool, got {early!r:.40}")
    group = failed_ms = None
    if state == State.FAILED:
        group, failed_ms = _failure(record, job)
    return Slim(
        int.from_bytes(raw_id, "big"), name, _STATES[state], _int(job, _PRIORITY),
        _int(job, _CREATED), time_ms,
        _opt_int(job, _EXPIRES), _opt_int(job, _LEASE_DEADLINE),
        _int(job, _ATTEMPTS), position, tags, early and retry_ms is None, group, failed_ms,
    )


def _failure(record: dict, job: dict) -> tuple[str, int]:
    """A FAILED job's group (job.failure_group) and failure time (job.failure_time_ms:
    a dependent's ``finished_ms``, else the time of its record's event)."""
    group = job.get(_GROUP)
    if group is None:
        fails, max_fails = _int(job, _FAILS), _int(job, _MAX_FAILS)
        group = FAILED_GROUP if fails >= max(max_fails, 1) else ATTEMPTS_EXHAUSTED_GROUP
    elif type(group) is not str or not group:
        raise CodecError(f"job field {_GROUP!r} must be a failure group, got {group!r:.40}")
    failed_ms = _opt_int(job, _FINISHED)
    if failed_ms is None:
        event = record.get(EVENT_KEY)
        if type(event) is not dict:
            raise CodecError(f"field {EVENT_KEY!r} of a state record must be an event map")
        failed_ms = _int(event, _EVENT_AT)
    return group, failed_ms
