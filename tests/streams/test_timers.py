"""The deadline timer (streams/timers.py): what it sends at a TTR is in tests/test_offers.py;
here how it reports sends Kafka fails."""

from __future__ import annotations

import asyncio
import logging

from jobs import NOW, job

from eventq.core import State
from eventq.indexes import JobIndex
from eventq.waiters import Waiters
from streams.timers import WARN_AFTER_FAILING_MS, DeadlineTimer


def test_a_failed_send_is_routine_until_sends_have_failed_for_a_while(caplog):
    """The 10-minute soak in CI: one batch of expirations failed on a connection Kafka
    closed, was sent again a second later, and 7 WARNING lines were a false alarm."""
    index = JobIndex()
    for _ in range(2):
        index.put(job(state=State.LEASED, attempts=1, lease_deadline=NOW - 1), 0, NOW - 1000)
    clock = {"now": NOW}
    outcomes = [ConnectionError("closed"), ConnectionError("closed"), None, ConnectionError("x")]

    async def send(command) -> None:
        outcome = outcomes.pop(0) if outcomes else ConnectionError("down")
        if outcome is not None:
            raise outcome

    timer = DeadlineTimer(index, Waiters(), send, lambda: clock["now"])
    caplog.set_level(logging.INFO, logger="streams.timers")

    def levels_of_tick() -> list[int]:
        caplog.clear()
        asyncio.run(timer._tick())
        return [r.levelno for r in caplog.records if "could not send" in r.getMessage()]

    assert levels_of_tick() == [logging.INFO, logging.INFO]  # both fail: routine so far
    clock["now"] += 1_000
    assert levels_of_tick() == [logging.INFO]  # one gets through: the run of failures ends
    clock["now"] += 1_000
    assert levels_of_tick() == [logging.INFO, logging.INFO]  # failing again, from now
    clock["now"] += WARN_AFTER_FAILING_MS
    assert levels_of_tick() == [logging.WARNING, logging.WARNING]  # for 10 s: say so
