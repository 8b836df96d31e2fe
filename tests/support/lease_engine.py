"""The engine's surface the lease path uses (eventq/gateway/leasing.py), scripted: each
submit answers with the next of its outcomes (an exception is raised, after Kafka took
the claim unless it is ``NotWritten``), and every command it is handed is kept in order
(``lane``)."""

from __future__ import annotations

import asyncio
import uuid

from eventq.errors import NotWritten
from eventq.state.indexes import JobIndex
from eventq.state.offers import Offers


class ScriptedEngine:
    def __init__(self, index: JobIndex, outcomes: list, claim_at: int | None = None) -> None:
        self.index = index
        self.waiters = None
        self.claimed: set[uuid.UUID] = set()
        self.offers = Offers()
        self.lane: list[object] = []
        self._outcomes = outcomes
        self._claim_at = claim_at  # the claim's log position (None: its place in the lane)

    async def wait_ready(self) -> None:
        return None

    async def submit(self, command, on_abandoned=None):
        self.lane.append(command)
        await asyncio.sleep(0)
        outcome = self._outcomes.pop(0)
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, NotWritten):  # as streams/engine.py does
                on_abandoned(len(self.lane) if self._claim_at is None else self._claim_at)
            raise outcome
        return outcome

    def append(self, command):
        self.lane.append(command)

        async def in_log() -> None:
            return None

        return in_log()


class Stats:
    released = 0
