"""The cluster's answers, when other eventq processes are in the group
(docs/architecture.md, "Scaling out"): a request about one job is answered by the owner
of its partition (forwarded, its reply relayed as is: eventq/gateway/cluster.py); a lease
takes a ready job wherever it is, preferring this process's own; ``inspect`` shows
figures of all jobs; pause and resume hold everywhere once answered.

This process's own part of each comes from the local answers it is given
(eventq/gateway/handlers.py) and the lease protocol (eventq/gateway/leasing.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, cast

from eventq import core
from eventq.core import State
from eventq.core.digest import StateDigest
from eventq.errors import EventqError, NotFound, PartitionMoved, ServerError
from eventq.gateway import ports
from eventq.gateway.cluster import (
    KEYED,
    DigestPart,
    check_covers,
    digest_part_of,
    merge_job_pages,
    merge_queues,
    merge_recurrences,
    queue_views,
    raise_if_error,
)
from eventq.gateway.handlers import LocalAnswers
from eventq.gateway.leasing import Handover, Leasing
from eventq.limits import RETRY_WAVE_JOBS
from eventq.protocol import replies
from eventq.protocol import requests as rq
from eventq.protocol.reply_reader import blocks_reply, data_reply_fields, parse_blocks
from eventq.state import callers

log = logging.getLogger(__name__)

MS = 1000.0
PEER_RETRY_S = 0.1  # a peer that is recovering or unreachable is asked again this soon
# A command whose partition moved before this process applied it: its new owner is asked
# for the reply this long (within a forward's deadline, eventq/gateway/dispatch.py), each
# ask waiting at most OUTCOME_ASK_S there for the new owner to apply it.
HANDED_OVER_WAIT_S = 5.0
OUTCOME_ASK_S = 2.0


class UnconfirmedClaim(ServerError):
    """A peer claimed a job for this lease and did not answer whether it is still ours
    (eventq/state/offers.py): the lease's outcome is unknown, as any request's that times out."""

    def __init__(self, address: str, why: object) -> None:
        super().__init__(
            f"the eventq process at {address} claimed a job for this lease and did not "
            f"confirm it ({why}); lease again (the job goes back at its TTR if it was ours)")


class ClusterAnswers:
    """What the cluster answers, where other processes serve too. One per process."""

    def __init__(
        self,
        *,
        cluster: ports.Cluster,
        engine: ports.Engine,
        stats: ports.Stats,
        leasing: Leasing,
        local: LocalAnswers,
        clock_ms: Callable[[], int],
    ) -> None:
        self.cluster = cluster
        self.engine = engine
        self.index = engine.index
        self.stats = stats  # .active_clients, .evicted_jobs
        self.leasing = leasing
        self.local = local  # this process's own answers
        self.clock_ms = clock_ms
        self._answers: dict[type, Callable[[Any], Awaitable[bytes | Handover]]] = {
            rq.Lease: self.lease,
            rq.InspectServer: self.inspect_server,
            rq.InspectQueues: self.inspect_queues,
            rq.InspectQueue: self.inspect_queue,
            rq.InspectJobs: self.inspect_jobs,
            rq.InspectScheduledJobs: self.inspect_jobs,
            rq.InspectWaitingJobs: self.inspect_jobs,
            rq.InspectTagged: self.inspect_tagged,
            rq.InspectDigest: self.inspect_digest,
            rq.InspectBulk: self.inspect_bulk,
            rq.InspectFailed: self.inspect_failed,
            rq.InspectFailedJobs: self.inspect_failed_jobs,
            rq.RetryGroup: self.retry_group,
            rq.Pause: self.pause_or_resume,
            rq.Resume: self.pause_or_resume,
            rq.InspectRecurring: self.inspect_recurring,
        }

    async def reply_after_move(self, moved: PartitionMoved) -> bytes | None:
        """The reply of the command ``moved`` is about, from the process its partition
        moved to, which applies it (docs/architecture.md, "Abandoned commands"); None
        if no owner gave it within ``HANDED_OVER_WAIT_S``: then it stays unknown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANDED_OVER_WAIT_S
        while (left := deadline - loop.time()) > 0:
            owner = self.cluster.remote_owner_of_partition(moved.partition)
            if owner is not None:
                ask = rq.Outcome(self.engine.node, moved.request_id,
                                 int(min(left, OUTCOME_ASK_S) * MS))
                try:
                    reply = replies.reply_handed_over(await self.cluster.ask(owner, ask))
                except ServerError as error:  # unreachable, or not answering
                    log.debug("outcome at %s: %s", owner, error)
                    reply = None
                if reply is not None:
                    return reply
            await asyncio.sleep(PEER_RETRY_S)
        return None

    async def answer(self, request: object) -> bytes | Handover | None:
        """Where other processes serve: a job's request goes to its partition's owner
        (its reply relayed as is), a request over all jobs asks every process. None:
        this process answers alone."""
        if isinstance(request, KEYED):
            owner = self.cluster.remote_owner(request.id)
            if owner is not None:
                return await self.cluster.ask(owner, request)
            return None
        if isinstance(request, (rq.Recur, rq.Unrecur)):  # its recurrence's owner applies it
            owner = self.cluster.remote_owner_of_key(core.recurrence_key(request.name))
            if owner is not None:
                return await self.cluster.ask(owner, request)
            return None
        answer = self._answers.get(type(request))
        if answer is None or not self.cluster.others():
            return None
        return await answer(request)

    # --- lease -------------------------------------------------------------------

    async def lease(self, request: rq.Lease) -> Handover:
        """The best ready job of the whole cluster, in the spec's lease order: a
        uniformly random name among those with ready jobs anywhere, then that name's
        best job wherever it is (this process's on a tie). Its owner claims it with
        start-attempt, so no attempt is handed out twice. When none is ready anywhere,
        wait here and at every other process at once: the first job wins, a second
        one that arrives meanwhile is given back."""
        return await self.leasing.lease_loop(request, self._lease_best, self._wait_anywhere)

    async def _lease_best(self, names: tuple[str, ...]) -> Handover | None:
        others = self.cluster.others()
        heads: dict[str | None, dict[str, int]] = dict(zip(
            others, await asyncio.gather(*(self._heads_at(a, names) for a in others))))
        if self.engine.ready.is_set():
            heads[None] = self.index.ready_heads(names, self.clock_ms(), self.engine.claimed)
        while True:
            choice = choose_lease(heads)
            if choice is None:
                return None
            name, where = choice
            del heads[where][name]  # tried: if it is gone, the next best
            if where is None:
                handover = await self.leasing.take_here((name,))
            else:
                handover = await self._lease_at(where, (name,), 0)
            if handover is not None:
                return handover

    async def _heads_at(self, address: str, names: Iterable[str]) -> dict[str, int]:
        try:
            reply = await self.cluster.ask(address, rq.Peek(tuple(names)))
        except ServerError as error:
            log.debug("peek at %s: %s", address, error)
            return {}
        if not reply.startswith(b"+OK"):
            return {}
        return heads_of(reply)

    async def _lease_at(
        self, address: str, names: Iterable[str], wait_ms: int
    ) -> Handover | None:
        """A job leased at ``address`` (None: none ready there, or it did not answer)."""
        try:
            reply = await self.cluster.ask(address, rq.Lease(tuple(names), wait_ms))
        except ServerError as error:
            log.debug("lease at %s: %s", address, error)
            return None
        if not reply.startswith(b"+OK"):
            return None
        return await self._take_offer(address, reply)

    async def _take_offer(self, address: str, reply: bytes) -> Handover | None:
        """The job a peer claimed for this lease, once it confirms that the claim is
        still ours (eventq/state/offers.py): None if it was withdrawn (given back: lease on).
        A confirm without an answer ends the lease with an error, for the job may be
        ours with nobody to hand it to: the client must not be told "no job" nor be
        given another one (its attempt would be counted for nobody)."""
        handover = handover_from(reply)
        job_id = handover.release.job_id
        claim = cast(int, handover.release.claim)  # a peer's handover names its claim
        confirming = asyncio.ensure_future(self.cluster.ask(address, rq.Confirm(job_id, claim)))
        try:
            answer = await asyncio.shield(confirming)
        except asyncio.CancelledError:
            # Not wanted any more (another job came first, the client left): if the
            # confirm still lands, the job is ours and goes back at once.
            confirming.add_done_callback(partial(self._give_back_if_confirmed, handover))
            raise
        except ServerError as error:
            raise UnconfirmedClaim(address, error) from None
        if answer.startswith(b"+OK"):
            return handover
        if answer.startswith(b"-NOT-FOUND"):
            return None
        raise UnconfirmedClaim(address, answer.decode("latin-1").strip())

    def _give_back_if_confirmed(
        self, handover: Handover, confirming: asyncio.Future[bytes]
    ) -> None:
        if confirming.cancelled() or confirming.exception() is not None:
            return
        if confirming.result().startswith(b"+OK"):
            self.leasing.give_back(handover.release)

    async def _wait_at(
        self, address: str, names: Iterable[str], deadline: float
    ) -> Handover | None:
        loop = asyncio.get_running_loop()
        while True:
            remaining_ms = int((deadline - loop.time()) * MS)
            if remaining_ms <= 0:
                return None
            try:
                reply = await self.cluster.ask(address, rq.Lease(tuple(names), remaining_ms))
            except ServerError:
                reply = b"-SERVER-ERROR\r\n"
            if reply.startswith(b"+OK"):
                handover = await self._take_offer(address, reply)
                if handover is not None:
                    return handover
                # Withdrawn before we confirmed it (a TTR shorter than the round trip
                # always is): wait there again, not at once (each try writes a claim and
                # its give-back).
                await asyncio.sleep(PEER_RETRY_S)
                continue
            if reply.startswith(b"-TIMEOUT"):
                return None
            await asyncio.sleep(PEER_RETRY_S)  # recovering, or gone: ask again

    async def _wait_anywhere(
        self, names: tuple[str, ...], deadline: float
    ) -> Handover | None:
        """Wait until a job is ready here (None: claim it) or another process leased
        one to us (its handover)."""
        local = asyncio.ensure_future(self.leasing.wait_here(names, deadline))
        remote = {asyncio.ensure_future(self._wait_at(a, names, deadline))
                  for a in self.cluster.others()}
        pending = {local, *remote}
        chosen = None
        unconfirmed = None
        try:
            while pending and chosen is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is local:
                        continue
                    if isinstance(task.exception(), UnconfirmedClaim):
                        unconfirmed = task.exception()
                    elif task.exception() is None and task.result():
                        chosen = task.result()
                        break
                if local in done:
                    break
            if chosen is None and unconfirmed is not None:
                raise unconfirmed
            return chosen
        finally:
            for task in pending:
                task.cancel()
            # A task may have finished with a job after the one chosen: give it back.
            for result in await asyncio.gather(*remote, return_exceptions=True):
                if result is not None and result is not chosen and not isinstance(
                    result, BaseException
                ):
                    self.leasing.give_back(result.release)

    # --- inspect -----------------------------------------------------------------

    async def pause_or_resume(self, request: rq.Pause | rq.Resume) -> bytes:
        """pause/resume: written to every partition here, then each other process does
        the same and answers once its own partitions have applied it, so +OK means no
        process hands out the queue's jobs any more (the records are idempotent: the
        second copy of each changes nothing)."""
        try:
            reply = await self.local.pause_or_resume(request)
        except EventqError as error:
            reply = error.reply
        if reply[:1] == b"-":
            return reply
        for other in await self.cluster.ask_others(request):
            raise_if_error(other)
        return reply

    async def inspect_server(self, request: rq.InspectServer) -> bytes:
        """Clients and evicted jobs of every process (peers' own connections are not
        clients); ``started`` is this process's."""
        clients, evicted = self.stats.active_clients, self.stats.evicted_jobs
        for reply in await self.cluster.ask_others(request):
            (block,) = parse_blocks(raise_if_error(reply))
            clients += int(block.value(b"active-clients"))
            evicted += int(block.value(b"evicted-jobs"))
        return replies.server_reply(clients, evicted, self.engine.started_ms)

    async def inspect_queues(self, request: rq.InspectQueues) -> bytes:
        await self.engine.wait_ready()
        upto = request.offset + request.limit
        now_ms = self.clock_ms()
        local = [self.local.queue_view(name, now_ms)
                 for name in self.index.queue_names(callers.prefix())[:upto]]
        others = await self.cluster.pages_of_others(lambda o, n: rq.InspectQueues(o, n), upto)
        parts = [local, *(queue_views(blocks or []) for blocks in others)]
        return replies.queue_blocks(merge_queues(parts)[request.offset:upto])

    async def inspect_queue(self, request: rq.InspectQueue) -> bytes:
        await self.engine.wait_ready()
        parts = []
        if self.index.known(request.name):
            parts.append([self.local.queue_view(request.name, self.clock_ms())])
        for reply in await self.cluster.ask_others(request):
            if not reply.startswith(b"-NOT-FOUND"):
                parts.append(queue_views(parse_blocks(raise_if_error(reply))))
        if not parts:
            raise NotFound()
        return replies.queue_blocks(merge_queues(parts))

    async def inspect_jobs(
        self, request: rq.InspectJobs | rq.InspectScheduledJobs | rq.InspectWaitingJobs
    ) -> bytes:
        """inspect jobs / scheduled-jobs / [eventq] waiting-jobs: every process's first
        offset+limit jobs in peer form, merged by their place (the same key everywhere)."""
        await self.engine.wait_ready()
        upto = request.offset + request.limit
        kind = type(request)
        local = None
        if self.index.known(request.name):
            local = parse_blocks(self.local.ordered_jobs(request.name, kind, 0, upto))
        others = await self.cluster.pages_of_others(lambda o, n: kind(request.name, o, n), upto)
        parts = [blocks for blocks in (local, *others) if blocks is not None]
        if not parts:
            raise NotFound()
        return blocks_reply(merge_job_pages(parts, request.offset, request.limit))

    async def inspect_recurring(self, request: rq.InspectRecurring) -> bytes:
        """[eventq] Every process's first offset+limit recurrences (each owns those of
        its partitions), merged by name (docs/workflows.md, "Recurring jobs")."""
        await self.engine.wait_ready()
        upto = request.offset + request.limit
        local = parse_blocks(replies.recurrence_blocks(self.local.recurrence_views(0, upto)))
        others = await self.cluster.pages_of_others(lambda o, n: rq.InspectRecurring(o, n), upto)
        parts = [local, *(blocks or [] for blocks in others)]
        return blocks_reply(merge_recurrences(parts, request.offset, request.limit))

    async def inspect_tagged(self, request: rq.InspectTagged) -> bytes:
        """[eventq] inspect tagged (docs/workflows.md, "Tags"): every process's first
        offset+limit jobs with the tag in peer form, merged by (created time, id), the
        same key everywhere. A tag no process has: ``+OK 0``."""
        await self.engine.wait_ready()
        upto = request.offset + request.limit
        local = parse_blocks(self.local.ordered_jobs(request.tag, rq.InspectTagged, 0, upto))
        others = await self.cluster.pages_of_others(
            lambda o, n: rq.InspectTagged(request.tag, o, n), upto)
        parts = [blocks for blocks in (local, *others) if blocks is not None]
        return blocks_reply(merge_job_pages(parts, request.offset, request.limit))

    async def inspect_digest(self, request: rq.InspectDigest) -> bytes:
        await self.engine.wait_ready()
        state, served = await self.engine.digest_part()
        parts = [DigestPart(state.sum, state.count, frozenset(served))]
        parts += [digest_part_of(reply) for reply in await self.cluster.ask_others(request)]
        check_covers(parts, self.cluster.partitions)
        combined = StateDigest.combined((part.sum, part.count) for part in parts)
        return replies.digest_reply(combined.hexdigest())

    async def inspect_failed(self, request: rq.InspectFailed) -> bytes:
        """[eventq] Every process's failure groups (their first offset+limit, by name),
        counts summed per group, by name bytewise."""
        await self.engine.wait_ready()
        upto = request.offset + request.limit
        totals: dict[str, int] = dict(self.index.failed_groups(callers.prefix())[:upto])
        for blocks in await self.cluster.pages_of_others(lambda o, n: rq.InspectFailed(o, n), upto):
            for block in blocks or []:
                group = block.head.decode("latin-1")
                totals[group] = totals.get(group, 0) + int(block.value(b"failed-len"))
        groups = sorted(totals, key=lambda group: group.encode("latin-1"))
        return replies.failed_reply([(g, totals[g]) for g in groups][request.offset:upto])

    async def inspect_failed_jobs(self, request: rq.InspectFailedJobs) -> bytes:
        """[eventq] A group's FAILED jobs of every process, merged by their key (failure
        time, then id: the same everywhere)."""
        await self.engine.wait_ready()
        upto = request.offset + request.limit
        local = parse_blocks(self.local.ordered_jobs(
            request.group, rq.InspectFailedJobs, 0, upto))
        others = await self.cluster.pages_of_others(
            lambda o, n: rq.InspectFailedJobs(request.group, o, n), upto)
        parts = [blocks for blocks in (local, *others) if blocks is not None]
        return blocks_reply(merge_job_pages(parts, request.offset, request.limit))

    async def retry_group(self, request: rq.RetryGroup) -> bytes:
        """[eventq] retry-group over the cluster: the group's ``count`` oldest failures
        as it stands (each process's oldest ``count``, merged by key), each retried where
        its partition is, all in flight at once: this process's through its engine, the
        others' forwarded to their owners (docs/workflows.md, "retry-group")."""
        await self.engine.wait_ready()
        found = [(key, job_id) for key, job_id in
                 self.index.failed_page_keys(request.group, 0, request.count, callers.prefix())]
        for reply in await self.cluster.ask_others(request):
            found += keys_of(raise_if_error(reply))
        found.sort()
        chosen = [job_id for _, job_id in found[:request.count]]
        here = [job_id for job_id in chosen if self.cluster.remote_owner(job_id) is None]
        there = [job_id for job_id in chosen if self.cluster.remote_owner(job_id) is not None]
        retried, elsewhere = await asyncio.gather(
            self.local.retry_ids(here), self._retry_at_owners(there))
        return replies.retried_reply(retried + elsewhere)

    async def _retry_at_owners(self, ids: list[uuid.UUID]) -> int:
        """Each of ``ids`` retried at its owner, a wave at a time (limits.RETRY_WAVE_JOBS:
        each forward's deadline measures its own retry)."""
        retried = 0
        for start in range(0, len(ids), RETRY_WAVE_JOBS):
            wave = ids[start:start + RETRY_WAVE_JOBS]
            retried += sum(await asyncio.gather(*(self._retry_at_owner(job_id) for job_id in wave)))
        return retried

    async def _retry_at_owner(self, job_id: uuid.UUID) -> int:
        owner = self.cluster.remote_owner(job_id)
        if owner is None:  # moved here meanwhile
            return await self.local.retry_ids([job_id])
        try:
            reply = await self.cluster.ask(owner, rq.Retry(job_id))
        except ServerError as error:
            log.debug("retry at %s: %s", owner, error)
            return 0
        return 1 if reply.startswith(b"+OK") else 0

    async def inspect_bulk(self, request: rq.InspectBulk) -> bytes:
        blocks = parse_blocks(await self.local.inspect_bulk(request))
        for reply in await self.cluster.ask_others(request):
            blocks += parse_blocks(raise_if_error(reply))
        blocks.sort(key=lambda block: int(block.head))
        return blocks_reply(blocks)


def keys_of(reply: bytes) -> list[tuple[int, uuid.UUID]]:
    """A retry-group reply in peer form (replies.keys_reply) as [(key, id)]."""
    lines = reply.split(b"\r\n")[1:-1]
    return [(int(key), uuid.UUID(job_id.decode())) for key, job_id in
            (line.split(b" ") for line in lines)]


def heads_of(reply: bytes) -> dict[str, int]:
    """A peek reply (replies.heads_reply) as {name: key}."""
    lines = reply.split(b"\r\n")[1:-1]
    return {name.decode("latin-1"): int(key)
            for name, key in (line.split(b" ") for line in lines)}


def choose_lease(heads: dict[str | None, dict[str, int]]) -> tuple[str, str | None] | None:
    """Where to lease from, given each process's best ready key per name ({process:
    {name: key}}, this process as None): a uniformly random name among those ready
    anywhere (docs/protocol.md, "lease"), then the process holding its best job, this one on a tie."""
    best: dict[str, tuple[int, bool, str]] = {}
    for where, names in heads.items():
        for name, key in names.items():
            candidate = (key, where is not None, where or "")
            if name not in best or candidate < best[name]:
                best[name] = candidate
    if not best:
        return None
    name = random.choice(sorted(best))
    key, remote, where = best[name]
    return name, (where if remote else None)


def handover_from(reply: bytes) -> Handover:
    """A peer-form lease reply (replies.peer_lease_reply) as this gateway's handover:
    the client gets the plain lease reply; the release gives that attempt back."""
    words, payload = data_reply_fields(reply)
    job_id = uuid.UUID(words[0].decode())
    name, ttr_ms = words[1].decode("latin-1"), int(words[2])
    release = core.ReleaseAttempt(job_id, int(words[3]), State(int(words[4])), int(words[5]))
    return Handover(replies.lease_reply(job_id, name, ttr_ms, payload), release)
