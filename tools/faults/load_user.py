"""The parts of the fault campaign's load that use what users of eventq use beyond
workq's commands, and the final drain.

An **operator** (per process) does, besides the producers' adds:

- workflows: two upstreams and two dependents on the workflow queue (``mid`` after both
  upstreams, ``last`` after ``mid``: docs/workflows.md, "Dependencies"); mostly the
  upstreams first, and the dependents only once every upstream's add was acknowledged;
  sometimes (``DEPENDENTS_FIRST_SHARE``) the dependents first, which is allowed. A
  dependent's payload starts with ``DEPENDENT_MARK``, so the worker that leases it asks
  its ``inputs``;
- pause and resume of its process's pausable queue, and adds into it;
- ``retry`` (sometimes with ``-delay``) of a job a worker failed for good, and
  ``retry-group`` of the group workers fail into (docs/protocol.md, "Failure groups and
  retry");
- one recurrence (every 2, 3 or 5 s) on the recurring queue, from the start of the load,
  removed with ``unrecur`` when the load ends (docs/workflows.md, "Recurring jobs").

When the load ends, an operator resumes its queue and removes its recurrence, trying
until they are acknowledged (or the recurrence is unknown) for ``CLEANUP_S``.

The **final drain** (``final_drain``), after the faults are healed: it resumes every
pausable queue and removes every recurrence of the run again (either may have been left
by an operator that could not reach its process), then drain workers on every process
lease every queue of the load and complete what they get at once, until every lease has
answered -TIMEOUT for ``quiet_s`` (longer than the largest TTR + backoff + schedule
horizon of the load, so any job still unfinished has come back and been leased), or
``DRAIN_MAX_S`` passed. The drain is recorded as one op of kind ``drain``
(workload_rules.py, "liveness").
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from .history import FAIL, INFO, OK, Args, Op, Recorder, Reply
from .load_base import (
    DEPENDENT_MARK,
    RECONNECT_PAUSE_S,
    RETRY_GROUP,
    Actor,
    Call,
    LoadConfig,
    Session,
    SharedIds,
    call_ok,
    flags,
    inputs_call,
    lease_call,
)

WORKFLOW_TTR_MS = 2000
WORKFLOW_TTL_MS = 3_600_000
DEPENDENTS_FIRST_SHARE = 0.25
PAUSABLE_TTR_MS = 1500
RECUR_EVERIES_MS = (2000, 3000, 5000)
RECUR_TTR_MS = 1500
RECUR_TTL_MS = 600_000
RETRY_DELAY_MAX_MS = 2000
RETRY_GROUP_COUNT = 5
CLEANUP_S = 60.0
CLEANUP_PAUSE_S = 0.5
DRAIN_LEASE_WAIT_MS = 500
DRAIN_SLACK_S = 5.0
DRAIN_MAX_S = 300.0
DRAIN_CLIENTS = 10_000  # drain clients' indexes start here (apart from the load's)


def drain_quiet_s(max_ttr_ms: int, backoff_bound_ms: int, schedule_ahead_s: float) -> float:
    """How long every queue must stay empty before the drain ends: a job leased and
    left just before the drain comes back after its TTR, then waits out its backoff; a
    job scheduled at the load's end comes due within the schedule horizon; a retried
    job within its delay."""
    return ((max_ttr_ms + backoff_bound_ms + RETRY_DELAY_MAX_MS) / 1000 + schedule_ahead_s
            + DRAIN_SLACK_S)


def _refused_as_unknown(op: Op | None) -> bool:
    return op is not None and (op.reply.error or "").startswith("-NOT-FOUND")


async def until_done(actor: Actor, kind: str, args: Args, call: Call) -> Op | None:
    """The request again and again (while the actor keeps trying) until it is
    acknowledged, or refused as unknown (an unrecur of a removed recurrence). Each
    attempt after the first goes to the next process, as a user's retry through a load
    balancer would: the actor's own process may be down at the load's end."""
    op = None
    attempts = 0
    while actor.keep_trying():
        if op is not None:
            args = replace(args, retry_of=op.index)
        process = (actor.process + attempts) % len(actor.config.ports)
        attempts += 1
        op = await actor.perform(kind, None, args, call, 0, process) or op
        if op.outcome == OK or _refused_as_unknown(op):
            return op
        await asyncio.sleep(CLEANUP_PAUSE_S)
    return op


def resume_call(queue: str) -> Call:
    return lambda c: call_ok(c.simple("resume", queue))


def unrecur_call(name: str) -> Call:
    return lambda c: call_ok(c.simple("unrecur", name))


class Operator(Actor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pausable = self.config.pausable_queues()[self.process]
        self.paused = False
        self.recurrence = f"load-{self.config.seed}-{self.index}"
        self.every_ms = self.rng.choice(RECUR_EVERIES_MS)

    async def run_loop(self) -> None:
        await self.recur()
        while self.running():
            await self.step()
            await asyncio.sleep(self.config.operator_pause_s)
        await self.clean_up()

    async def step(self) -> None:
        r = self.rng.random()
        if r < 0.35:
            await self.workflow()
        elif r < 0.55:
            await self.toggle_pause()
        elif r < 0.70:
            await self.add(self.new_job_id(), self.pausable, PAUSABLE_TTR_MS, ())
        elif r < 0.85:
            await self.retry()
        else:
            await self.retry_group()

    async def add(self, job_id: str, queue: str, ttr_ms: int, after: tuple[str, ...]) -> bool:
        """True when the job surely exists: acknowledged, or a repeated add refused as
        ``Duplicate job`` (the id is fresh: the first attempt landed)."""
        payload = (DEPENDENT_MARK if after else b"") + self.unique("payload")
        args = Args(queues=(queue,), ttr_ms=ttr_ms, ttl_ms=WORKFLOW_TTL_MS, payload=payload,
                    after=after)
        self.shared.add([job_id])
        op = await self.perform_retrying("add", job_id, args, lambda c: call_ok(c.add_job(
            job_id, queue, ttr_ms, WORKFLOW_TTL_MS, payload, None, None, None, after)), 0)
        if op is None:
            return False
        return op.outcome == OK or (op.args.retry_of is not None
                                    and "Duplicate job" in (op.reply.error or ""))

    async def workflow(self) -> None:
        queue = self.config.workflow_queue
        upstreams = (self.new_job_id(), self.new_job_id())
        mid, last = self.new_job_id(), self.new_job_id()
        dependents = ((mid, upstreams), (last, (mid,)))
        if self.rng.random() < DEPENDENTS_FIRST_SHARE:
            for job_id, after in dependents:
                await self.add(job_id, queue, WORKFLOW_TTR_MS, after)
            for job_id in upstreams:
                await self.add(job_id, queue, WORKFLOW_TTR_MS, ())
            return
        landed = [await self.add(job_id, queue, WORKFLOW_TTR_MS, ()) for job_id in upstreams]
        if all(landed):  # else the dependents would wait for their TTL
            for job_id, after in dependents:
                await self.add(job_id, queue, WORKFLOW_TTR_MS, after)

    async def toggle_pause(self) -> None:
        kind = "resume" if self.paused else "pause"
        queue = self.pausable
        op = await self.perform_retrying(kind, None, Args(queues=(queue,)),
                                         lambda c: call_ok(c.simple(kind, queue)), 0)
        if kind == "pause":
            self.paused = True  # whatever came back: resume it later in any case
        elif op is not None and op.outcome == OK:
            self.paused = False

    async def retry(self) -> None:
        if not self.shared.failed:
            return
        job_id = self.shared.failed.pop(self.rng.randrange(len(self.shared.failed)))
        delay = self.rng.randint(0, RETRY_DELAY_MAX_MS) if self.rng.random() < 0.5 else None
        await self.perform_retrying(
            "retry", job_id, Args(delay_ms=delay),
            lambda c: call_ok(c.simple("retry", job_id, *flags(delay=delay))), 0)

    async def retry_group(self) -> None:
        async def call(client) -> Reply:
            retried = await client.retry_group(RETRY_GROUP, RETRY_GROUP_COUNT)
            return Reply(fields=(("retried", str(retried).encode()),))

        await self.perform_retrying("retry-group", None,
                                    Args(group=RETRY_GROUP, count=RETRY_GROUP_COUNT), call, 0)

    async def recur(self) -> None:
        queue, name, every = self.config.recurring_queue, self.recurrence, self.every_ms
        payload = self.unique("recurring")
        args = Args(queues=(queue,), name=name, every_ms=every, ttr_ms=RECUR_TTR_MS,
                    ttl_ms=RECUR_TTL_MS, payload=payload, wall_s=time.time())
        await self.perform_retrying("recur", None, args, lambda c: call_ok(c.recur(
            name, queue, RECUR_TTR_MS, RECUR_TTL_MS, every, payload)), 0)

    async def clean_up(self) -> None:
        self.until_s = self.clock.now() + CLEANUP_S
        await until_done(self, "resume", Args(queues=(self.pausable,)),
                         resume_call(self.pausable))
        await until_done(self, "unrecur", Args(name=self.recurrence, wall_s=time.time()),
                         unrecur_call(self.recurrence))


# --- the final drain ------------------------------------------------------------------


@dataclass
class DrainState:
    busy_s: float  # when a lease last got a job or no definite answer


class DrainWorker(Actor):
    async def drain(self, state: DrainState, quiet_s: float) -> None:
        names = list(self.config.all_queues())
        while self.running() and self.clock.now() - state.busy_s < quiet_s:
            op = await self.perform("lease", None, Args(queues=tuple(names),
                                                        wait_ms=DRAIN_LEASE_WAIT_MS),
                                    lease_call(names, DRAIN_LEASE_WAIT_MS),
                                    DRAIN_LEASE_WAIT_MS / 1000)
            timed_out = op is not None and op.outcome == FAIL and (
                op.reply.error or "").startswith("-TIMEOUT")
            if not timed_out:
                state.busy_s = self.clock.now()
            if op is None or op.outcome == INFO:
                await asyncio.sleep(RECONNECT_PAUSE_S)
            elif op.outcome == OK:
                await self.finish(op.reply)

    async def finish(self, job: Reply) -> None:
        job_id = job.job_id
        assert job_id is not None
        if (job.payload or b"").startswith(DEPENDENT_MARK):
            await self.perform("inputs", job_id, Args(), inputs_call(job_id), 0)
        result = self.unique("drained")
        await self.perform_retrying("complete", job_id, Args(result=result),
                                    lambda c: call_ok(c.complete(job_id, result)), 0)


async def undo_pauses_and_recurrences(actor: Actor, recorder: Recorder) -> None:
    names = sorted({op.args.name for op in recorder.ops if op.kind == "recur" and op.args.name})
    for queue in actor.config.pausable_queues():
        await until_done(actor, "resume", Args(queues=(queue,)), resume_call(queue))
    for name in names:
        await until_done(actor, "unrecur", Args(name=name, wall_s=time.time()),
                         unrecur_call(name))


async def final_drain(config: LoadConfig, recorder: Recorder, quiet_s: float,
                      max_s: float = DRAIN_MAX_S) -> list[Op]:
    """Drain every queue of the load (see the module docstring); every op of the run,
    by index, the drain's own included."""
    shared = SharedIds()
    start_s = recorder.clock.now()
    actors = [DrainWorker(DRAIN_CLIENTS + n * len(config.ports) + process, process,
                          Session(config.host, port, lambda: False), recorder, config, shared,
                          start_s + max_s)
              for process, port in enumerate(config.ports)
              for n in range(max(1, config.drain_workers_per_process))]
    try:
        await undo_pauses_and_recurrences(actors[0], recorder)
        index, invoke_s = recorder.begin()
        wall_s = time.time()
        state = DrainState(invoke_s)
        await asyncio.gather(*(actor.drain(state, quiet_s) for actor in actors))
    finally:
        for actor in actors:
            actor.drop_all()
    now = recorder.clock.now()
    quiet = now - state.busy_s >= quiet_s
    recorder.record(Op(index, DRAIN_CLIENTS - 1, 0, "drain", None,
                       Args(wait_ms=int(quiet_s * 1000), wall_s=wall_s), invoke_s, now,
                       OK if quiet else FAIL,
                       Reply() if quiet else Reply(error=f"not quiet within {max_s:g}s")))
    return recorder.ops


__all__ = [
    "Operator", "DrainWorker", "drain_quiet_s", "final_drain", "until_done",
    "undo_pauses_and_recurrences",
]
