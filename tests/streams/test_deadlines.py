"""streams/deadlines.py: deadlines of one delay on one timer fall due in the order set,
each no earlier than its time, never for a future answered meanwhile; and thousands of
answered ones cost no timer each."""

from __future__ import annotations

import asyncio

from streams.deadlines import Deadlines

DELAY_S = 0.05


def test_each_falls_due_at_its_time_unless_answered():
    async def main() -> tuple[list[tuple[int, float]], list[int]]:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(DELAY_S)
        due: list[tuple[int, float]] = []
        set_at: dict[int, float] = {}
        futures = []
        for n in range(4):
            future = loop.create_future()
            futures.append(future)
            set_at[n] = loop.time()
            deadlines.add(future, lambda n=n: due.append((n, loop.time() - set_at[n])))
            await asyncio.sleep(0.01)
        futures[1].set_result(None)  # answered: never due
        await asyncio.sleep(DELAY_S + 0.05)
        return due, [n for n, _ in due]

    due, order = asyncio.run(main())
    assert order == [0, 2, 3]
    assert all(DELAY_S <= late < DELAY_S + 0.04 for _, late in due)


def test_answered_deadlines_arm_no_timer_each():
    async def main() -> int:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(DELAY_S)
        armed = 0
        call_at = loop.call_at

        def counting_call_at(when, callback, *args, **kwargs):
            nonlocal armed
            armed += 1
            return call_at(when, callback, *args, **kwargs)

        loop.call_at = counting_call_at  # type: ignore[method-assign]
        for _ in range(1000):
            future = loop.create_future()
            deadlines.add(future, lambda: None)
            future.set_result(None)
        await asyncio.sleep(DELAY_S * 2)
        return armed

    assert asyncio.run(main()) <= 2


def test_a_deadline_set_when_one_falls_due_is_timed_from_then():
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(DELAY_S)
        future = loop.create_future()
        started = loop.time()
        times: list[float] = []

        def again() -> None:
            times.append(loop.time() - started)
            if len(times) < 3:
                deadlines.add(future, again)

        deadlines.add(future, again)
        await asyncio.sleep(DELAY_S * 3 + 0.1)
        return times

    times = asyncio.run(main())
    assert len(times) == 3
    assert all(DELAY_S * (n + 1) <= t < DELAY_S * (n + 1) + 0.05 for n, t in enumerate(times))
