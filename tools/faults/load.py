"""The fault campaign's load: asyncio clients on every eventq process that drive a mixed
load, as users drive one, for a while and record every operation in a history
(history.py); then (load_user.py) a final drain, and (readback.py) the read-back that
asks what became of every job.

Each client has its own ``random.Random(f"{seed}:{client}")``, so a seed replays the
same choices (job ids, queues, payloads, what to do next); what the server answers, and
so which job ids a reader or a delete can pick from, depends on timing.

Roles (per process, counts configurable):

- producers: add 60%, schedule 15%, run 5% (wait-timeout 2000 ms, TTR 1500 ms,
  ``-priority=10`` so a backlog does not time it out), bulk 10% (20 adds as one batch
  record written straight to the bulk topic with confluent_kafka; ok = Kafka's delivery
  ack), delete 10% (of a job this producer created earlier; an add when it has none).
  Four queues, TTR 1500 or 8000 ms, TTL 1 h or (``SHORT_TTL_SHARE``) 5-30 s, priorities
  -5 to 10, some jobs ``-max-fails=3 -backoff=200``; a schedule is due 0-15 s ahead
  (inside the run's drain) or (``FAR_SCHEDULE_SHARE``) 10-15 min ahead, past it. Every
  payload is unique (``payload c<client> n<seq>``). Without a ``BulkTarget`` a bulk
  turn is an add.
- workers: lease 1-4 of every queue of the load (wait-timeout 500 ms), ask a dependent's
  ``inputs``, maybe touch, work 0-50 ms or (``SLOW_SHARE``, short TTRs) past the job's
  TTR, then complete 60% / fail 25% (some with ``-group=``, ``RETRY_GROUP``) / neither
  15% (the TTR passes); every result is unique.
- readers: ``result <id> <0-300>`` or ``inspect job <id>`` of a random known job.
- operators (load_user.py): workflows, pause and resume, retry and retry-group,
  recurrences.

A client has a home process; a request it repeats after an indeterminate reply may go
to another (load_base.py says how ops are recorded and repeated).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import random
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Producer as KafkaProducer

from eventq.core import Add, encode_command
from eventq.core.batch import encode_batch
from eventq.core.partitioner import CONFLUENT_PRODUCER_PARTITIONER, partition_for_key

from .history import INFO, OK, Args, BulkJob, Op, Recorder, Reply, classify, error_line
from .load_base import (
    DEPENDENT_MARK,
    RECONNECT_PAUSE_S,
    RETRY_GROUP,
    Actor,
    BulkTarget,
    LoadClient,
    LoadConfig,
    Session,
    SharedIds,
    call_ok,
    inputs_call,
    lease_call,
)
from .load_user import Operator, drain_quiet_s, final_drain
from .readback import read_back, wait_bulk_admitted

TTL_MS = 3_600_000
SHORT_TTL_SHARE = 0.15
SHORT_TTLS_S = (5, 30)
TTRS_MS = (1500, 8000)
PRIORITIES = (0, 0, 0, -5, 5, 10)
RUN_TTR_MS = 1500  # a run waits for a leased attempt's TTR: keep producers moving
RUN_WAIT_MS = 2000
RUN_PRIORITY = 10  # ahead of the backlog, so runs get answers (their replies are checked)
LEASE_WAIT_MS = 500
BULK_COMMANDS = 20
RETRYING_JOB_SHARE = 0.3  # jobs with -max-fails=3 -backoff=200
BACKOFF_MS = 200
NEAR_SCHEDULE_S = (0, 15)  # comes due inside the drain (load_user.drain_quiet_s)
FAR_SCHEDULE_SHARE = 0.15
FAR_SCHEDULE_S = (600, 900)  # pushed past the drain: left out of liveness
SLOW_SHARE = 0.1  # leases a worker holds past their TTR before it completes or fails
SLOW_PAST_TTR_S = (0.2, 0.8)
SLOW_TTR_MAX_MS = 2000  # only short TTRs are overrun: a worker asleep 8 s does nothing
GROUP_FAIL_SHARE = 0.4  # of fails on the plain queues: with -group=RETRY_GROUP
KAFKA_DELIVERY_TIMEOUT_S = 10.0
# longer than the largest TTR + backoff (fails and TTR returns of one job during the
# load: 5 at most in practice; the drain's own leases complete at once) + near schedule
BACKOFF_BOUND_MS = BACKOFF_MS * (2 ** 5 - 1)
DRAIN_QUIET_S = drain_quiet_s(max(TTRS_MS), BACKOFF_BOUND_MS, NEAR_SCHEDULE_S[1])


# --- producers ------------------------------------------------------------------------


def schedule_time(rng: random.Random, now: dt.datetime | None = None,
                  ahead_s: tuple[int, int] = (0, 2)) -> str:
    """``ahead_s`` ahead in whole seconds (0-3 s by default), rounded up so it is never
    in the past (a past time would make the TTL count from before the schedule was
    accepted)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    ahead = math.ceil(now.timestamp()) + rng.randint(*ahead_s)
    return dt.datetime.fromtimestamp(ahead, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    queue: str
    ttr_ms: int
    payload: bytes
    max_fails: int | None
    backoff_ms: int | None
    ttl_ms: int = TTL_MS
    priority: int | None = None

    def args(self, **more: object) -> Args:
        return Args(queues=(self.queue,), ttr_ms=self.ttr_ms, ttl_ms=self.ttl_ms,
                    payload=self.payload, max_fails=self.max_fails,
                    backoff_ms=self.backoff_ms, priority=self.priority, **more)


class Producer(Actor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mine: list[str] = []  # jobs this producer created (delete picks from them)
        self.kafka = None

    def new_job(self, job_id: str | None = None) -> JobSpec:
        retrying = self.rng.random() < RETRYING_JOB_SHARE
        short = self.rng.random() < SHORT_TTL_SHARE
        priority = self.rng.choice(PRIORITIES)
        return JobSpec(job_id or self.new_job_id(), self.rng.choice(self.config.queues),
                       self.rng.choice(TTRS_MS), self.unique("payload"),
                       3 if retrying else None, BACKOFF_MS if retrying else None,
                       self.rng.randint(*SHORT_TTLS_S) * 1000 if short else TTL_MS,
                       priority or None)

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
        self.created(job.job_id)
        await self.perform_retrying("add", job.job_id, job.args(), lambda c: call_ok(c.add_job(
            job.job_id, job.queue, job.ttr_ms, job.ttl_ms, job.payload, job.max_fails,
            job.backoff_ms, job.priority)), 0)

    async def schedule(self) -> None:
        job = self.new_job()
        far = self.rng.random() < FAR_SCHEDULE_SHARE
        at = schedule_time(self.rng, ahead_s=FAR_SCHEDULE_S if far else NEAR_SCHEDULE_S)
        self.created(job.job_id)
        await self.perform_retrying(
            "schedule", job.job_id, job.args(time=at, wall_s=time.time()),
            lambda c: call_ok(c.schedule_job(job.job_id, job.queue, job.ttr_ms, job.ttl_ms,
                                             at, job.payload, job.max_fails, job.backoff_ms,
                                             job.priority)), 0)

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
        await self.perform_retrying("delete", job_id, Args(),
                                    lambda c: call_ok(c.delete(job_id)), 0)

    # bulk: straight to Kafka ------------------------------------------------------

    def bulk_job(self, partition: int) -> BulkJob:
        """A new job whose id falls in ``partition`` (a batch record holds commands of
        one partition: the server admits it into that partition of the command log)."""
        while True:
            job_id = self.new_job_id()
            if partition_for_key(job_id.encode(), self.config.bulk.partitions) == partition:
                break
        job = self.new_job(job_id)
        return BulkJob(job.job_id, job.queue, job.ttr_ms, job.ttl_ms, job.payload,
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
            self._record(index, "bulk", None, args, invoke_s, None, self.process,
                         classify("bulk", error), Reply(error=error_line(error)))
            return
        self._record(index, "bulk", None, args, invoke_s, self.clock.now(), self.process, OK,
                     Reply())


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
        queues = self.config.all_queues()
        names = self.rng.sample(queues, self.rng.randint(1, min(4, len(queues))))
        op = await self.perform("lease", None, Args(queues=tuple(names), wait_ms=LEASE_WAIT_MS),
                                lease_call(names, LEASE_WAIT_MS), LEASE_WAIT_MS / 1000)
        if op is None:
            await asyncio.sleep(RECONNECT_PAUSE_S)
            return
        if op.outcome != OK:
            if op.outcome == INFO:
                await asyncio.sleep(RECONNECT_PAUSE_S)  # the process may be down: breathe
            return
        await self.work_on(op.reply)

    async def work_on(self, job: Reply) -> None:
        job_id = job.job_id
        assert job_id is not None
        if (job.payload or b"").startswith(DEPENDENT_MARK):
            await self.perform("inputs", job_id, Args(), inputs_call(job_id), 0)
        if self.rng.random() < 0.3:
            await self.perform("touch", job_id, Args(), lambda c: call_ok(c.touch(job_id)), 0)
        if self.rng.random() < SLOW_SHARE and (job.ttr_ms or 0) <= SLOW_TTR_MAX_MS:
            # past the TTR: the complete may be refused, or another worker may hold it
            await asyncio.sleep((job.ttr_ms or 0) / 1000 + self.rng.uniform(*SLOW_PAST_TTR_S))
        else:
            await asyncio.sleep(self.rng.uniform(0, 0.05))
        r = self.rng.random()
        if r < 0.60:
            result = self.unique("complete")
            await self.perform_retrying("complete", job_id, Args(result=result),
                                        lambda c: call_ok(c.complete(job_id, result)), 0)
        elif r < 0.85:
            await self.fail(job_id, job.name in self.config.queues)
        # else: neither; its TTR passes and another worker may lease it again

    async def fail(self, job_id: str, plain: bool) -> None:
        """A job of the plain queues fails now and then into ``RETRY_GROUP`` (an
        operator retries the group), otherwise it may be retried by its id."""
        result = self.unique("fail")
        group = RETRY_GROUP if plain and self.rng.random() < GROUP_FAIL_SHARE else None
        op = await self.perform_retrying("fail", job_id, Args(result=result, group=group),
                                         lambda c: call_ok(c.fail_job(job_id, result, group)),
                                         0)
        if op is not None and op.outcome == OK and plain and group is None:
            self.shared.failed.append(job_id)


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
             (Reader, config.readers_per_process), (Operator, config.operators_per_process))
    for process, port in enumerate(config.ports):
        for role, count in roles:
            for _ in range(count):
                # Reconnecting goes on until the actor's until_s (then nothing is sent).
                session = Session(config.host, port, lambda: False)
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
            actor.drop_all()
    return recorder.ops


async def drain(config: LoadConfig, recorder: Recorder) -> list[Op]:
    """The final drain after the faults healed (load_user.final_drain), with this load's
    quiet period; every op of the run, drain included."""
    return await final_drain(config, recorder, DRAIN_QUIET_S)


def created_job_ids(ops: Iterable[Op]) -> list[str]:
    """Every job id an op tried to create, in op order (what the read-back asks about)."""
    seen: dict[str, None] = {}
    for op in sorted(ops, key=lambda op: op.index):
        if op.kind in ("add", "schedule", "run", "bulk"):
            seen.update(dict.fromkeys(op.job_ids))
    return list(seen)


__all__ = [
    "BulkTarget", "LoadConfig", "LoadClient", "Session", "Actor", "Producer", "Worker",
    "Reader", "SharedIds", "drain", "DRAIN_QUIET_S", "build_actors", "run_load",
    "created_job_ids", "bulk_record",
    "deliver", "schedule_time", "wait_bulk_admitted", "read_back",
]
