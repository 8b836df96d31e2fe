"""What every client of the fault campaign's load shares: the configuration, the wire
(RawClient plus the requests it lacks), a reconnecting session per process, and the
recording of one op, retried as a user would after an indeterminate reply.

A lost connection makes the op in flight ``info`` and the client reconnects to the same
port, retrying while the process is down; every op is bounded by a client-side timeout
(its wait-timeout + ``op_margin_s``), after which it is ``info`` too and the connection
is dropped (its byte stream is out of step). An ``info`` reply to a write a user would
repeat (``RETRIED_KINDS``) is, most of the time, repeated: the same request with the
same id and bytes, on the same process or another, each attempt an op of its own whose
``args.retry_of`` names the one it repeats (docs/protocol.md, "add": a repeated add that
had landed answers ``Duplicate job``; "complete and fail": a repeated complete answers
``Duplicate result``).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, replace

from eventq.client.raw import RawClient
from eventq.errors import EventqError, ServerError

from .history import INFO, OK, Args, Clock, Op, Recorder, Reply, classify, error_line

RECONNECT_PAUSE_S = 0.2
SERVER_ERROR_PAUSE_S = 0.2
CONNECT_TIMEOUT_S = 2.0
RETRY_PAUSE_S = 0.3  # before repeating a request whose reply was indeterminate
RETRY_SHARE = 0.8  # of indeterminate replies repeated (the rest stay as they were)
MAX_RETRIES = 3
RETRY_GROUP = "load-retry"  # workers fail some jobs into it; operators retry it
RETRIED_KINDS = frozenset({"add", "schedule", "complete", "fail", "delete", "pause",
                           "resume", "retry", "recur", "unrecur"})


@dataclass(frozen=True)
class BulkTarget:
    """Where bulk producers write: the bulk topic and its partition count."""

    bootstrap: str
    topic: str = "eventq.bulk"
    partitions: int = 8


@dataclass(frozen=True)
class LoadConfig:
    ports: tuple[int, ...]  # one gateway port per eventq process; index = process index
    duration_s: float
    seed: int
    host: str = "127.0.0.1"
    producers_per_process: int = 2
    workers_per_process: int = 2
    readers_per_process: int = 1
    operators_per_process: int = 1  # workflows, pause/resume, retries, recurrences
    drain_workers_per_process: int = 2
    queues: tuple[str, ...] = ("fq0", "fq1", "fq2", "fq3")
    workflow_queue: str = "fw0"
    recurring_queue: str = "fr0"
    pausable_prefix: str = "fp"  # the operators of process k pause and resume fp<k>
    bulk: BulkTarget | None = None  # None: a producer's bulk turn is an add instead
    producer_pause_s: float = 0.02  # between a producer's ops (bounds the job count)
    reader_pause_s: float = 0.02
    operator_pause_s: float = 0.1
    op_margin_s: float = 15.0  # client-side timeout = the op's own wait + this
    # The processes in the group now (None: every one of ``ports``): clients of one that
    # left for good go to another (``Actor.routed``).
    members: Callable[[], Collection[int]] | None = None
    # The processes the load began with, one pausable queue each (None: one per port).
    # The drain goes through fewer ports once a process left, but every queue stays.
    processes: int | None = None

    def pausable_queues(self) -> tuple[str, ...]:
        """One a process the load began with: its operators pause and resume it."""
        count = len(self.ports) if self.processes is None else self.processes
        return tuple(f"{self.pausable_prefix}{k}" for k in range(count))

    def all_queues(self) -> tuple[str, ...]:
        """Every queue the load puts jobs in (what workers and the drain lease)."""
        return (*self.queues, *self.pausable_queues(), self.workflow_queue,
                self.recurring_queue)


# --- the wire -------------------------------------------------------------------------


def flags(**values: int | str | None) -> list[str]:
    return [f"-{k.replace('_', '-')}={v}" for k, v in values.items() if v is not None]


class LoadClient(RawClient):
    """RawClient plus what the load sends that it lacks."""

    async def add_job(self, job_id: str, name: str, ttr_ms: int, ttl_ms: int, payload: bytes,
                      max_fails: int | None, backoff_ms: int | None,
                      priority: int | None = None, after: tuple[str, ...] = ()) -> None:
        self.send(["add", job_id, name, str(ttr_ms), str(ttl_ms), str(len(payload)),
                   *flags(priority=priority, max_fails=max_fails, backoff=backoff_ms,
                          after=",".join(after) or None)], payload)
        await self._status()

    async def schedule_job(self, job_id: str, name: str, ttr_ms: int, ttl_ms: int, at: str,
                           payload: bytes, max_fails: int | None,
                           backoff_ms: int | None, priority: int | None = None) -> None:
        self.send(["schedule", job_id, name, str(ttr_ms), str(ttl_ms), at, str(len(payload)),
                   *flags(priority=priority, max_fails=max_fails, backoff=backoff_ms)],
                  payload)
        await self._status()

    async def fail_job(self, job_id: str, result: bytes, group: str | None) -> None:
        self.send(["fail", job_id, str(len(result)), *flags(group=group)], result)
        await self._status()

    async def touch(self, job_id: str) -> None:
        await self.simple("touch", job_id)

    async def simple(self, *words: str) -> None:
        """A request of one line answered ``+OK`` (pause, resume, retry, unrecur)."""
        self.send(list(words))
        await self._status()

    async def retry_group(self, group: str, count: int) -> int:
        self.send(["retry-group", group, str(count)])
        await self._status()
        _, retried = (await self._line()).split(b" ")
        return int(retried)

    async def recur(self, name: str, queue: str, ttr_ms: int, ttl_ms: int, every_ms: int,
                    payload: bytes) -> None:
        self.send(["recur", name, queue, str(ttr_ms), str(ttl_ms), str(every_ms),
                   str(len(payload))], payload)
        await self._status()

    async def inputs(self, job_id: str) -> tuple[tuple[str, bytes], ...]:
        """docs/workflows.md, "Inputs": each as (upstream id, flag byte + result)."""
        self.send(["inputs", job_id])
        entries = []
        for _ in range(await self._status()):
            upstream, flag, size = (await self._line()).split(b" ")
            entries.append((upstream.decode(), flag + await self._block(int(size))))
        return tuple(entries)

    def abort(self) -> None:
        """End the connection at once, unsent bytes and all: the peer may be frozen (a
        graceful close would wait for it to read)."""
        self._writer.transport.abort()


class OutOfStep(Exception):
    """The client could not make sense of a reply: the connection must be dropped."""


class Session:
    """One client's connection to one process, reconnected on demand (while the
    process is down, as long as ``keep_trying()``)."""

    def __init__(self, host: str, port: int, keep_trying: Callable[[], bool]) -> None:
        self.host, self.port, self.keep_trying = host, port, keep_trying
        self.client: LoadClient | None = None
        self.reconnects = 0

    async def connected(self) -> LoadClient | None:
        if self.client is not None and not self.client.usable:
            self.drop()  # closed by the server while idle (RawClient.usable)
        while self.client is None:
            if not self.keep_trying():
                return None
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    self.client = await LoadClient.connect(self.host, self.port)
                self.reconnects += 1
            except (OSError, TimeoutError):
                await asyncio.sleep(RECONNECT_PAUSE_S)
        return self.client

    def drop(self) -> None:
        if self.client is not None:
            self.client.abort()
            self.client = None


# --- recording one op -----------------------------------------------------------------


Call = Callable[[LoadClient], Awaitable[Reply]]


def is_out_of_step(error: EventqError) -> bool:
    """RawClient raises ServerError("unexpected reply ...") for a line it cannot read."""
    return isinstance(error, ServerError) and error.text.startswith("unexpected reply")


DEPENDENT_MARK = b"dep "  # a workflow dependent's payload starts so: workers ask inputs


def lease_call(names: list[str], wait_ms: int) -> Call:
    async def lease(client: LoadClient) -> Reply:
        job = await client.lease(names, wait_ms)
        return Reply(job_id=str(job.id), name=job.name, ttr_ms=job.ttr_ms, payload=job.payload)
    return lease


def inputs_call(job_id: str) -> Call:
    async def inputs(client: LoadClient) -> Reply:
        return Reply(fields=await client.inputs(job_id))
    return inputs


async def call_ok(awaitable: Awaitable[object]) -> Reply:
    await awaitable
    return Reply()


class SharedIds:
    """Job ids every reader may pick from (all creating ops invoked so far), and the jobs
    workers failed that an operator may retry."""

    RECENT = 200

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.failed: list[str] = []

    def add(self, job_ids: Iterable[str]) -> None:
        self.ids.extend(job_ids)

    def pick(self, rng: random.Random) -> str | None:
        """Half the time one of the newest (likely still live and being worked on)."""
        if not self.ids:
            return None
        if rng.random() < 0.5:
            return rng.choice(self.ids[-self.RECENT:])
        return rng.choice(self.ids)


class Actor:
    """A client of the load: its home process, a session per process, its random source
    and op recording. It keeps reconnecting until ``until_s`` (the load's end; an
    operator's clean-up and the drain go on longer)."""

    def __init__(self, index: int, process: int, session: Session, recorder: Recorder,
                 config: LoadConfig, shared: SharedIds, end_s: float) -> None:
        self.index, self.process, self.session = index, process, session
        self.recorder, self.config, self.shared, self.end_s = recorder, config, shared, end_s
        self.until_s = end_s
        session.keep_trying = self.keep_trying
        self.sessions = {process: session}
        self.rng = random.Random(f"{config.seed}:{index}")
        self.sequence = 0  # makes payloads and results unique per client

    @property
    def clock(self) -> Clock:
        return self.recorder.clock

    def running(self) -> bool:
        return self.clock.now() < self.end_s

    def keep_trying(self) -> bool:
        return self.clock.now() < self.until_s

    def routed(self, process: int) -> int:
        """``process``, or, once it left the group for good (``LoadConfig.members``),
        the member after it: a load balancer's health check stops sending there. A
        process that is down for a while (killed, paused, cut off) keeps its clients:
        they are what its faults are about."""
        if self.config.members is None:
            return process
        members = sorted(m for m in self.config.members() if m < len(self.config.ports))
        if not members or process in members:
            return process
        return next((m for m in members if m > process), members[0])

    def session_of(self, process: int) -> Session:
        if process not in self.sessions:
            self.sessions[process] = Session(self.config.host, self.config.ports[process],
                                             self.keep_trying)
        return self.sessions[process]

    def drop_all(self) -> None:
        for session in self.sessions.values():
            session.drop()

    def unique(self, what: str) -> bytes:
        self.sequence += 1
        return f"{what} c{self.index} n{self.sequence}".encode()

    def new_job_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    async def perform(self, kind: str, job_id: str | None, args: Args, call: Call,
                      wait_s: float, process: int | None = None) -> Op | None:
        """Send one op and record it; None when the process could not be reached in
        time (nothing was sent)."""
        process = self.routed(self.process if process is None else process)
        session = self.session_of(process)
        client = await session.connected()
        if client is None:
            return None
        index, invoke_s = self.recorder.begin()
        try:
            async with asyncio.timeout(wait_s + self.config.op_margin_s):
                reply = await call(client)
        except EventqError as error:
            if is_out_of_step(error):
                return self._lost(session, index, kind, job_id, args, invoke_s, process,
                                  OutOfStep(error.text))
            op = self._record(index, kind, job_id, args, invoke_s, self.clock.now(), process,
                              classify(kind, error), Reply(error=error_line(error)))
            if isinstance(error, ServerError):
                # Recovering or moving partitions answer at once: do not flood the
                # history (and the server) with refusals meanwhile.
                await asyncio.sleep(SERVER_ERROR_PAUSE_S)
            return op
        except Exception as error:  # connection lost, client timeout, garbled reply
            return self._lost(session, index, kind, job_id, args, invoke_s, process, error)
        if kind == "lease":
            job_id = reply.job_id
        return self._record(index, kind, job_id, args, invoke_s, self.clock.now(), process,
                            OK, reply)

    async def perform_retrying(self, kind: str, job_id: str | None, args: Args, call: Call,
                               wait_s: float) -> Op | None:
        """``perform``, then, after an indeterminate reply, the same request again (on
        this process or another) as a user would, up to ``MAX_RETRIES`` times."""
        op = await self.perform(kind, job_id, args, call, wait_s)
        for _ in range(MAX_RETRIES):
            if op is None or op.outcome != INFO or kind not in RETRIED_KINDS:
                break
            if self.rng.random() >= RETRY_SHARE:
                break
            await asyncio.sleep(RETRY_PAUSE_S)
            process = self.rng.randrange(len(self.config.ports))
            again = replace(args, retry_of=op.index)
            if args.wall_s is not None:  # judged against broker times: this attempt's own
                again = replace(again, wall_s=time.time())
            op = await self.perform(kind, job_id, again, call, wait_s, process) or op
        return op

    def _lost(self, session: Session, index: int, kind: str, job_id: str | None, args: Args,
              invoke_s: float, process: int, error: BaseException) -> Op:
        session.drop()
        return self._record(index, kind, job_id, args, invoke_s, None, process,
                            classify(kind, error), Reply(error=error_line(error)))

    def _record(self, index: int, kind: str, job_id: str | None, args: Args, invoke_s: float,
                return_s: float | None, process: int, outcome: str, reply: Reply) -> Op:
        return self.recorder.record(Op(index, self.index, process, kind, job_id, args,
                                       invoke_s, return_s, outcome, reply))


__all__ = [
    "BulkTarget", "LoadConfig", "LoadClient", "OutOfStep", "Session", "Call", "Actor",
    "SharedIds", "flags", "is_out_of_step", "call_ok", "lease_call", "inputs_call",
    "DEPENDENT_MARK", "RECONNECT_PAUSE_S",
    "RETRIED_KINDS",
]
