"""Requests back to their bytes: the inverse of the parser (``Parser`` of these bytes
gives the same request). A gateway forwards a request for another process's job this
way (docs/architecture.md, "Scaling out"), so what reaches the owner is exactly what a
client would have sent.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

from eventq.core.fields import AFTER, BACKOFF, MAX_ATTEMPTS, MAX_FAILS, PRIORITY, TAGS, Option

from . import requests as rq
from .values import canonical_id, format_time_ms

_CRLF = b"\r\n"


def _line(*words: object) -> bytes:
    return " ".join(str(word) for word in words if word != "").encode("latin-1") + _CRLF


def _flags(**values: int | str) -> str:
    """Non-default flags only."""
    return " ".join(f"-{key.replace('_', '-')}={value}" for key, value in values.items() if value)


def _after(ids: tuple[uuid.UUID, ...]) -> str:
    """[eventq] -after's value, canonical ids in -after order."""
    return ",".join(map(canonical_id, ids))


def _tags(tags: tuple[str, ...]) -> str:
    """[eventq] -tags's value, in -tags order."""
    return ",".join(tags)


# How a job's option is written as a flag's value (an int's decimal when not here).
_OPTION_TEXT: dict[str, Callable[[Any], str]] = {AFTER.word: _after, TAGS.word: _tags}
# The flags of a job's options each request writes, in this order (add and schedule take
# at most 3 of workq's, plus -backoff, -after and -tags; run takes 1).
_ADD_FLAGS = (PRIORITY, MAX_ATTEMPTS, MAX_FAILS, BACKOFF, AFTER, TAGS)
_RECUR_FLAGS = (PRIORITY, MAX_ATTEMPTS, MAX_FAILS, BACKOFF, TAGS)
_RUN_FLAGS = (PRIORITY,)


def _option_flags(r: object, options: tuple[Option[Any], ...]) -> str:
    """The flags of ``r``'s options (eventq/core/fields.py) that are not their default."""
    flags = []
    for option in options:
        value = getattr(r, option.attr)
        if value != option.default:
            flags.append(f"-{option.word}={_OPTION_TEXT.get(option.word, str)(value)}")
    return " ".join(flags)


def _with_data(line: bytes, data: bytes) -> bytes:
    return line + data + _CRLF


def _add(r: rq.Add) -> bytes:
    flags = _option_flags(r, _ADD_FLAGS)
    return _with_data(
        _line("add", canonical_id(r.id), r.name, r.ttr_ms, r.ttl_ms, len(r.payload), flags),
        r.payload,
    )


def _schedule(r: rq.Schedule) -> bytes:
    flags = _option_flags(r, _ADD_FLAGS)
    line = _line("schedule", canonical_id(r.id), r.name, r.ttr_ms, r.ttl_ms,
                 format_time_ms(r.time_ms), len(r.payload), flags)
    return _with_data(line, r.payload)


def _run(r: rq.Run) -> bytes:
    line = _line("run", canonical_id(r.id), r.name, r.ttr_ms, r.wait_timeout_ms,
                 len(r.payload), _option_flags(r, _RUN_FLAGS))
    return _with_data(line, r.payload)


def _recur(r: rq.Recur) -> bytes:
    flags = _option_flags(r, _RECUR_FLAGS)
    line = _line("recur", r.name, r.job_name, r.ttr_ms, r.ttl_ms, r.every_ms, len(r.payload),
                 flags)
    return _with_data(line, r.payload)


# fmt: off
ENCODERS: dict[type, Callable[[Any], bytes]] = {  # Any: the request type of its key
    rq.Add: _add,
    rq.Schedule: _schedule,
    rq.Run: _run,
    rq.Result: lambda r: _line("result", canonical_id(r.id), r.wait_timeout_ms),
    rq.Lease: lambda r: _line("lease", *r.names, r.wait_timeout_ms),
    rq.Complete: lambda r: _with_data(_line("complete", canonical_id(r.id), len(r.result)), r.result),
    rq.Fail: lambda r: _with_data(_line("fail", canonical_id(r.id), len(r.result),
                                        "" if r.group is None else f"-group={r.group}"), r.result),
    rq.Retry: lambda r: _line("retry", canonical_id(r.id), _flags(delay=r.delay_ms)),
    rq.RetryGroup: lambda r: _line("retry-group", r.group, r.count),
    rq.InspectFailed: lambda r: _line("inspect", "failed", r.offset, r.limit),
    rq.InspectFailedJobs: lambda r: _line("inspect", "failed-jobs", r.group, r.offset, r.limit),
    rq.Delete: lambda r: _line("delete", canonical_id(r.id)),
    rq.Touch: lambda r: _line("touch", canonical_id(r.id), "" if r.ttr_ms is None else f"-ttr={r.ttr_ms}"),
    rq.Pause: lambda r: _line("pause", r.name),
    rq.Resume: lambda r: _line("resume", r.name),
    rq.Inputs: lambda r: _line("inputs", canonical_id(r.id)),
    rq.Auth: lambda r: _line("auth", r.token),
    rq.As: lambda r: _line("as", r.name, "" if r.prefix is None else f"-prefix={r.prefix}"),
    rq.InspectServer: lambda r: _line("inspect", "server"),
    rq.InspectQueues: lambda r: _line("inspect", "queues", r.offset, r.limit),
    rq.InspectQueue: lambda r: _line("inspect", "queue", r.name),
    rq.InspectJobs: lambda r: _line("inspect", "jobs", r.name, r.offset, r.limit),
    rq.InspectScheduledJobs: lambda r: _line("inspect", "scheduled-jobs", r.name, r.offset, r.limit),
    rq.InspectWaitingJobs: lambda r: _line("inspect", "waiting-jobs", r.name, r.offset, r.limit),
    rq.InspectTagged: lambda r: _line("inspect", "tagged", r.tag, r.offset, r.limit),
    rq.InspectJob: lambda r: _line("inspect", "job", canonical_id(r.id)),
    rq.InspectDigest: lambda r: _line("inspect", "digest"),
    rq.InspectBulk: lambda r: _line("inspect", "bulk"),
    rq.Peer: lambda r: _line("peer"),
    rq.Peek: lambda r: _line("peek", *r.names),
    rq.Confirm: lambda r: _line("confirm", canonical_id(r.id), r.claim),
    rq.Edges: lambda r: _line("edges", canonical_id(r.id), r.limit),
    rq.Outcome: lambda r: _line("outcome", r.node, r.request_id, r.wait_ms),
    rq.Recur: _recur,
    rq.Unrecur: lambda r: _line("unrecur", r.name),
    rq.InspectRecurring: lambda r: _line("inspect", "recurring", r.offset, r.limit),
}
# fmt: on


def encode_request(request: object) -> bytes:
    return ENCODERS[type(request)](request)
