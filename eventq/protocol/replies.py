"""The serializer for every workq reply (docs/protocol.md, "Commands" and "inspect").

Each function returns the complete reply as bytes. Ids are written in lowercase
canonical form, times as UTC ``YYYY-MM-DDTHH:MM:SSZ``, payloads and results raw (a
payload containing ``\\r\\n`` is written as is, as workq does).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from eventq.errors import EventqError

from .values import canonical_id, format_time

_CRLF = b"\r\n"
_TEXT_ENCODING = "latin-1"  # names are ASCII; latin-1 mirrors the parser's decoding


@dataclass(frozen=True, slots=True)
class JobView:
    """What ``inspect job(s)`` shows of one job. ``scheduled_ms`` is None unless the
    job has a ready time (schedule, -backoff, -after); ``state`` is 0 NEW, 1 COMPLETED,
    2 FAILED, 3 PENDING, 4 LEASED, [eventq] 5 WAITING (docs/workflows.md, "Job and queue blocks").

    [eventq] ``after`` is the job's number of upstreams (-after) and ``waiting`` how many
    of them are not COMPLETED (0 once it is released). A job without upstreams has
    ``after`` 0 and its block shows neither key, so every workq job's block is workq's.
    [eventq] ``tags`` (docs/workflows.md, "Tags"): the job's, in -tags order; shown
    only when it has some.
    """

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    max_attempts: int
    attempts: int
    max_fails: int
    fails: int
    priority: int
    state: int
    created_ms: int
    scheduled_ms: int | None = None
    after: int = 0
    waiting: int = 0
    tags: tuple[str, ...] = ()
    # [eventq] a FAILED job's failure group, when it is neither ``failed`` nor
    # ``attempts-exhausted`` (docs/workflows.md, "Failure groups and retry").
    group: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.waiting <= self.after:
            raise ValueError(f"a job waits on {self.waiting} of {self.after} upstreams")


@dataclass(frozen=True, slots=True)
class QueueView:
    """What ``inspect queue(s)`` shows of one queue."""

    name: str
    ready_len: int
    scheduled_len: int
    paused: bool = False  # [eventq] pause (docs/protocol.md, "eventq extensions")
    # [eventq] WAITING jobs (docs/workflows.md, "Dependencies"): shown
    # only when > 0, so a queue without any keeps workq's block.
    waiting_len: int = 0

    def __post_init__(self) -> None:
        if self.waiting_len < 0:
            raise ValueError(f"a queue has {self.waiting_len} waiting jobs")


@dataclass(frozen=True, slots=True)
class InputView:
    """[eventq] What ``inputs`` shows of one finished upstream (docs/workflows.md, "Inputs"): its
    id, whether it COMPLETED (else it FAILED), and its result (the
    fail result for a FAILED one)."""

    upstream: uuid.UUID
    completed: bool
    result: bytes


@dataclass(frozen=True, slots=True)
class RecurrenceView:
    """[eventq] What ``inspect recurring`` shows of one recurrence (docs/workflows.md, "Recurring
    jobs"): its definition, when it was made (the last ``recur``'s time)
    and when its next slot is due."""

    name: str
    job_name: str
    ttr_ms: int
    ttl_ms: int
    every_ms: int
    payload: bytes
    max_attempts: int
    max_fails: int
    priority: int
    created_ms: int
    next_ms: int
    backoff_ms: int = 0
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BulkView:
    """What ``inspect bulk`` shows of one partition of the bulk lane: the next offset
    of `eventq.bulk` to admit, and how many records stand between it and the end."""

    partition: int
    admitted: int
    backlog: int


def _line(*parts: str | int) -> bytes:
    """Space-separated parts and ``\\r\\n``."""
    return " ".join(str(part) for part in parts).encode(_TEXT_ENCODING) + _CRLF


def _ok_count(count: int) -> bytes:
    return b"+OK %d\r\n" % count


def ok() -> bytes:
    """``+OK``: add, schedule, complete, fail, delete."""
    return b"+OK\r\n"


def handed_over_reply(reply: bytes) -> bytes:
    """``outcome``'s reply (internal): ``+OK `` and the command's own reply line, so an
    asker tells it from an error of its own (a process that does not know the verb)."""
    return b"+OK " + reply


def reply_handed_over(line: bytes) -> bytes | None:
    """The command's reply in ``outcome``'s reply ``line``; None if it holds none."""
    return line[4:] if line.startswith(b"+OK ") else None


def outcome_reply(accepted: bool, error: EventqError | None) -> bytes:
    """The reply of add, schedule, complete, fail, delete or touch from what became of
    its command: ``+OK`` when accepted, else the error's line."""
    if accepted:
        return ok()
    assert error is not None, "a command not accepted has its error"
    return error.reply


def _result_entry(id: uuid.UUID, success: bool, result: bytes) -> bytes:
    """``<id> <1|0> <size>``, then the raw result: one entry of result, run, inputs."""
    return _line(canonical_id(id), 1 if success else 0, len(result)) + result + _CRLF


def result_reply(id: uuid.UUID, success: bool, result: bytes) -> bytes:
    """run and result: ``+OK 1``, ``<id> <1|0> <size>``, then the raw result."""
    return _ok_count(1) + _result_entry(id, success, result)


def _input_entry(view: InputView) -> bytes:
    return _result_entry(view.upstream, view.completed, view.result)


def inputs_reply(inputs: Sequence[InputView]) -> bytes:
    """[eventq] inputs (docs/workflows.md, "Inputs"): ``+OK <n>``, then per finished
    upstream in -after order ``<upstream-id> <1|0> <size>`` and its raw result. A job
    without upstreams (or none finished): ``+OK 0``."""
    return _ok_count(len(inputs)) + b"".join(map(_input_entry, inputs))


def inputs_reply_stream(count: int, inputs: Iterable[InputView]) -> Iterator[bytes]:
    """``inputs_reply`` in pieces, one upstream at a time, for ``count`` upstreams: 100
    results of 1 MiB are 100 MiB, written as they are produced (spec: "written in
    pieces, like an inspect jobs page")."""
    yield _ok_count(count)
    written = 0
    for view in inputs:
        written += 1
        yield _input_entry(view)
    if written != count:
        raise ValueError(f"a reply announced {count} inputs and had {written}")


def edges_reply(upstreams: Sequence[tuple[uuid.UUID, str]],
                dependents: Sequence[uuid.UUID]) -> bytes:
    """edges (internal): ``+OK <n>``, then ``upstream <id> <outcome>`` per upstream (the
    outcome its dependent holds: unfinished, completed, failed, deleted, evicted), then
    ``dependent <id>`` per dependent registered."""
    lines = [_line("upstream", canonical_id(id), outcome) for id, outcome in upstreams]
    lines += [_line("dependent", canonical_id(id)) for id in dependents]
    return _ok_count(len(lines)) + b"".join(lines)


def lease_reply(id: uuid.UUID, name: str, ttr_ms: int, payload: bytes) -> bytes:
    """lease: ``+OK 1``, ``<id> <name> <ttr> <size>``, then the raw payload."""
    header = _line(canonical_id(id), name, ttr_ms, len(payload))
    return _ok_count(1) + header + payload + _CRLF


def _job_block(job: JobView, order: int | None = None) -> bytes:
    """``<id> <12|13>`` and the keys in the spec's order; ``time`` only if scheduled;
    [eventq] then ``after`` and ``waiting`` only for a job with upstreams, then ``tags``
    only for a job with tags (docs/workflows.md, "Job and queue blocks": after the workq
    keys and ``time``, in this order, before ``group``), and ``group`` last, only for a
    FAILED job in a group workq's commands do not produce. ``order`` (peer form: docs/architecture.md,
    "Scaling out") adds a last key, the job's place in its list."""
    lines = [
        _line("name", job.name),
        _line("ttr", job.ttr_ms),
        _line("ttl", job.ttl_ms),
        _line("payload-size", len(job.payload)),
        b"payload " + job.payload + _CRLF,
        _line("max-attempts", job.max_attempts),
        _line("attempts", job.attempts),
        _line("max-fails", job.max_fails),
        _line("fails", job.fails),
        _line("priority", job.priority),
        _line("state", job.state),
        _line("created", format_time(job.created_ms)),
    ]
    if job.scheduled_ms is not None:
        lines.append(_line("time", format_time(job.scheduled_ms)))
    if job.after:
        lines += (_line("after", job.after), _line("waiting", job.waiting))
    if job.tags:
        lines.append(_line("tags", ",".join(job.tags)))
    if job.group is not None:  # the last key (docs/workflows.md, "Job and queue blocks")
        lines.append(_line("group", job.group))
    if order is not None:
        lines.append(_line("order", order))
    return _line(canonical_id(job.id), len(lines)) + b"".join(lines)


def _queue_block(queue: QueueView) -> bytes:
    """``<name> 2``, ``ready-len R``, ``scheduled-len S``; [eventq] then ``waiting-len
    W`` when W > 0 (docs/workflows.md, "Job and queue blocks") and ``paused 1`` when
    paused (docs/protocol.md, "pause and resume"), each raising the key count by one (2
    to 4), so a queue with neither keeps workq's block."""
    lines = [_line("ready-len", queue.ready_len), _line("scheduled-len", queue.scheduled_len)]
    if queue.waiting_len:
        lines.append(_line("waiting-len", queue.waiting_len))
    if queue.paused:
        lines.append(_line("paused", 1))
    return _line(queue.name, len(lines)) + b"".join(lines)


def _recurrence_block(view: RecurrenceView) -> bytes:
    """``<recurrence-name> <11|12|13>`` and its keys in the spec's order; ``backoff``
    only when > 0 and ``tags`` only when set, each one key more."""
    lines = [
        _line("name", view.job_name),
        _line("ttr", view.ttr_ms),
        _line("ttl", view.ttl_ms),
        _line("every", view.every_ms),
        _line("payload-size", len(view.payload)),
        b"payload " + view.payload + _CRLF,
        _line("max-attempts", view.max_attempts),
        _line("max-fails", view.max_fails),
        _line("priority", view.priority),
        _line("created", format_time(view.created_ms)),
        _line("next", format_time(view.next_ms)),
    ]
    if view.backoff_ms:
        lines.append(_line("backoff", view.backoff_ms))
    if view.tags:
        lines.append(_line("tags", ",".join(view.tags)))
    return _line(view.name, len(lines)) + b"".join(lines)


def recurrence_blocks(views: Sequence[RecurrenceView]) -> bytes:
    """[eventq] inspect recurring: ``+OK <n>`` + one block per recurrence."""
    return _blocks(map(_recurrence_block, views), len(views))


def recurrence_blocks_stream(count: int, views: Iterable[RecurrenceView]) -> Iterator[bytes]:
    """``recurrence_blocks`` in pieces, one recurrence at a time (up to 100 payloads of
    1 MiB), for ``count`` recurrences."""
    yield _ok_count(count)
    written = 0
    for view in views:
        written += 1
        yield _recurrence_block(view)
    if written != count:
        raise ValueError(f"a reply announced {count} recurrences and had {written}")


def _blocks(blocks: Iterable[bytes], count: int) -> bytes:
    return _ok_count(count) + b"".join(blocks)


def job_blocks(jobs: Sequence[JobView]) -> bytes:
    """inspect jobs / scheduled-jobs (and inspect job, with one job): ``+OK <n>`` + blocks."""
    return _blocks(map(_job_block, jobs), len(jobs))


def job_blocks_stream(count: int, jobs: Iterable[JobView]) -> Iterator[bytes]:
    """``job_blocks`` in pieces, one job at a time, for ``count`` jobs: a page of 100
    jobs of 1 MiB is 100 MiB, written as it is produced instead of built whole."""
    yield _ok_count(count)
    written = 0
    for job in jobs:
        written += 1
        yield _job_block(job)
    if written != count:
        raise ValueError(f"a reply announced {count} jobs and had {written}")


def ordered_job_blocks(jobs: Sequence[tuple[int, JobView]]) -> bytes:
    """inspect jobs / scheduled-jobs in peer form: each block ends with an
    ``order`` key, the job's place in its list, for the asking gateway to merge by."""
    return _blocks((_job_block(job, order) for order, job in jobs), len(jobs))


def peer_lease_reply(id: uuid.UUID, name: str, ttr_ms: int, attempt: int, prior_state: int,
                     claim: int, payload: bytes) -> bytes:
    """lease in peer form: ``<id> <name> <ttr> <attempt> <prior-state> <claim>
    <size>``, so the asking gateway can give the attempt back if its client is gone
    (``claim``: the log position of the start-attempt, core.ReleaseAttempt)."""
    header = _line(canonical_id(id), name, ttr_ms, attempt, prior_state, claim, len(payload))
    return _ok_count(1) + header + payload + _CRLF


def heads_reply(heads: dict[str, int]) -> bytes:
    """peek (internal): ``+OK <n>``, then ``<name> <key>`` per name with a ready job."""
    return _ok_count(len(heads)) + b"".join(_line(name, key) for name, key in heads.items())


def digest_part_reply(digest_sum: int, count: int, partitions: Iterable[int]) -> bytes:
    """inspect digest in peer form: the sum and count of this process's
    jobs (combined by the asking gateway) and the partitions they come from."""
    served = ",".join(map(str, partitions)) or "-"
    return _ok_count(1) + _line("digest-part", f"{digest_sum:064x}", count, served)


def _bulk_block(view: BulkView) -> bytes:
    """``<partition> 2``, ``admitted A``, ``backlog B``."""
    return _line(view.partition, 2) + _line("admitted", view.admitted) + _line(
        "backlog", view.backlog
    )


def bulk_blocks(views: Sequence[BulkView]) -> bytes:
    """inspect bulk (eventq extension): ``+OK <n>`` + one block per partition served."""
    return _blocks(map(_bulk_block, views), len(views))


def queue_blocks(queues: Sequence[QueueView]) -> bytes:
    """inspect queues (and inspect queue, with one queue): ``+OK <n>`` + blocks."""
    return _blocks(map(_queue_block, queues), len(queues))


def failed_reply(groups: Sequence[tuple[str, int]]) -> bytes:
    """[eventq] inspect failed (docs/workflows.md, "Failure groups and retry"):
    ``+OK <n>``, then per group ``<group> 1``, ``failed-len <F>`` (the page, in the
    order given: by name bytewise)."""
    return _blocks((_line(group, 1) + _line("failed-len", count) for group, count in groups),
                   len(groups))


def keys_reply(keyed: Sequence[tuple[int, uuid.UUID]]) -> bytes:
    """retry-group in peer form (internal): ``+OK <n>``, then ``<key> <id>`` per job, the
    key its place in its failure group (failure time and id)."""
    return _ok_count(len(keyed)) + b"".join(_line(key, canonical_id(id)) for key, id in keyed)


def retried_reply(count: int) -> bytes:
    """[eventq] retry-group: ``+OK 1``, ``retried <n>``."""
    return _ok_count(1) + _line("retried", count)


def server_reply(active_clients: int, evicted_jobs: int, started_ms: int) -> bytes:
    """inspect server: [eventq] key count 3 (workq said 2 and sent three keys)."""
    return (
        _ok_count(1)
        + _line("server", 3)
        + _line("active-clients", active_clients)
        + _line("evicted-jobs", evicted_jobs)
        + _line("started", format_time(started_ms))
    )


def digest_reply(digest_hex: str) -> bytes:
    """inspect digest (eventq extension): ``+OK 1``, ``digest <hex>``."""
    return _ok_count(1) + _line("digest", digest_hex)


def error_reply(err: EventqError) -> bytes:
    """Any error: ``-CODE`` or ``-CODE text``."""
    return err.reply
