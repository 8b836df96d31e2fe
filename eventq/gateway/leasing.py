"""A lease of this process's jobs, from the claim to the hand-over or the give-back
(docs/architecture.md, "The gateway" and "Abandoned commands").

A lease claims the best ready job with start-attempt and hands it over (a ``Handover``:
its reply, and the release that gives it back if no client receives it). A claim made
for another process's lease is only offered until that process confirms it
(eventq/state/offers.py). A command given up on while it is in the log is compensated: a
claim is given back, a run's job deleted.

Both sides of a lease use this module: this process's answers (eventq/gateway/handlers.py)
and the cluster's (eventq/gateway/cluster_answers.py). It imports neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar, cast

from eventq import core
from eventq.core import AttemptStarted, Command, Job, State
from eventq.core.machine import Accepted
from eventq.errors import EventqError, PartitionMoved, Timeout
from eventq.gateway import ports
from eventq.protocol import replies
from eventq.protocol import requests as rq
from eventq.state.offers import confirm_window_ms

log = logging.getLogger(__name__)

T = TypeVar("T")

MS = 1000.0


@dataclass(frozen=True)
class Handover:
    """A reply that hands a job to its client (a lease). If the client is gone before
    it can be written, the attempt is given back with ``release`` instead (docs/architecture.md,
    "Abandoned commands"): a job is never leased to nobody."""

    reply: bytes
    release: core.ReleaseAttempt


# Take a ready job of these names (None: none ready).
Take = Callable[[tuple[str, ...]], Awaitable[Handover | None]]
# Until one may be ready (None) or one is handed over, at most until the loop time given.
Wait = Callable[[tuple[str, ...], float], Awaitable[Handover | None]]


class Leasing:
    """Claims of this process's jobs, their hand-over and give-back, and compensations.
    One per process."""

    def __init__(
        self, engine: ports.Engine, stats: ports.Stats, clock_ms: Callable[[], int]
    ) -> None:
        self.engine = engine
        self.index = engine.index
        self.waiters = engine.waiters
        self.stats = stats  # .released
        self.clock_ms = clock_ms
        self._background: set[asyncio.Future[None]] = set()
        # Set when this process stops (eventq/gateway/server.py ``stop``): a lease
        # waiting for a job ends with -TIMEOUT, and nothing was taken for it.
        self.stopping = asyncio.Event()

    async def lease_loop(self, request: rq.Lease, take: Take, wait: Wait) -> Handover:
        """A lease: ``take`` a ready job, else ``wait`` (until the loop-time deadline)
        for one to become ready (None) or to be handed over, again until the deadline.
        This process's jobs (eventq/gateway/handlers.py), or the cluster's
        (eventq/gateway/cluster_answers.py)."""
        for name in request.names:
            self.index.name_queue(name)  # a lease names its queues into being (spec)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.wait_timeout_ms / MS
        waited = False
        try:
            while True:
                handover = await take(request.names)
                if handover is not None:
                    return handover
                if deadline - loop.time() <= 0 or self.stopping.is_set():
                    raise Timeout()
                waited = True
                handover = await self.unless_stopping(wait(request.names, deadline), None)
                if handover is not None:
                    return handover
        finally:
            if waited:
                # A ready job wakes one waiter; this one may have taken a job of another
                # of its names, or given up: pass the wake on where jobs are still ready.
                self.waiters.on_ready(n for n in request.names if self._any_ready((n,)))

    async def unless_stopping(self, waiting: Awaitable[T], otherwise: T) -> T:
        """What ``waiting`` gives, or ``otherwise`` once this process stops first (the
        wait is cancelled: a job a lease was being handed goes back, as for a client
        that left)."""
        wait = asyncio.ensure_future(waiting)
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait((wait, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not wait.done():
                wait.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await wait
        return otherwise if wait.cancelled() else wait.result()

    async def settle(self, timeout_s: float) -> None:
        """Until the give-backs and compensations queued so far are in Kafka, at most
        ``timeout_s``."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=timeout_s)

    async def take_here(
        self, names: tuple[str, ...], peer_form: bool = False
    ) -> Handover | None:
        """Claim this process's best ready job of ``names`` and hand it over; the peer
        form of the reply carries the attempt, for the asking gateway to give back."""
        claim = await self.claim_one(names)
        if claim is None:
            return None
        job, release = claim
        if peer_form:
            self._offer(release, job.ttr_ms)
            reply = replies.peer_lease_reply(
                job.id, job.name, job.ttr_ms, release.attempt, int(release.state),
                cast(int, release.claim), job.payload)  # claim_one names every claim
        else:
            reply = replies.lease_reply(job.id, job.name, job.ttr_ms, job.payload)
        return Handover(reply, release)

    def _offer(self, release: core.ReleaseAttempt, ttr_ms: int) -> None:
        """Hold a claim for a peer's lease until it confirms it; give it back if it
        does not in time (eventq/state/offers.py; docs/fencing.md, "A claim made for another
        process: offered, then confirmed")."""
        if self.index.entry(release.job_id) is None:
            return  # already gone again (deleted, expired): nothing to confirm
        self.engine.offers.open(release)
        asyncio.get_running_loop().call_later(
            confirm_window_ms(ttr_ms) / MS, self._withdraw_offer, release)

    def _withdraw_offer(self, release: core.ReleaseAttempt) -> None:
        if self.engine.offers.withdraw(release.job_id, release.claim) is not None:
            self.give_back(release)

    async def wait_here(self, names: tuple[str, ...], deadline: float) -> None:
        """Until a job of ``names`` is ready here or the loop-time deadline passes."""
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        await self.waiters.wait_ready(names, remaining, lambda: self._any_ready(names))

    def _any_ready(self, names: Iterable[str]) -> bool:
        candidates = self.index.ready_candidates(names, self.clock_ms(), self.engine.claimed)
        return next(candidates, None) is not None

    async def claim_one(self, names: Iterable[str]) -> tuple[Job, core.ReleaseAttempt] | None:
        """Claim the best ready job with start-attempt; the processor grants it only if
        it is still ready at that attempt, so no attempt is ever handed out twice.

        A claim this gateway gives up on while it is in the log (deadline passed,
        connection ended) is given back, so its attempt is not spent on nobody. The
        give-back names the claim by its log position: it undoes that claim only, never
        another process's claim of the same attempt (core.ReleaseAttempt)."""
        await self.engine.wait_ready()
        claimed = self.engine.claimed
        for job_id in self.index.ready_candidates(names, self.clock_ms(), claimed):
            entry = self.index.entry(job_id)
            if entry is None:
                continue
            attempt = entry.attempts + 1
            claimed.add(job_id)
            try:
                applied = await self.engine.submit(
                    core.StartAttempt(job_id, attempt),
                    # while still claimed
                    on_abandoned=partial(self._give_back_claim, job_id, attempt, entry.state),
                )
            except PartitionMoved:
                # The claim is given back behind it (``on_abandoned``): nothing was
                # taken for this lease, which goes on (docs/operations.md, "Planned
                # restarts").
                continue
            finally:
                claimed.discard(job_id)
            outcome = applied.outcome
            if isinstance(outcome, Accepted) and isinstance(outcome.event, AttemptStarted):
                # Applied, so it has its job (LEASED now) and its log position.
                return cast(Job, applied.job), core.ReleaseAttempt(
                    job_id, attempt, entry.state, applied.at)
            # AttemptsExhausted (now FAILED) or a refused claim: try the next job.
        return None

    def _give_back_claim(self, job_id: uuid.UUID, attempt: int, state: State, at: int) -> None:
        """Give back an abandoned claim, the start-attempt at log position ``at``."""
        self.give_back(core.ReleaseAttempt(job_id, attempt, state, at))

    def give_back(self, release: core.ReleaseAttempt) -> None:
        """Append ``release`` (applied only while the job is as its claim left it). It
        is queued at once; the client's reply does not wait."""
        self.engine.offers.withdraw(release.job_id, release.claim)  # if it was one
        self.stats.released += 1
        self.compensate(release, "its TTR will time the attempt out instead")

    def compensate(self, command: Command, otherwise: str) -> None:
        """Queue ``command`` now behind the abandoned one (same job, same lane) and
        wait for Kafka to take it in the background."""
        try:
            in_log = self.engine.append(command)
        except EventqError as error:  # no producer yet
            self._compensation_failed(command, otherwise, error)
            return
        task = asyncio.ensure_future(self._await_compensation(command, otherwise, in_log))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _await_compensation(
        self, command: Command, otherwise: str, in_log: Awaitable[None]
    ) -> None:
        try:
            await in_log
        except Exception as error:
            self._compensation_failed(command, otherwise, error)

    @staticmethod
    def _compensation_failed(command: Command, otherwise: str, error: Exception) -> None:
        log.warning("could not write %s for job %s (%s): %s",
                    type(command).__name__, command.job_id, otherwise, error)
