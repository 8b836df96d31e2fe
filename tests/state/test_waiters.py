"""Lease waiters: one job becoming ready wakes one waiter, the longest waiting (waking
all of them made each add cost O(waiters): docs/architecture.md, "Hostile inputs"); a
partition that leaves fails only the waiters of its own commands."""

from __future__ import annotations

import asyncio

from eventq.errors import MayTakeEffect
from eventq.state.waiters import Waiters


def test_one_ready_job_wakes_exactly_the_longest_waiting_lease():
    async def scenario():
        waiters = Waiters()
        order = []

        async def lease(n: int, names) -> None:
            if await waiters.wait_ready(names, 5, lambda: False):
                order.append(n)

        tasks = [asyncio.create_task(lease(n, ["q"])) for n in range(100)]
        await asyncio.sleep(0)
        waiters.on_ready(["q"])
        await asyncio.sleep(0.01)
        assert order == [0]
        waiters.on_ready(["q", "q", "other"])
        await asyncio.sleep(0.01)
        assert order == [0, 1, 2]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert not waiters.ready  # nobody left registered

    asyncio.run(scenario())


def test_a_wake_skips_waiters_that_already_left():
    async def scenario():
        waiters = Waiters()
        quick = asyncio.create_task(waiters.wait_ready(["q"], 0.01, lambda: False))
        patient = asyncio.create_task(waiters.wait_ready(["q", "r"], 5, lambda: False))
        assert await quick is False  # timed out and left
        waiters.on_ready(["q"])
        assert await patient is True
        assert not waiters.ready

    asyncio.run(scenario())


def test_a_waiter_of_several_names_is_woken_once():
    async def scenario():
        waiters = Waiters()
        both = asyncio.create_task(waiters.wait_ready(["a", "b"], 5, lambda: False))
        second = asyncio.create_task(waiters.wait_ready(["b"], 5, lambda: False))
        await asyncio.sleep(0)
        waiters.on_ready(["a", "b"])  # `both` takes a's wake; b's goes to `second`
        assert await both is True and await second is True

    asyncio.run(scenario())


def test_a_partition_that_left_lets_go_only_its_own_waiters():
    async def main() -> list[bool]:
        waiters = Waiters()
        lost, kept = waiters.expect(1, partition=0), waiters.expect(2, partition=1)
        assert waiters.let_go({0}, lambda request_id, partition: MayTakeEffect("moved")) == 1
        return [lost.done() and isinstance(lost.exception(), MayTakeEffect), kept.done()]

    assert asyncio.run(main()) == [True, False]
