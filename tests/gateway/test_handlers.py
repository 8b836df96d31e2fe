"""A lease the gateway gives up on is given back, naming its claim (ARCHITECTURE.md,
"Abandoned commands"; docs/fencing.md).

The give-back (release-attempt) carries the log position of the start-attempt it undoes,
and is applied only while the job is exactly as that claim left it (core.ReleaseAttempt):
another client's claim of the same attempt number, by this process or by the process
that took the partition over, is never taken back by it, whenever it is written. It is
written once Kafka has taken the claim (only then is its position known, and only then
is there anything to undo)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from eventq import core
from eventq.core import State
from eventq.errors import MayTakeEffect, NotWritten
from eventq.gateway.handlers import Gateway
from eventq.indexes import JobIndex
from eventq.offers import Offers
from jobs import NOW, job

CLAIM_AT = 7 << 16  # the claim's position in the log: record 7, first in it


class Engine:
    """The engine's surface the lease path uses: every command it is handed, in order."""

    def __init__(self, index: JobIndex, fail_with: BaseException) -> None:
        self.index = index
        self.waiters = None
        self.claimed: set[uuid.UUID] = set()
        self.offers = Offers()
        self.lane: list[object] = []
        self._fail_with = fail_with

    async def wait_ready(self) -> None:
        return None

    async def submit(self, command, on_abandoned=None):
        self.lane.append(command)
        await asyncio.sleep(0)
        if not isinstance(self._fail_with, NotWritten):  # as streams/engine.py does
            on_abandoned(CLAIM_AT)  # Kafka took it: at this position
        raise self._fail_with

    def append(self, command):
        self.lane.append(command)

        async def in_log() -> None:
            return None

        return in_log()


class Stats:
    released = 0


@pytest.mark.parametrize(
    "failure", [MayTakeEffect("not applied in time"), asyncio.CancelledError()],
    ids=["deadline", "client-gone"],
)
def test_a_claim_given_up_is_given_back_by_its_position(failure):
    index = JobIndex()
    pending = job(state=State.PENDING, attempts=2)
    index.put(pending, 0, NOW)
    engine = Engine(index, failure)
    gateway = Gateway(engine, Stats(), clock_ms=lambda: NOW)

    async def claim() -> None:
        with pytest.raises(type(failure)):
            await gateway.claim_one(("q",))
        await asyncio.sleep(0)  # the background wait for the release's write

    asyncio.run(claim())
    assert engine.lane == [
        core.StartAttempt(pending.id, 3),
        core.ReleaseAttempt(pending.id, 3, State.PENDING, claim=CLAIM_AT),
    ]
    assert engine.claimed == set()  # and the job may be claimed again
    assert gateway.stats.released == 1


def test_a_claim_never_written_is_not_released():
    index = JobIndex()
    ready = job()
    index.put(ready, 0, NOW)
    engine = Engine(index, NotWritten("Kafka did not take it"))
    gateway = Gateway(engine, Stats(), clock_ms=lambda: NOW)

    async def claim() -> None:
        with pytest.raises(NotWritten):
            await gateway.claim_one(("q",))

    asyncio.run(claim())
    assert engine.lane == [core.StartAttempt(ready.id, 1)]
    assert gateway.stats.released == 0


# --- the real engine: which endings of a submit are abandoned commands -------------


class HeldProducer:
    """Takes each write and holds it until the test releases it (Kafka's round trip)."""

    def __init__(self) -> None:
        self.sent = 0
        self.gate: asyncio.Future | None = None

    async def send_and_wait(self, topic, *, value, key, partition):
        self.sent += 1
        self.gate = asyncio.get_running_loop().create_future()
        await self.gate
        return SimpleNamespace(offset=self.sent - 1)


def real_engine(write_timeout_ms: int):
    from eventq.waiters import Waiters
    from streams.command_writer import CommandWriter
    from streams.engine import Engine

    engine = Engine(commands_topic="t", partitions=1, write_timeout_ms=write_timeout_ms,
                    index=JobIndex(), store=None, waiters=Waiters(), node="n")
    engine.ready.set()
    producer = HeldProducer()
    engine.writer = CommandWriter(lambda: producer, "t", partitions=1)
    return engine, producer


def test_submit_abandons_a_command_sent_but_not_acknowledged_by_its_deadline():
    """Once Kafka takes it (late), with its position."""
    async def main() -> list[int]:
        engine, producer = real_engine(write_timeout_ms=50)
        abandoned: list[int] = []
        with pytest.raises(MayTakeEffect, match="may still take effect"):
            await engine.submit(core.Delete(uuid.uuid4()), abandoned.append)
        assert producer.sent == 1 and abandoned == []  # not acknowledged yet
        producer.gate.set_result(None)
        await asyncio.sleep(0.01)
        return abandoned

    assert asyncio.run(main()) == [0]  # record 0, first in it


def test_submit_does_not_abandon_a_command_withdrawn_before_it_left():
    async def main() -> list[str]:
        engine, producer = real_engine(write_timeout_ms=50)
        abandoned: list[str] = []
        first = asyncio.ensure_future(engine.submit(core.Delete(uuid.uuid4())))
        await asyncio.sleep(0.01)  # the first is on its way: the lane is busy
        with pytest.raises(NotWritten, match="retrying is safe"):
            await engine.submit(core.Delete(uuid.uuid4()), abandoned.append)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert producer.sent == 1  # the second never left
        return abandoned

    assert asyncio.run(main()) == []


@pytest.mark.parametrize("sent", [True, False], ids=["on-its-way", "still-queued"])
def test_a_cancelled_submit_abandons_only_what_may_be_in_the_log(sent):
    async def main() -> list[str]:
        engine, producer = real_engine(write_timeout_ms=5000)
        abandoned: list[str] = []
        if not sent:  # a first command keeps the lane busy
            blocker = asyncio.ensure_future(engine.submit(core.Delete(uuid.uuid4())))
            await asyncio.sleep(0.01)
        task = asyncio.ensure_future(
            engine.submit(core.Delete(uuid.uuid4()), abandoned.append))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert producer.sent == 1
        if sent:
            producer.gate.set_result(None)  # Kafka takes it
            await asyncio.sleep(0.01)
        else:
            blocker.cancel()
            await asyncio.gather(blocker, return_exceptions=True)
        return abandoned

    assert asyncio.run(main()) == ([0] if sent else [])


def test_a_command_awaited_in_a_partition_that_left_is_abandoned_at_once():
    """A rebalance takes the partition (streams/ownership.py revoked -> Engine.let_go):
    its new owner applies the claim, never this process, so the lease hears at once
    that it may take effect and gives the claim back right behind it in the log, before
    the claim's TTR could count the attempt (the paused-owner test's seed: a give-back
    5 s late, after the new owner had timed the attempt out)."""
    async def main() -> tuple[list[int], float]:
        engine, producer = real_engine(write_timeout_ms=5000)
        abandoned: list[int] = []
        claim = core.StartAttempt(uuid.uuid4(), 1)
        task = asyncio.ensure_future(engine.submit(claim, abandoned.append))
        await asyncio.sleep(0.01)
        producer.gate.set_result(None)  # Kafka takes it: record 0
        await asyncio.sleep(0.01)
        offered = core.ReleaseAttempt(uuid.uuid4(), 1, State.NEW, claim=0)
        engine.offers.open(offered, engine.partition_of(claim))  # for a peer, say
        started = asyncio.get_running_loop().time()
        engine.let_go({engine.partition_of(claim)})
        with pytest.raises(MayTakeEffect, match="lost the job's partition"):
            await task
        took_s = asyncio.get_running_loop().time() - started
        await asyncio.sleep(0.01)
        assert producer.sent == 2 and len(engine.offers) == 0  # the offer given back
        return abandoned, took_s

    abandoned, took_s = asyncio.run(main())
    assert abandoned == [0]
    assert took_s < 1.0  # not the 5 s write deadline


def test_a_partition_that_left_lets_go_only_its_own_waiters():
    from eventq.waiters import Waiters

    async def main() -> list[bool]:
        waiters = Waiters()
        lost, kept = waiters.expect(1, partition=0), waiters.expect(2, partition=1)
        assert waiters.let_go({0}, lambda: MayTakeEffect("moved")) == 1
        return [lost.done() and isinstance(lost.exception(), MayTakeEffect), kept.done()]

    assert asyncio.run(main()) == [True, False]
