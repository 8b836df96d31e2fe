"""The fault campaign's load: asyncio clients on every eventq process that drive a mixed
workq load for a while and record every operation in a history (history.py), and the
read-back that asks, after the run, what became of every job.

Each client has its own ``random.Random(f"{seed}:{client}")``, so a seed replays the
same choices (job ids, queues, payloads, what to do next); what the server answers, and
so which job ids a reader or a delete can pick from, depends on timing.

Roles (per process, counts configurable):

- producers: add 60%, schedule 15% (0-3 s ahead, whole seconds, never in the past), run
  5% (wait-timeout 2000 ms, TTR 1500 ms, ``-priority=10`` so a backlog does not time it
  out), bulk 10% (20 adds as one batch record written straight to the bulk topic with
  confluent_kafka; ok = Kafka's delivery ack), delete 10% (of a job this producer
  created earlier; an add when it has none). Four queues, TTR 1500 or 40000 ms, TTL 1 h,
  some jobs ``-max-fails=3 -backoff=200``; every payload is unique
  (``payload c<client> n<seq>``). Without a ``BulkTarget`` a bulk turn is an add.
- workers: lease 1-3 of the queues (wait-timeout 500 ms), maybe touch, then complete
  60% / fail 25% / neither 15% (the TTR passes); every result is unique.
- readers: ``result <id> <0-300>`` or ``inspect job <id>`` of a random known job.

A client stays on its process. A lost connection makes the op in flight ``info`` and
the client reconnects to the same port, retrying while the process is down; every op is
bounded by a client-side timeout (its wait-timeout + ``op_margin_s``), after which it is
``info`` too and the connection is dropped (its byte stream is out of step).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Producer as KafkaProducer

from eventq.client.raw import RawClient
from eventq.core import Add, encode_command
from eventq.core.batch import encode_batch
from eventq.core.partitioner import CONFLUENT_PRODUCER_PARTITIONER, partition_for_key
from eventq.errors import ClientError, EventqError, NotFound, ServerError, Timeout

from .history import (
    FOUND,
    INFO,
    NOT_FOUND,
    OK,
    UNKNOWN,
    Args,
    BulkJob,
    Clock,
    Op,
    ReadBack,
    Recorder,
    Reply,
    classify,
    error_line,
)

TTL_MS = 3_600_000
TTRS_MS = (1500, 40_000)
RUN_TTR_MS = 1500  # a run waits for a leased attempt's TTR: keep producers moving
RUN_WAIT_MS = 2000
RUN_PRIORITY = 10  # ahead of the backlog, so runs get answers (their replies are checked)
LEASE_WAIT_MS = 500
BULK_COMMANDS = 20
RETRYING_JOB_SHARE = 0.3  # jobs with -max-fails=3 -backoff=200
RECONNECT_PAUSE_S = 0.2
SERVER_ERROR_PAUSE_S = 0.2
CONNECT_TIMEOUT_S = 2.0
KAFKA_DELIVERY_TIMEOUT_S = 10.0


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
    queues: tuple[str, ...] = ("fq0", "fq1", "fq2", "fq3")
    bulk: BulkTarget | None = None  # None: a producer's bulk turn is an add instead
    producer_pause_s: float = 0.02  # between a producer's ops (bounds the job count)
    reader_pause_s: float = 0.02
    op_margin_s: float = 15.0  # client-side timeout = the op's own wait + this


# --- the wire -------------------------------------------------------------------------


def _flags(**flags: int | None) -> list[str]:
    return [f"-{k.replace('_', '-')}={v}" for k, v in flags.items() if v is not None]


class LoadClient(RawClient):
    """RawClient plus what the load sends that it lacks (-backoff, touch)."""

    async def add_job(self, job_id: str, name: str, ttr_ms: int, ttl_ms: int, payload: bytes,
                      max_fails: int | None, backoff_ms: int | None) -> None:
        self.send(["add", job_id, name, str(ttr_ms), str(ttl_ms), str(len(payload)),
                   *_flags(max_fails=max_fails, backoff=backoff_ms)], payload)
        await self._status()

    async def schedule_job(self, job_id: str, name: str, ttr_ms: int, ttl_ms: int, at: str,
                           payload: bytes, max_fails: int | None,
                           backoff_ms: int | None) -> None:
        self.send(["schedule", job_id, name, str(ttr_ms), str(ttl_ms), at, str(len(payload)),
                   *_flags(max_fails=max_fails, backoff=backoff_ms)], payload)
        await self._status()

    async def touch(self, job_id: str) -> None:
        self.send(["touch", job_id])
        await self._status()

    def abort(self) -> None:
        """End the connection at once, unsent bytes and all: the peer may be frozen (a
        graceful close would wait for it to read)."""
        self._writer.transport.abort()


class OutOfStep(Exception):
    """The client could not make sense of a reply: the connection must be dropped."""


class Session:
    """One client's connection to its process, reconnected on demand (while the
    process is down, as long as ``keep_trying()``)."""

    def __init__(self, host: str, port: int, keep_trying: Callable[[], bool]) -> None:
        self.host, self.port, self.keep_trying = host, port, keep_trying
        self.client: LoadClient | None = None
        self.reconnects = 0

    async def connected(self) -> LoadClient | None:
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


def _is_out_of_step(error: EventqError) -> bool:
    """RawClient raises ServerError("unexpected reply ...") for a line it cannot read."""
    return isinstance(error, ServerError) and error.text.startswith("unexpected reply")


class Actor:
    """A client of the load: its process, session, random source and op recording."""

    def __init__(self, index: int, process: int, session: Session, recorder: Recorder,
                 config: LoadConfig, shared: SharedIds, end_s: float) -> None:
        self.index, self.process, self.session = index, process, session
        self.recorder, self.config, self.shared, self.end_s = recorder, config, shared, end_s
        self.rng = random.Random(f"{config.seed}:{index}")
        self.sequence = 0  # makes payloads and results unique per client

    @property
    def clock(self) -> Clock:
        return self.recorder.clock

    def running(self) -> bool:
        return self.clock.now() < self.end_s

    def unique(self, what: str) -> bytes:
        self.sequence += 1
        return f"{what} c{self.index} n{self.sequence}".encode()

    def new_job_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    async def perform(self, kind: str, job_id: str | None, args: Args, call: Call,
                      wait_s: float) -> Op | None:
        """Send one op and record it; None when the process could not be reached before
        the load ended (nothing was sent)."""
        client = await self.session.connected()
        if client is None:
            return None
        index, invoke_s = self.recorder.begin()
        try:
            async with asyncio.timeout(wait_s + self.config.op_margin_s):
                reply = await call(client)
        except EventqError as error:
            if _is_out_of_step(error):
                return self._lost(index, kind, job_id, args, invoke_s, OutOfStep(error.text))
            op = self._record(index, kind, job_id, args, invoke_s, self.clock.now(),
                              classify(kind, error), Reply(error=error_line(error)))
            if isinstance(error, ServerError):
                # Recovering or moving partitions answer at once: do not flood the
                # history (and the server) with refusals meanwhile.
                await asyncio.sleep(SERVER_ERROR_PAUSE_S)
            return op
        except Exception as error:  # connection lost, client timeout, garbled reply
            return self._lost(index, kind, job_id, args, invoke_s, error)
        if kind == "lease":
            job_id = reply.job_id
        return self._record(index, kind, job_id, args, invoke_s, self.clock.now(), OK, reply)

    def _lost(self, index: int, kind: str, job_id: str | None, args: Args, invoke_s: float,
              error: BaseException) -> Op:
        self.session.drop()
        return self._record(index, kind, job_id, args, invoke_s, None,
                            classify(kind, error), Reply(error=error_line(error)))

    def _record(self, index: int, kind: str, job_id: str | None, args: Args, invoke_s: float,
                return_s: float | None, outcome: str, reply: Reply) -> Op:
        return self.recorder.record(Op(index, self.index, self.process, kind, job_id, args,
                                       invoke_s, return_s, outcome, reply))


class SharedIds:
    """Job ids every reader may pick from (all creating ops invoked so far)."""

    RECENT = 200

    def __init__(self) -> None:
        self.ids: list[str] = []

    def add(self, job_ids: Iterable[str]) -> None:
        self.ids.extend(job_ids)

    def pick(self, rng: random.Random) -> str | None:
        """Half the time one of the newest (likely still live and being worked on)."""
        if not self.ids:
            return None
        if rng.random() < 0.5:
            return rng.choice(self.ids[-self.RECENT:])
        return rng.choice(self.ids)


# --- producers ------------------------------------------------------------------------


def schedule_time(rng: random.Random, now: dt.datetime | None = None) -> str:
    """0-3 s ahead in whole seconds, rounded up so it is never in the past (a past time
    would make the TTL count from before the schedule was accepted)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    ahead = math.ceil(now.timestamp()) + rng.randint(0, 2)
    return dt.datetime.fromtimestamp(ahead, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    queue: str
    ttr_ms: int
    payload: bytes
    max_fails: int | None
    backoff_ms: int | None


class Producer(Actor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mine: list[str] = []  # jobs this producer created (delete picks from them)
        self.kafka = None

    def new_job(self, job_id: str | None = None) -> JobSpec:
        retrying = self.rng.random() < RETRYING_JOB_SHARE
        return JobSpec(job_id or self.new_job_id(), self.rng.choice(self.config.queues),
                       self.rng.choice(TTRS_MS), self.unique("payload"),
                       3 if retrying else None, 200 if retrying else None)

    def created(self, *job_ids: str) -> None:
        self.mine.extend(job_ids)
        self.shared.add(job_ids)

    async def run_loop(self) -> None:
        try:
            while self.running():
                await self.step()
                await asyncio.sleep(self.config.producer_pause_s)
        finally:
            if self.kafka is not None:
                await asyncio.to_thread(self.kafka.flush, 5)

    async def step(self) -> None:
        r = self.rng.random()
        if r < 0.60:
            await self.add()
        elif r < 0.75:
            await self.schedule()
        elif r < 0.80:
            await self.run()
        elif r < 0.90:
            await (self.bulk() if self.config.bulk else self.add())
        else:
            await (self.delete() if self.mine else self.add())

    async def add(self) -> None:
        job = self.new_job()
        args = Args(queues=(job.queue,), ttr_ms=job.ttr_ms, ttl_ms=TTL_MS, payload=job.payload,
                    max_fails=job.max_fails, backoff_ms=job.backoff_ms)
        self.created(job.job_id)
        await self.perform("add", job.job_id, args, lambda c: _call(c.add_job(
            job.job_id, job.queue, job.ttr_ms, TTL_MS, job.payload, job.max_fails,
            job.backoff_ms)), 0)

    async def schedule(self) -> None:
        job = self.new_job()
        at = schedule_time(self.rng)
        args = Args(queues=(job.queue,), ttr_ms=job.ttr_ms, ttl_ms=TTL_MS, time=at,
                    payload=job.payload, max_fails=job.max_fails, backoff_ms=job.backoff_ms)
        self.created(job.job_id)
        await self.perform("schedule", job.job_id, args, lambda c: _call(c.schedule_job(
            job.job_id, job.queue, job.ttr_ms, TTL_MS, at, job.payload, job.max_fails,
            job.backoff_ms)), 0)

    async def run(self) -> None:
        job_id = self.new_job_id()
        queue = self.rng.choice(self.config.queues)
        payload = self.unique("payload")
        args = Args(queues=(queue,), ttr_ms=RUN_TTR_MS, payload=payload, wait_ms=RUN_WAIT_MS,
                    priority=RUN_PRIORITY)
        self.shared.add([job_id])  # not in `mine`: its run deletes it

        async def call(client: LoadClient) -> Reply:
            result = await client.run(job_id, queue, RUN_TTR_MS, RUN_WAIT_MS, payload,
                                      priority=RUN_PRIORITY)
            return Reply(job_id=str(result.id), success=result.success, data=result.result)

        # A run waits for its wait-timeout, then for a leased attempt's TTR (touches may
        # push that deadline on): bound it by both, twice the TTR for a touch.
        await self.perform("run", job_id, args, call, (RUN_WAIT_MS + 2 * RUN_TTR_MS) / 1000)

    async def delete(self) -> None:
        job_id = self.mine.pop(self.rng.randrange(len(self.mine)))
        await self.perform("delete", job_id, Args(),
                           lambda c: _call(c.delete(job_id)), 0)

    # bulk: straight to Kafka ------------------------------------------------------

    def bulk_job(self, partition: int) -> BulkJob:
        """A new job whose id falls in ``partition`` (a batch record holds commands of
        one partition: the server admits it into that partition of the command log)."""
        while True:
            job_id = self.new_job_id()
            if partition_for_key(job_id.encode(), self.config.bulk.partitions) == partition:
                break
        job = self.new_job(job_id)
        return BulkJob(job.job_id, job.queue, job.ttr_ms, TTL_MS, job.payload,
                       job.max_fails or 0, job.backoff_ms or 0)

    def kafka_producer(self):
        if self.kafka is None:
            self.kafka = KafkaProducer({
                "bootstrap.servers": self.config.bulk.bootstrap,
                "enable.idempotence": True,
                "partitioner": CONFLUENT_PRODUCER_PARTITIONER,
                "message.timeout.ms": int(KAFKA_DELIVERY_TIMEOUT_S * 1000),
                "linger.ms": 0,
            })
        return self.kafka

    async def bulk(self) -> None:
        target = self.config.bulk
        partition = self.rng.randrange(target.partitions)
        jobs = tuple(self.bulk_job(partition) for _ in range(BULK_COMMANDS))
        record = bulk_record(jobs)
        producer = self.kafka_producer()
        args = Args(jobs=jobs, partition=partition)
        self.created(*(job.job_id for job in jobs))
        index, invoke_s = self.recorder.begin()
        try:
            async with asyncio.timeout(KAFKA_DELIVERY_TIMEOUT_S + self.config.op_margin_s):
                await asyncio.to_thread(deliver, producer, target.topic, partition, record,
                                        KAFKA_DELIVERY_TIMEOUT_S + 5)
        except Exception as error:  # a delivery error or no ack: it may be in the log
            self._record(index, "bulk", None, args, invoke_s, None, classify("bulk", error),
                         Reply(error=error_line(error)))
            return
        self._record(index, "bulk", None, args, invoke_s, self.clock.now(), OK, Reply())


async def _call(awaitable: Awaitable[None]) -> Reply:
    await awaitable
    return Reply()


def bulk_record(jobs: Sequence[BulkJob]) -> bytes:
    """One batch record of add commands, built as docs/spark.md, "Bulk loads beside
    workers" says."""
    return encode_batch([
        encode_command(Add(uuid.UUID(job.job_id), job.queue, job.ttr_ms, job.ttl_ms,
                           job.payload, max_fails=job.max_fails, backoff_ms=job.backoff_ms))
        for job in jobs
    ])


class DeliveryFailed(Exception):
    """Kafka reported an error for a produced record (it may still be in the log)."""


def deliver(producer, topic: str, partition: int, value: bytes, timeout_s: float) -> None:
    """Produce one record and wait for its delivery report (in a thread: blocking)."""
    reported = threading.Event()
    errors: list[object] = []

    def on_delivery(error, _message) -> None:
        errors.append(error)
        reported.set()

    producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
    deadline = time.monotonic() + timeout_s
    while not reported.is_set() and time.monotonic() < deadline:
        producer.poll(0.05)
    if not reported.is_set():
        raise TimeoutError(f"no delivery report within {timeout_s:g}s")
    if errors[0] is not None:
        raise DeliveryFailed(str(errors[0]))


# --- workers and readers --------------------------------------------------------------


class Worker(Actor):
    async def run_loop(self) -> None:
        while self.running():
            await self.step()

    async def step(self) -> None:
        names = self.rng.sample(self.config.queues, self.rng.randint(1, 3))

        async def lease(client: LoadClient) -> Reply:
            job = await client.lease(names, LEASE_WAIT_MS)
            return Reply(job_id=str(job.id), name=job.name, ttr_ms=job.ttr_ms,
                         payload=job.payload)

        op = await self.perform("lease", None, Args(queues=tuple(names), wait_ms=LEASE_WAIT_MS),
                                lease, LEASE_WAIT_MS / 1000)
        if op is None:
            await asyncio.sleep(RECONNECT_PAUSE_S)
            return
        if op.outcome != OK:
            if op.outcome == INFO:
                await asyncio.sleep(RECONNECT_PAUSE_S)  # the process may be down: breathe
            return
        await self.work_on(op.reply.job_id)

    async def work_on(self, job_id: str) -> None:
        if self.rng.random() < 0.3:
            await self.perform("touch", job_id, Args(), lambda c: _call(c.touch(job_id)), 0)
        await asyncio.sleep(self.rng.uniform(0, 0.05))
        r = self.rng.random()
        if r < 0.60:
            result = self.unique("complete")
            await self.perform("complete", job_id, Args(result=result),
                               lambda c: _call(c.complete(job_id, result)), 0)
        elif r < 0.85:
            result = self.unique("fail")
            await self.perform("fail", job_id, Args(result=result),
                               lambda c: _call(c.fail(job_id, result)), 0)
        # else: neither; its TTR passes and another worker may lease it again


class Reader(Actor):
    async def run_loop(self) -> None:
        while self.running():
            await self.step()
            await asyncio.sleep(self.config.reader_pause_s)

    async def step(self) -> None:
        job_id = self.shared.pick(self.rng)
        if job_id is None:
            await asyncio.sleep(0.05)
            return
        if self.rng.random() < 0.5:
            wait_ms = self.rng.randint(0, 300)

            async def result(client: LoadClient) -> Reply:
                found = await client.result(job_id, wait_ms)
                return Reply(job_id=str(found.id), success=found.success, data=found.result)

            await self.perform("result", job_id, Args(wait_ms=wait_ms), result, wait_ms / 1000)
        else:
            async def inspect(client: LoadClient) -> Reply:
                return Reply(fields=tuple((await client.inspect_job(job_id)).items()))

            await self.perform("inspect", job_id, Args(), inspect, 0)


# --- the whole load -------------------------------------------------------------------


def build_actors(config: LoadConfig, recorder: Recorder, end_s: float) -> list[Actor]:
    shared = SharedIds()
    actors: list[Actor] = []
    roles = ((Producer, config.producers_per_process), (Worker, config.workers_per_process),
             (Reader, config.readers_per_process))
    for process, port in enumerate(config.ports):
        for role, count in roles:
            for _ in range(count):
                # Reconnecting goes on until the load ends (then nothing more is sent).
                session = Session(config.host, port,
                                  lambda: recorder.clock.now() < end_s)
                actors.append(role(len(actors), process, session, recorder, config, shared,
                                   end_s))
    return actors


async def run_load(config: LoadConfig, recorder: Recorder | None = None) -> list[Op]:
    """Drive the load for ``config.duration_s`` and return every op (by index). An op in
    flight when the time is up is waited for (each is bounded by its client timeout)."""
    recorder = recorder or Recorder()
    end_s = recorder.clock.now() + config.duration_s
    actors = build_actors(config, recorder, end_s)
    try:
        await asyncio.gather(*(actor.run_loop() for actor in actors))
    finally:
        for actor in actors:
            actor.session.drop()
    return recorder.ops


def created_job_ids(ops: Iterable[Op]) -> list[str]:
    """Every job id an op tried to create, in op order (what the read-back asks about)."""
    seen: dict[str, None] = {}
    for op in sorted(ops, key=lambda op: op.index):
        if op.kind in ("add", "schedule", "run", "bulk"):
            seen.update(dict.fromkeys(op.job_ids))
    return list(seen)


# --- after the run --------------------------------------------------------------------


async def wait_bulk_admitted(port: int, timeout_s: float = 120.0, host: str = "127.0.0.1",
                             ) -> bool:
    """Until ``inspect bulk`` shows no backlog on any partition (a bulk's ok is Kafka's
    ack; its jobs exist only once admitted): True, or False at the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            async with asyncio.timeout(10):
                async with await RawClient.connect(host, port) as client:
                    partitions = await client.inspect_bulk()
            if all(p.get("backlog", 0) == 0 for p in partitions.values()):
                return True
        except (EventqError, OSError, EOFError, TimeoutError):
            pass
        await asyncio.sleep(0.5)
    return False


class _ReadBackProgress:
    """The read-back gives up once no definite answer came for ``give_up_after_s``."""

    def __init__(self, give_up_after_s: float) -> None:
        self.give_up_after_s = give_up_after_s
        self.last_answer = time.monotonic()

    def answered(self) -> None:
        self.last_answer = time.monotonic()

    def gave_up(self) -> bool:
        return time.monotonic() - self.last_answer > self.give_up_after_s


class _AskAgain(Exception):
    """No definite answer this time (a server error, a lost connection)."""


async def _read_one(client: LoadClient, job_id: str, clock: Clock,
                    op_timeout_s: float) -> ReadBack:
    at_s = clock.now()
    try:
        async with asyncio.timeout(op_timeout_s):
            fields = await client.inspect_job(job_id)
    except NotFound:
        return ReadBack(job_id, NOT_FOUND, at_s)
    except (ClientError, Timeout) as error:  # never for a valid id: say so, not guess
        return ReadBack(job_id, UNKNOWN, at_s, fields=(("error", error.reply),))
    pairs = tuple(fields.items())
    if int(fields["state"]) not in (1, 2):
        return ReadBack(job_id, FOUND, at_s, pairs)
    try:
        async with asyncio.timeout(op_timeout_s):
            result = await client.result(job_id, 0)
    except NotFound:  # gone between the two reads (TTL): the fields still stand
        return ReadBack(job_id, FOUND, at_s, pairs)
    return ReadBack(job_id, FOUND, at_s, pairs, result.success, result.result)


async def _read_back_worker(session: Session, ids: list[str], found: dict[str, ReadBack],
                            progress: _ReadBackProgress, clock: Clock,
                            op_timeout_s: float) -> None:
    while ids:
        job_id = ids.pop()
        while job_id not in found:
            if progress.gave_up():
                found[job_id] = ReadBack(job_id, UNKNOWN, clock.now())
                break
            client = await session.connected()
            if client is None:
                await asyncio.sleep(RECONNECT_PAUSE_S)
                continue
            try:
                found[job_id] = await _read_one(client, job_id, clock, op_timeout_s)
                progress.answered()
            except ServerError as error:
                if _is_out_of_step(error):
                    session.drop()
                await asyncio.sleep(RECONNECT_PAUSE_S)  # recovering or moving: ask again
            except Exception:  # connection lost, timeout, garbled: reconnect, ask again
                session.drop()
                await asyncio.sleep(RECONNECT_PAUSE_S)


async def read_back(port: int, job_ids: Iterable[str], give_up_after_s: float = 60.0, *,
                    clock: Clock | None = None, host: str = "127.0.0.1",
                    connections: int = 8, op_timeout_s: float = 10.0,
                    ) -> dict[str, ReadBack]:
    """For every job id, ``inspect job`` (and ``result <id> 0`` when it is COMPLETED or
    FAILED) through one port, asking again on -SERVER-ERROR or a lost connection. Gives
    up (``unknown`` for the jobs left) once no definite answer came for
    ``give_up_after_s``, so a dead cluster costs that long once, not per job. Use the
    run's clock so ``at_s`` compares with the ops' times."""
    clock = clock or Clock()
    wanted = list(dict.fromkeys(job_ids))
    ids = wanted[::-1]  # pop() from the end: asked in order
    found: dict[str, ReadBack] = {}
    progress = _ReadBackProgress(give_up_after_s)
    sessions = [Session(host, port, lambda: not progress.gave_up())
                for _ in range(max(1, connections))]
    try:
        await asyncio.gather(*(_read_back_worker(s, ids, found, progress, clock, op_timeout_s)
                               for s in sessions))
    finally:
        for session in sessions:
            session.drop()
    return {job_id: found[job_id] for job_id in wanted}


__all__ = [
    "BulkTarget", "LoadConfig", "LoadClient", "Session", "Actor", "Producer", "Worker",
    "Reader", "SharedIds", "build_actors", "run_load", "created_job_ids", "bulk_record",
    "deliver", "schedule_time", "wait_bulk_admitted", "read_back",
]
