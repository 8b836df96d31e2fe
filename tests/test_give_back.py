"""A lease the gateway gives up on is given back before anyone can claim that attempt
again (issue 15; ARCHITECTURE.md, "Abandoned commands").

The give-back (release-attempt) must be queued in the job's partition lane at once,
while the job is still in ``engine.claimed``: were it queued later, another client's
claim of the same attempt number could be written before it, and the release would
then take that client's lease away."""

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
from test_indexes import NOW, job


class Engine:
    """The engine's surface the lease path uses: every command it is handed, in the
    order they would reach the partition's lane."""

    def __init__(self, index: JobIndex, fail_with: BaseException) -> None:
        self.index = index
        self.waiters = None
        self.claimed: set[uuid.UUID] = set()
        self.lane: list[tuple[object, bool]] = []  # (command, job claimed when queued)
        self._fail_with = fail_with
        self.revocations = 0
        self.revoke_while_claiming = False

    async def wait_ready(self) -> None:
        return None

    async def submit(self, command, on_abandoned=None):
        self.lane.append((command, command.job_id in self.claimed))
        await asyncio.sleep(0)
        if self.revoke_while_claiming:
            self.revocations += 1  # a rebalance took partitions meanwhile
        if not isinstance(self._fail_with, NotWritten):  # as streams/engine.py does
            on_abandoned()
        raise self._fail_with

    def append(self, command):
        self.lane.append((command, command.job_id in self.claimed))

        async def in_log() -> None:
            return None

        return in_log()


class Stats:
    released = 0


@pytest.mark.parametrize(
    "failure", [MayTakeEffect("not applied in time"), asyncio.CancelledError()],
    ids=["deadline", "client-gone"],
)
def test_a_claim_given_up_is_released_while_the_job_is_still_claimed(failure):
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
        (core.StartAttempt(pending.id, 3), True),
        (core.ReleaseAttempt(pending.id, 3, State.PENDING), True),  # queued while claimed
    ]
    assert engine.claimed == set()  # and the job may be claimed again after it
    assert gateway.stats.released == 1


def test_a_claim_abandoned_across_a_rebalance_is_not_released():
    """Partitions left this process while its claim was out (issue 11): another owner
    may have claimed the same attempt first and handed it to its client, which a
    release would take back. The TTR times out a claim of ours that took effect."""
    index = JobIndex()
    pending = job(state=State.PENDING, attempts=2)
    index.put(pending, 0, NOW)
    engine = Engine(index, MayTakeEffect("not applied in time"))
    engine.revoke_while_claiming = True
    gateway = Gateway(engine, Stats(), clock_ms=lambda: NOW)

    async def claim() -> None:
        with pytest.raises(MayTakeEffect):
            await gateway.claim_one(("q",))
        await asyncio.sleep(0)

    asyncio.run(claim())
    assert engine.lane == [(core.StartAttempt(pending.id, 3), True)]
    assert gateway.stats.released == 0


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
    assert engine.lane == [(core.StartAttempt(ready.id, 1), True)]
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
    from eventq.gateway.waiters import Waiters
    from streams.command_writer import CommandWriter
    from streams.engine import Engine

    engine = Engine(commands_topic="t", partitions=1, write_timeout_ms=write_timeout_ms,
                    index=JobIndex(), store=None, waiters=Waiters(), node="n")
    engine.ready.set()
    producer = HeldProducer()
    engine.writer = CommandWriter(lambda: producer, "t", partitions=1)
    return engine, producer


def test_submit_abandons_a_command_sent_but_not_acknowledged_by_its_deadline():
    async def main() -> list[str]:
        engine, producer = real_engine(write_timeout_ms=50)
        abandoned: list[str] = []
        with pytest.raises(MayTakeEffect, match="may still take effect"):
            await engine.submit(core.Delete(uuid.uuid4()), lambda: abandoned.append("x"))
        assert producer.sent == 1
        return abandoned

    assert asyncio.run(main()) == ["x"]


def test_submit_does_not_abandon_a_command_withdrawn_before_it_left():
    async def main() -> list[str]:
        engine, producer = real_engine(write_timeout_ms=50)
        abandoned: list[str] = []
        first = asyncio.ensure_future(engine.submit(core.Delete(uuid.uuid4())))
        await asyncio.sleep(0.01)  # the first is on its way: the lane is busy
        with pytest.raises(NotWritten, match="retrying is safe"):
            await engine.submit(core.Delete(uuid.uuid4()), lambda: abandoned.append("x"))
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
            engine.submit(core.Delete(uuid.uuid4()), lambda: abandoned.append("x")))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert producer.sent == 1
        if not sent:
            blocker.cancel()
            await asyncio.gather(blocker, return_exceptions=True)
        return abandoned

    assert asyncio.run(main()) == (["x"] if sent else [])
