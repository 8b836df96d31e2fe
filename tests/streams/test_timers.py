"""The deadline timer (streams/timers.py): what it sends at a TTR is in tests/state/test_offers.py;
here how it reports sends Kafka fails, and the expirations of absent upstreams'
registrations (workflows)."""

from __future__ import annotations

import asyncio
import logging
import uuid

from eventq.core import Expire, State
from eventq.state.indexes import JobIndex
from eventq.state.waiters import Waiters
from streams.timers import RETRY_AFTER_MS, WARN_AFTER_FAILING_MS, DeadlineTimer
from support.jobs import NOW, job


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


def test_an_absent_upstreams_expired_registrations_are_swept_by_an_expire_until_gone():
    """A registration's deadline passed and its upstream is no live job here: the timer
    reads the upstream's registrations (their earliest deadline) and sends
    ``expire(upstream)`` while one has expired, checking again a second later."""
    index = JobIndex()
    upstream, live = uuid.uuid4(), job()
    index.put(live, 0, NOW)
    index.put_registration(upstream, NOW)
    index.put_registration(live.id, NOW)  # a live upstream's go with its ending
    stored = {upstream: NOW - 5, live.id: NOW - 5}  # the earliest deadline in the table
    sent: list = []
    asked: list = []

    async def send(command) -> None:
        sent.append(command)

    def registrations(upstream_id):
        asked.append(upstream_id)
        return stored.get(upstream_id)

    clock = {"now": NOW}
    timer = DeadlineTimer(index, Waiters(), send, lambda: clock["now"],
                          registrations=registrations)
    asyncio.run(timer._tick())
    assert sent == [Expire(upstream)] and asked == [upstream]
    assert index.next_deadline_ms() == NOW + RETRY_AFTER_MS  # checked again then
    clock["now"] += RETRY_AFTER_MS
    stored[upstream] = NOW + 50_000  # the expired one is gone; a later one is left
    asyncio.run(timer._tick())
    assert sent == [Expire(upstream)]
    assert index.next_deadline_ms() == NOW + 50_000
    clock["now"] = NOW + 50_000
    del stored[upstream]  # gone meanwhile (or the partition moved away)
    asyncio.run(timer._tick())
    assert sent == [Expire(upstream)]
    assert index.next_deadline_ms() == live.expires_ms  # only the live job's TTL is left
