"""Every client operation as a pure value: the bytes to send, the shape of the reply, how
to read it (sans-IO, like the server's parser). ``Client`` and ``AsyncClient`` are two
thin shells around these: one sends with sockets and threads, the other with asyncio.

A ``Call`` is built by one function per protocol command; its ``parse`` turns the
complete reply (found by ``eventq.protocol.reply_reader.reply_end``) into a typed value
or raises the error the server replied.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, TypeVar

from eventq.client.errors import error_of
from eventq.client.models import (
    STATE_NAMES,
    FailedGroup,
    Job,
    JobEdges,
    JobInfo,
    NewJob,
    QueueInfo,
    RecurrenceInfo,
    Result,
    ServerInfo,
)
from eventq.errors import INVALID_PAYLOAD_SIZE, INVALID_RESULT_SIZE, ClientError
from eventq.limits import MAX_PAYLOAD_BYTES
from eventq.protocol import requests as rq
from eventq.protocol.encode import encode_request
from eventq.protocol.reply_reader import (
    Block,
    Shape,
    data_reply_entries,
    data_reply_fields,
    parse_blocks,
)
from eventq.protocol.values import (
    parse_count,
    parse_delay_ms,
    parse_group,
    parse_name,
    parse_tag,
    parse_tags,
    parse_time_ms,
)

MS = 1000.0
DEFAULT_TTR_MS = 60_000
DEFAULT_TTL_MS = 86_400_000  # a day


T = TypeVar("T")  # what a call's reply is parsed into


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request: ``data`` to send, its reply's ``shape``, ``parse`` of the reply.
    ``wait_s``: how long the server may rightly hold it (a blocking lease or result);
    ``retry_safe``: sending it twice changes nothing (reads), so a broken connection may
    be replaced and the call repeated."""

    data: bytes
    shape: Shape
    parse: Callable[[bytes], T]
    wait_s: float = 0.0
    retry_safe: bool = False


def check(reply: bytes) -> bytes:
    """The reply, or the error it is raised."""
    if reply[:1] == b"-":
        raise error_of(reply[:-2])
    return reply


def _ok(reply: bytes) -> None:
    check(reply)


def _ok_then(value: T) -> Callable[[bytes], T]:
    """A status reply's parser that gives ``value`` (the id the client chose)."""

    def parse(reply: bytes) -> T:
        check(reply)
        return value

    return parse


def _bytes(value: bytes | str, too_large: str = INVALID_PAYLOAD_SIZE) -> bytes:
    """A payload or result; over the protocol's 1 MiB it is refused here, as the server
    would (which then closes the connection: the block cannot be skipped)."""
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(data) > MAX_PAYLOAD_BYTES:
        raise ClientError(too_large)
    return data


def _name(name: str) -> str:
    """A queue name, checked before sending: a space in one would split the request
    line and put the connection out of step."""
    return parse_name(str(name))


def _id(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _ids(values: Iterable[uuid.UUID | str]) -> tuple[uuid.UUID, ...]:
    """-after's upstreams, in order (the server checks them: ``Invalid After``)."""
    return tuple(map(_id, values))


def _tags(values: Iterable[str] | str) -> tuple[str, ...]:
    """-tags, in order, checked before sending (``Invalid Tags``): a space or a comma in
    one would change the request line. A str is one tag, not its letters."""
    tags = (values,) if isinstance(values, str) else tuple(map(str, values))
    for tag in tags:
        parse_tag(tag)
    return parse_tags(",".join(tags)) if tags else ()  # 1-16, all distinct


def _time_ms(when: dt.datetime | int | str) -> int:
    """A schedule time: an aware datetime, unix ms, or the protocol's UTC text."""
    if isinstance(when, dt.datetime):
        if when.tzinfo is None:
            raise ValueError("a schedule time must be timezone-aware (e.g. tz=UTC)")
        return int(when.timestamp() * 1000)
    if isinstance(when, str):
        return parse_time_ms(when)
    return int(when)


# --- replies ----------------------------------------------------------------------


def _leased(reply: bytes) -> Job:
    words, payload = data_reply_fields(check(reply))
    job_id, name, ttr = words[0], words[1], words[2]
    return Job(uuid.UUID(job_id.decode()), name.decode(), int(ttr), payload)


def _result(reply: bytes) -> Result:
    words, data = data_reply_fields(check(reply))
    return Result(uuid.UUID(words[0].decode()), words[1] == b"1", data)


def _inputs(reply: bytes) -> list[Result]:
    return [Result(uuid.UUID(words[0].decode()), words[1] == b"1", data)
            for words, data in data_reply_entries(check(reply))]


def _job_info(block: Block) -> JobInfo:
    v = dict(block.lines)
    time = v.get(b"time")
    return JobInfo(
        uuid.UUID(block.head.decode()), v[b"name"].decode(), int(v[b"ttr"]), int(v[b"ttl"]),
        v[b"payload"], int(v[b"max-attempts"]), int(v[b"attempts"]), int(v[b"max-fails"]),
        int(v[b"fails"]), int(v[b"priority"]), STATE_NAMES[int(v[b"state"])],
        v[b"created"].decode(), None if time is None else time.decode(),
        int(v.get(b"after", 0)), int(v.get(b"waiting", 0)),
        tuple(v[b"tags"].decode().split(",")) if b"tags" in v else (),
        None if b"group" not in v else v[b"group"].decode(),
    )  # fmt: skip


def _queue_info(block: Block) -> QueueInfo:
    v = dict(block.lines)
    return QueueInfo(block.head.decode(), int(v[b"ready-len"]), int(v[b"scheduled-len"]),
                     v.get(b"paused") == b"1", int(v.get(b"waiting-len", 0)))


def _jobs(reply: bytes) -> list[JobInfo]:
    return [_job_info(block) for block in parse_blocks(check(reply))]


def _failed_groups(reply: bytes) -> list[FailedGroup]:
    return [FailedGroup(block.head.decode(), int(dict(block.lines)[b"failed-len"]))
            for block in parse_blocks(check(reply))]


def _retried(reply: bytes) -> int:
    """``+OK 1`` / ``retried <n>``: n."""
    return int(check(reply).split(b"\r\n")[1].split(b" ")[1])


def _group(group: str) -> str:
    """A failure group, checked before sending (like a name)."""
    return parse_group(str(group))


def _one_job(reply: bytes) -> JobInfo:
    (job,) = _jobs(reply)
    return job


def _queues(reply: bytes) -> list[QueueInfo]:
    return [_queue_info(block) for block in parse_blocks(check(reply))]


def _recurrences(reply: bytes) -> list[RecurrenceInfo]:
    found = []
    for block in parse_blocks(check(reply)):
        v = dict(block.lines)
        tags = v.get(b"tags")
        found.append(RecurrenceInfo(
            block.head.decode(), v[b"name"].decode(), int(v[b"ttr"]), int(v[b"ttl"]),
            int(v[b"every"]), v[b"payload"], int(v[b"max-attempts"]), int(v[b"max-fails"]),
            int(v[b"priority"]), v[b"created"].decode(), v[b"next"].decode(),
            int(v.get(b"backoff", 0)), () if tags is None else tuple(tags.decode().split(",")),
        ))  # fmt: skip
    return found


def _one_queue(reply: bytes) -> QueueInfo:
    (queue,) = _queues(reply)
    return queue


def _server(reply: bytes) -> ServerInfo:
    (block,) = parse_blocks(check(reply))
    v = dict(block.lines)
    return ServerInfo(int(v[b"active-clients"]), int(v[b"evicted-jobs"]), v[b"started"].decode())


def _edges(reply: bytes) -> JobEdges:
    upstreams, dependents = [], []
    for line in check(reply).split(b"\r\n")[1:-1]:
        kind, id, *outcome = line.decode().split(" ")
        if kind == "upstream":
            upstreams.append((uuid.UUID(id), outcome[0]))
        else:
            dependents.append(uuid.UUID(id))
    return JobEdges(tuple(upstreams), tuple(dependents))


def _digest(reply: bytes) -> str:
    line = check(reply).split(b"\r\n")[1]
    return line.split(b" ", 1)[1].decode()


# --- requests ---------------------------------------------------------------------


def add(name: str, payload: bytes | str, *, ttr_ms: int = DEFAULT_TTR_MS,
        ttl_ms: int = DEFAULT_TTL_MS, id: uuid.UUID | str | None = None, priority: int = 0,
        max_attempts: int = 0, max_fails: int = 0, backoff_ms: int = 0,
        after: Iterable[uuid.UUID | str] = (), tags: Iterable[str] | str = ()) -> Call[uuid.UUID]:
    """Enqueue a job; returns its id (generated when ``id`` is None).

    ``max_fails=N`` retries a failed job while it has failed fewer than N times;
    ``backoff_ms`` (eventq) makes each retry wait backoff x 2^(r-1); ``after`` (eventq,
    1-100 ids) makes it wait until those jobs complete (``inputs`` gives their results);
    ``tags`` (eventq, 1-16 distinct tags of ``[A-Za-z0-9_.-]``) are kept for its life,
    and ``inspect_tagged`` finds it by any of them::

        job_id = client.add("emails", b'{"to": "a@b.c"}', ttr_ms=30_000, max_fails=5,
                            backoff_ms=1_000, tags=["signup", "tenant-42"])
    """
    job_id = uuid.uuid4() if id is None else _id(id)
    request = rq.Add(job_id, _name(name), ttr_ms, ttl_ms, _bytes(payload), priority, max_attempts,
                     max_fails, backoff_ms, _ids(after), _tags(tags))
    return Call(encode_request(request), Shape.STATUS, _ok_then(job_id))


def add_job(job: NewJob) -> Call[uuid.UUID]:
    return add(job.name, job.payload, ttr_ms=job.ttr_ms, ttl_ms=job.ttl_ms, id=job.id,
               priority=job.priority, max_attempts=job.max_attempts, max_fails=job.max_fails,
               backoff_ms=job.backoff_ms, after=job.after, tags=job.tags)


def schedule(name: str, payload: bytes | str, when: dt.datetime | int | str, *,
             ttr_ms: int = DEFAULT_TTR_MS, ttl_ms: int = DEFAULT_TTL_MS,
             id: uuid.UUID | str | None = None, priority: int = 0, max_attempts: int = 0,
             max_fails: int = 0, backoff_ms: int = 0,
             after: Iterable[uuid.UUID | str] = (), tags: Iterable[str] | str = ()) -> Call[uuid.UUID]:
    """Enqueue a job that becomes ready at ``when`` (aware datetime, unix ms or
    ``YYYY-MM-DDTHH:MM:SSZ``), or when its ``after`` jobs complete if that is later; its
    TTL counts from ``when``; ``tags`` as for ``add``. Returns its id."""
    job_id = uuid.uuid4() if id is None else _id(id)
    request = rq.Schedule(job_id, _name(name), ttr_ms, ttl_ms, _time_ms(when), _bytes(payload),
                          priority, max_attempts, max_fails, backoff_ms, _ids(after),
                          _tags(tags))
    return Call(encode_request(request), Shape.STATUS, _ok_then(job_id))


def run(name: str, payload: bytes | str, *, ttr_ms: int = DEFAULT_TTR_MS,
        wait_timeout_ms: int = 60_000, id: uuid.UUID | str | None = None,
        priority: int = 0) -> Call[Result]:
    """Enqueue a job and wait for a worker's ``Result`` (``TimedOut`` if none leased it
    within ``wait_timeout_ms``). The job is deleted when run returns."""
    job_id = uuid.uuid4() if id is None else _id(id)
    request = rq.Run(job_id, _name(name), ttr_ms, wait_timeout_ms, _bytes(payload), priority)
    return Call(encode_request(request), Shape.DATA, _result,
                wait_s=(wait_timeout_ms + ttr_ms) / MS)


def result(id: uuid.UUID | str, wait_timeout_ms: int = 0) -> Call[Result]:
    """A finished job's ``Result``, waiting up to ``wait_timeout_ms`` for it."""
    request = rq.Result(_id(id), wait_timeout_ms)
    return Call(encode_request(request), Shape.DATA, _result, wait_s=wait_timeout_ms / MS,
                retry_safe=True)


def inputs(id: uuid.UUID | str) -> Call[list[Result]]:
    """eventq: the results of a job's finished upstreams, in its ``after`` order, each a
    ``Result`` (``ok`` False for a failed one); unfinished ones are left out."""
    return Call(encode_request(rq.Inputs(_id(id))), Shape.DATA, _inputs, retry_safe=True)


def lease(names: str | Iterable[str], wait_timeout_ms: int = 30_000) -> Call[Job]:
    """The next ready ``Job`` of any of ``names`` (``TimedOut`` after
    ``wait_timeout_ms``). Finish it with complete or fail within its TTR, or touch it."""
    names = tuple(map(_name, (names,) if isinstance(names, str) else names))
    request = rq.Lease(names, wait_timeout_ms)
    return Call(encode_request(request), Shape.DATA, _leased, wait_s=wait_timeout_ms / MS)


def complete(id: uuid.UUID | str, result: bytes | str = b"") -> Call[None]:
    """Complete a job with ``result`` (``DuplicateResult`` if it is already final)."""
    request = rq.Complete(_id(id), _bytes(result))
    return Call(encode_request(request), Shape.STATUS, _ok)


def fail(id: uuid.UUID | str, result: bytes | str = b"", *, group: str | None = None) -> Call[None]:
    """Fail a job (retried while it has max-fails left, after its backoff). eventq:
    ``group``, the failure group it is in if this fail is final (default ``failed``)."""
    request = rq.Fail(_id(id), _bytes(result, INVALID_RESULT_SIZE),
                      None if group is None else _group(group))
    return Call(encode_request(request), Shape.STATUS, _ok)


def retry(id: uuid.UUID | str, delay_ms: int = 0) -> Call[None]:
    """eventq: a FAILED job runs again under its id, ready at once or after
    ``delay_ms``; its dependents failed because of it come back too (``NotFound`` if it
    is not FAILED)."""
    request = rq.Retry(_id(id), parse_delay_ms(str(delay_ms)))
    return Call(encode_request(request), Shape.STATUS, _ok)


def retry_group(group: str, count: int) -> Call[int]:
    """eventq: retry up to ``count`` (1-10,000) FAILED jobs of a failure group, oldest
    failure first; how many were retried."""
    request = rq.RetryGroup(_group(group), parse_count(str(count)))
    return Call(encode_request(request), Shape.LINES, _retried)


def inspect_failed(offset: int = 0, limit: int = 100) -> Call[list[FailedGroup]]:
    """eventq: the failure groups that have FAILED jobs, by name, each a
    ``FailedGroup`` (its name and how many)."""
    return Call(encode_request(rq.InspectFailed(offset, limit)), Shape.BLOCKS, _failed_groups,
                retry_safe=True)


def inspect_failed_jobs(group: str, offset: int = 0, limit: int = 100) -> Call[list[JobInfo]]:
    """eventq: a failure group's FAILED jobs, oldest failure first (``JobInfo``s)."""
    request = rq.InspectFailedJobs(_group(group), offset, limit)
    return Call(encode_request(request), Shape.BLOCKS, _jobs, retry_safe=True)


def delete(id: uuid.UUID | str) -> Call[None]:
    """Remove a job in any state (``NotFound`` if there is none)."""
    return Call(encode_request(rq.Delete(_id(id))), Shape.STATUS, _ok, retry_safe=True)


def touch(id: uuid.UUID | str, ttr_ms: int | None = None) -> Call[None]:
    """eventq: keep a lease alive; its deadline becomes now + ``ttr_ms`` (default the
    job's TTR). ``NotFound`` when the job is no longer leased (it timed out)."""
    return Call(encode_request(rq.Touch(_id(id), ttr_ms)), Shape.STATUS, _ok, retry_safe=True)


def auth(token: str) -> Call[None]:
    """eventq (docs/security.md, "Tokens and roles"): this connection's token, sent first
    on each connection of a client given one. ``Unauthorized`` if the server does not
    hold it."""
    if not token or any(c.isspace() for c in token):
        raise ClientError("a token is one word, without spaces")
    return Call(encode_request(rq.Auth(token)), Shape.STATUS, _ok)


def pause(name: str) -> Call[None]:
    """eventq: the queue hands out no jobs until ``resume``; adds still work."""
    return Call(encode_request(rq.Pause(_name(name))), Shape.STATUS, _ok, retry_safe=True)


def resume(name: str) -> Call[None]:
    """eventq: the queue hands out jobs again; waiting leases wake at once."""
    return Call(encode_request(rq.Resume(_name(name))), Shape.STATUS, _ok, retry_safe=True)


def inspect_job(id: uuid.UUID | str) -> Call[JobInfo]:
    """A job's ``JobInfo`` in any state (``NotFound`` if unknown)."""
    return Call(encode_request(rq.InspectJob(_id(id))), Shape.BLOCKS, _one_job, retry_safe=True)


def inspect_jobs(name: str, offset: int = 0, limit: int = 100, *, scheduled: bool = False,
                 waiting: bool = False) -> Call[list[JobInfo]]:
    """Ready jobs of a queue in lease order (or, ``scheduled``, those not yet due; or,
    ``waiting`` (eventq), its WAITING jobs, in lease order too)."""
    if scheduled and waiting:
        raise ValueError("inspect_jobs lists scheduled or waiting jobs, not both")
    kind = (rq.InspectScheduledJobs if scheduled else
            rq.InspectWaitingJobs if waiting else rq.InspectJobs)
    return Call(encode_request(kind(_name(name), offset, limit)), Shape.BLOCKS, _jobs, retry_safe=True)


def inspect_tagged(tag: str, offset: int = 0, limit: int = 100) -> Call[list[JobInfo]]:
    """eventq: live jobs with ``tag``, in any state, by created time then id, each a
    ``JobInfo`` (none: ``[]``; ``limit`` at most 100 per call)."""
    request = rq.InspectTagged(parse_tag(str(tag)), offset, limit)
    return Call(encode_request(request), Shape.BLOCKS, _jobs, retry_safe=True)


def inspect_queue(name: str) -> Call[QueueInfo]:
    """A queue's ``QueueInfo`` (``NotFound`` if no command ever named it)."""
    return Call(encode_request(rq.InspectQueue(_name(name))), Shape.BLOCKS, _one_queue, retry_safe=True)


def inspect_queues(offset: int = 0, limit: int = 100) -> Call[list[QueueInfo]]:
    """Known queues by name (bytewise), ``limit`` at most 100 per call."""
    return Call(encode_request(rq.InspectQueues(offset, limit)), Shape.BLOCKS, _queues,
                retry_safe=True)


def inspect_server() -> Call[ServerInfo]:
    return Call(encode_request(rq.InspectServer()), Shape.BLOCKS, _server, retry_safe=True)


def digest() -> Call[str]:
    """eventq: the order-independent digest of every job's state (hex)."""
    return Call(encode_request(rq.InspectDigest()), Shape.LINES, _digest, retry_safe=True)


def edges(id: uuid.UUID | str, limit: int = 100) -> Call[JobEdges]:
    """eventq, internal (the dashboard's job page): a job's ``JobEdges``, its upstreams
    and up to ``limit`` (1-100) of the dependents registered with it."""
    return Call(encode_request(rq.Edges(_id(id), limit)), Shape.LINES, _edges, retry_safe=True)


def recur(name: str, queue: str, payload: bytes | str, every_ms: int, *,
          ttr_ms: int = DEFAULT_TTR_MS, ttl_ms: int = DEFAULT_TTL_MS, priority: int = 0,
          max_attempts: int = 0, max_fails: int = 0, backoff_ms: int = 0,
          tags: Iterable[str] = ()) -> Call[None]:
    """eventq: recurrence ``name`` adds a job to ``queue`` at each slot, slot n due at
    n x ``every_ms`` (1,000 ms to 365 days) since the epoch, its id derived from (name,
    every, n) so a slot is one job (docs/workflows.md, "Recurring jobs"); the job is
    as ``add`` makes it with these settings. Calling it again replaces the definition
    without firing a slot twice::

        client.recur("nightly-report", "reports", b"{}", every_ms=86_400_000)
    """
    request = rq.Recur(_name(name), _name(queue), ttr_ms, ttl_ms, every_ms, _bytes(payload),
                       priority, max_attempts, max_fails, backoff_ms, tuple(tags))
    return Call(encode_request(request), Shape.STATUS, _ok, retry_safe=True)


def unrecur(name: str) -> Call[None]:
    """eventq: the recurrence is gone (``NotFound`` if there is none); its jobs stay."""
    return Call(encode_request(rq.Unrecur(_name(name))), Shape.STATUS, _ok)


def recurrences(offset: int = 0, limit: int = 100) -> Call[list[RecurrenceInfo]]:
    """eventq: the recurrences by name (bytewise), ``RecurrenceInfo`` each, ``limit``
    at most 100 per call (``inspect recurring``)."""
    return Call(encode_request(rq.InspectRecurring(offset, limit)), Shape.BLOCKS, _recurrences,
                retry_safe=True)


# The operations both clients offer, each the function above under its own name.
OPERATIONS: tuple[Callable[..., Call], ...] = (
    add, schedule, run, result, inputs, lease, complete, fail, delete, touch, pause, resume,
    inspect_job, inspect_jobs, inspect_tagged, inspect_queue, inspect_queues, inspect_server,
    digest, recur, unrecur, recurrences,
    retry, retry_group, inspect_failed, inspect_failed_jobs,
)
