"""Which endings of a submit are abandoned commands (streams/engine.py): a command that
may be in the log (sent and not acknowledged by its deadline, cancelled on its way, or
awaited in a partition that left) is handed to ``on_abandoned`` with its log position
once Kafka has taken it, so the lease path can give the claim back by that position
(tests/gateway/test_leasing.py); one that never left is not."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from eventq import core
from eventq.core import State
from eventq.errors import MayTakeEffect, NotWritten, ServerError
from eventq.state.indexes import JobIndex


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
    from eventq.state.waiters import Waiters
    from streams.command_writer import CommandWriter
    from streams.engine import Engine
    from streams.store import JobStore

    engine = Engine(commands_topic="t", partitions=1, write_timeout_ms=write_timeout_ms,
                    index=JobIndex(), store=JobStore(None, partitions=1), waiters=Waiters(),
                    node="n")
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


# Far from anything the tests wait for: a submit that waited for it would fail them (by
# the bounds below) instead of passing late.
FAR_WRITE_TIMEOUT_MS = 60_000
FAR_GUARD_S = 30.0


def test_a_command_awaited_in_a_partition_that_left_is_abandoned_at_once():
    """A rebalance takes the partition (streams/faust/ownership.py revoked -> Engine.let_go):
    its new owner applies the claim, never this process, so the lease hears at once
    that it may take effect and gives the claim back right behind it in the log, before
    the claim's TTR could count the attempt (the paused-owner test's seed: a give-back
    5 s late, after the new owner had timed the attempt out)."""
    async def main() -> tuple[list[int], float]:
        engine, producer = real_engine(write_timeout_ms=FAR_WRITE_TIMEOUT_MS)
        abandoned: list[int] = []
        claim = core.StartAttempt(uuid.uuid4(), 1)
        task = asyncio.ensure_future(engine.submit(claim, abandoned.append))
        await asyncio.sleep(0.01)
        producer.gate.set_result(None)  # Kafka takes it: record 0
        await asyncio.sleep(0.01)
        offered = core.ReleaseAttempt(uuid.uuid4(), 1, State.NEW, claim=0)
        engine.offers.open(offered)  # for a peer, say
        started = asyncio.get_running_loop().time()
        engine.let_go({engine.store.partition_of(claim.job_id)})
        with pytest.raises(MayTakeEffect, match="lost the job's partition"):
            await task
        took_s = asyncio.get_running_loop().time() - started
        await asyncio.sleep(0.01)
        assert producer.sent == 2 and len(engine.offers) == 0  # the offer given back
        return abandoned, took_s

    abandoned, took_s = asyncio.run(main())
    assert abandoned == [0]
    assert took_s < FAR_WRITE_TIMEOUT_MS / 1000 / 2  # at the let-go, not the write deadline


def test_a_command_in_the_log_but_not_applied_by_its_deadline_may_take_effect():
    """One timer for every submit (streams/deadlines.py) ends each at its own deadline,
    as ``asyncio.timeout`` did: not before it (how soon after is the timer's speed, not
    asserted)."""
    async def main() -> tuple[list[int], float]:
        engine, producer = real_engine(write_timeout_ms=200)
        abandoned: list[int] = []
        loop = asyncio.get_running_loop()
        started = loop.time()
        task = asyncio.ensure_future(engine.submit(core.Delete(uuid.uuid4()), abandoned.append))
        await asyncio.sleep(0.01)
        producer.gate.set_result(None)  # Kafka takes it; nothing applies it
        with pytest.raises(MayTakeEffect, match="in the log but was not applied within 0.2s"):
            await task
        return abandoned, loop.time() - started

    abandoned, took_s = asyncio.run(main())
    assert abandoned == [0]
    assert took_s >= 0.2  # the deadline, not before


def test_a_submit_applied_in_time_is_answered_and_later_deadlines_still_fall_due():
    """After an answer, the one timer still ends each later submit at its deadline, not
    before: each raises ServerError itself (the far guard's TimeoutError would say the
    deadline never fell due)."""
    async def main() -> tuple[object, list[float]]:
        engine, producer = real_engine(write_timeout_ms=300)
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(engine.submit(core.Delete(uuid.uuid4())))
        await asyncio.sleep(0.01)
        producer.gate.set_result(None)
        await asyncio.sleep(0.01)
        engine.waiters.on_applied(1, "applied")  # request 1: the first submit's
        answered = await first
        later_started = loop.time()
        ends: list[float] = []
        for _ in range(2):
            with pytest.raises(ServerError):  # never acknowledged, or never sent
                await asyncio.wait_for(engine.submit(core.Delete(uuid.uuid4())), FAR_GUARD_S)
            ends.append(loop.time() - later_started)
        return answered, ends

    answered, ends = asyncio.run(main())
    assert answered == "applied"
    assert ends[0] >= 0.3 and ends[1] - ends[0] >= 0.3  # each its whole deadline


def test_a_command_awaited_once_the_partitions_may_be_lost_is_answered_at_the_next_check():
    """Every ``HOLD_CHECK_S`` after Kafka took it, the submit asks whether this process
    still holds its partitions (streams/faust/lease.py)."""
    from streams.engine import HOLD_CHECK_S

    async def main() -> tuple[list[int], float, list[bool]]:
        engine, producer = real_engine(write_timeout_ms=FAR_WRITE_TIMEOUT_MS)
        held = [True]
        asked: list[bool] = []

        def holds() -> bool:
            asked.append(held[0])
            return held[0]

        engine.holds = holds
        abandoned: list[int] = []
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(engine.submit(core.Delete(uuid.uuid4()), abandoned.append))
        await asyncio.sleep(0.01)
        producer.gate.set_result(None)
        await asyncio.sleep(0.01)
        taken = loop.time()
        # One check passed (still held): its timer was due before this sleep's, and the
        # loop runs due timers in order, however late it runs them.
        await asyncio.sleep(HOLD_CHECK_S * 1.5)
        assert not task.done() and asked == [True, True]  # the submit's own, one check
        held[0] = False
        with pytest.raises(MayTakeEffect, match="may have lost the job's partition"):
            await task
        return abandoned, loop.time() - taken, asked

    abandoned, took_s, asked = asyncio.run(main())
    assert abandoned == [0]
    assert asked == [True, True, False]  # answered at the second check, the first "no"
    assert took_s >= 1.9 * HOLD_CHECK_S  # not before it
