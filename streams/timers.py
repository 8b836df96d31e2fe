"""Timers turn passed deadlines into commands; they never write state.

A passed TTR produces ``timeout-attempt(id, attempt)``, a passed TTL ``expire(id)``
(docs/architecture.md, "The processor"); an attempt only offered to another process and never
confirmed is given back instead (``release-attempt``, eventq/state/offers.py: no worker got it,
so it is not counted); the processor re-checks each one when it is applied,
so a complete that came first wins. A scheduled job's wake-up is not a command (spec:
schedule), but lease waiters of its queue are woken. The timer sleeps until the next
deadline (no polling) and is woken early when an earlier one appears.

Workflows (docs/workflows.md, "Command types"): a registration of a dependent with an
absent upstream (eventq/core/workflow.py) is dropped by an ``expire`` of the upstream's id
once the dependent's TTL deadline, which it carries, has passed (eventq/core/followups.py:
an ``expire`` of an absent job drops the expired registrations of that id, by the broker's
clock). The index keeps the deadline of each registration stored while its upstream was
absent, with the upstream's id (``put_registration``; rebuilt from the table with the
jobs); when one passes and the upstream is not a live job here, the timer reads the
upstream's registrations from the table (``registrations``): none left, nothing; the
earliest still ahead, checked again then; one expired, ``expire(upstream)``, checked again
``RETRY_AFTER_MS`` later until it is gone. A live upstream's registrations go with its
ending or removal, so it needs no timer. Every check reads the table, so a repeated or
late ``expire`` is harmless: it drops what has expired by then, or nothing.

Recurring jobs (docs/workflows.md, "Recurring jobs"): the index keeps when each
recurrence of the owned partitions has its next slot due (``put_recurrence``, rebuilt
from the table when a partition is taken, so after a restart or a move a slot missed
meanwhile is due at once). Then the timer sends ``fire(name, latest slot due)``, keyed
``recur:<name>``, and again ``RETRY_AFTER_MS`` later until the record moves on: the
fire is decided when applied, by the broker's clock (eventq/core/recurrence.py), so a
repeated or early one fires nothing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Awaitable, Callable

from eventq.core import Command, Expire, Fire, ReleaseAttempt, TimeoutAttempt
from eventq.core.commands import RecurrenceCommand
from eventq.state.indexes import TTR, Due, JobIndex
from eventq.state.waiters import Waiters

log = logging.getLogger(__name__)

RETRY_AFTER_MS = 1000  # a deadline's command not applied by then is sent again
# Sends that keep failing this long are an operator's matter (WARNING); a failure that
# the next retry gets past (a connection Kafka closed) is routine (INFO): docs/architecture.md,
# "Logging".
WARN_AFTER_FAILING_MS = 10_000
MAX_SLEEP_S = 5.0  # also bounds how long a lost wake-up could delay a deadline


class DeadlineTimer:
    def __init__(
        self,
        index: JobIndex,
        waiters: Waiters,
        send: Callable[[Command | RecurrenceCommand], Awaitable[None]],
        clock_ms: Callable[[], int],
        unconfirmed: Callable[[uuid.UUID, int], ReleaseAttempt | None] = lambda *_: None,
        registrations: Callable[[uuid.UUID], int | None] = lambda _: None,
    ) -> None:
        self._index = index
        self._waiters = waiters
        self._send = send
        self._clock_ms = clock_ms
        self._unconfirmed = unconfirmed  # Offers.withdraw_attempt
        # The earliest deadline of an upstream's stored registrations (JobStore
        # .earliest_registration_ms: None when none, or not owned here).
        self._registrations = registrations
        self._wake = asyncio.Event()
        self._target_ms: int | None = None
        self._failing_since_ms: int | None = None  # the first of the failures in a row
        self.sent = 0

    def consider(self, deadline_ms: int) -> None:
        """A new deadline exists; wake the timer if it is earlier than its target."""
        if self._target_ms is None or deadline_ms < self._target_ms:
            self._target_ms = deadline_ms
            self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let one bad tick stop expiries for good
                log.exception("deadline timer tick failed")
            now_ms = self._clock_ms()
            next_ms = self._index.next_deadline_ms()
            self._target_ms = next_ms
            delay_s = MAX_SLEEP_S if next_ms is None else max(0.0, (next_ms - now_ms) / 1000)
            self._wake.clear()
            try:  # asyncio.timeout: 3.11's wait_for can drop the stop's cancellation
                async with asyncio.timeout(min(delay_s, MAX_SLEEP_S)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _tick(self) -> None:
        now_ms = self._clock_ms()
        woken = self._index.promote_due(now_ms)
        if woken:
            self._waiters.on_ready(woken)
        commands: list[Command | RecurrenceCommand] = []
        for due in self._index.due(now_ms):
            commands.append(self._command_for(due))
            # If it is not applied (Kafka down, broker clock behind), try again later.
            self._index.rearm(due, now_ms + RETRY_AFTER_MS)
        for upstream in self._index.due_registrations(now_ms):
            earliest = self._registrations(upstream)
            if earliest is None:
                continue  # none left (or no longer owned here)
            if earliest > now_ms:
                self._index.put_registration(upstream, earliest)
                continue
            self._index.put_registration(upstream, now_ms + RETRY_AFTER_MS)  # until gone
            commands.append(Expire(upstream))
        for name, every_ms, next_slot in self._index.due_recurrences(now_ms):
            # The latest slot due by this clock: missed ones (nothing served, the
            # partition moving here) fire once, the latest. Applied by the broker's
            # clock; until its record moves on, asked again RETRY_AFTER_MS later.
            commands.append(Fire(name, max(next_slot, now_ms // every_ms)))
            self._index.rearm_recurrence(name, now_ms + RETRY_AFTER_MS)
        # All at once: each send waits for the broker's acknowledgement, and one after
        # another, the fires of recurrences due at the same instant queued behind each
        # other's round trips (bench/recur_bench.py: due -> fire in the log p99 373 ms
        # for 10 at once). Each is handed to its partition's lane in this order before
        # the first await (streams/engine.py ``send``), so one job's stay in order.
        outcomes = await asyncio.gather(*map(self._send, commands), return_exceptions=True)
        for command, outcome in zip(commands, outcomes):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                log.log(self._failure_level(now_ms), "could not send %s: %s (will retry)",
                        type(command).__name__, outcome)
            else:
                self.sent += 1
                self._failing_since_ms = None

    def _failure_level(self, now_ms: int) -> int:
        if self._failing_since_ms is None:
            self._failing_since_ms = now_ms
        failing_ms = now_ms - self._failing_since_ms
        return logging.WARNING if failing_ms >= WARN_AFTER_FAILING_MS else logging.INFO

    def _command_for(self, due: Due) -> Command:
        if due.kind != TTR:
            return Expire(due.job_id)
        return self._unconfirmed(due.job_id, due.attempt) or TimeoutAttempt(
            due.job_id, due.attempt)
