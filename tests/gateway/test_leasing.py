"""A lease the gateway gives up on is given back, naming its claim (docs/architecture.md,
"Abandoned commands"; docs/fencing.md, "The three fences").

The give-back (release-attempt) carries the log position of the start-attempt it undoes,
and is applied only while the job is exactly as that claim left it (core.ReleaseAttempt):
another client's claim of the same attempt number, by this process or by the process
that took the partition over, is never taken back by it, whenever it is written. It is
written once Kafka has taken the claim (only then is its position known, and only then
is there anything to undo)."""

from __future__ import annotations

import asyncio

import pytest

from eventq import core
from eventq.core import State
from eventq.errors import MayTakeEffect, NotWritten
from eventq.gateway.leasing import Leasing
from eventq.state.indexes import JobIndex
from support.jobs import NOW, job
from support.lease_engine import ScriptedEngine, Stats

CLAIM_AT = 7 << 16  # the claim's position in the log: record 7, first in it


@pytest.mark.parametrize(
    "failure", [MayTakeEffect("not applied in time"), asyncio.CancelledError()],
    ids=["deadline", "client-gone"],
)
def test_a_claim_given_up_is_given_back_by_its_position(failure):
    index = JobIndex()
    pending = job(state=State.PENDING, attempts=2)
    index.put(pending, 0, NOW)
    engine = ScriptedEngine(index, [failure], claim_at=CLAIM_AT)
    leasing = Leasing(engine, Stats(), clock_ms=lambda: NOW)

    async def claim() -> None:
        with pytest.raises(type(failure)):
            await leasing.claim_one(("q",))
        await asyncio.sleep(0)  # the background wait for the release's write

    asyncio.run(claim())
    assert engine.lane == [
        core.StartAttempt(pending.id, 3),
        core.ReleaseAttempt(pending.id, 3, State.PENDING, claim=CLAIM_AT),
    ]
    assert engine.claimed == set()  # and the job may be claimed again
    assert leasing.stats.released == 1


def test_a_claim_never_written_is_not_released():
    index = JobIndex()
    ready = job()
    index.put(ready, 0, NOW)
    engine = ScriptedEngine(index, [NotWritten("Kafka did not take it")], claim_at=CLAIM_AT)
    leasing = Leasing(engine, Stats(), clock_ms=lambda: NOW)

    async def claim() -> None:
        with pytest.raises(NotWritten):
            await leasing.claim_one(("q",))

    asyncio.run(claim())
    assert engine.lane == [core.StartAttempt(ready.id, 1)]
    assert leasing.stats.released == 0
