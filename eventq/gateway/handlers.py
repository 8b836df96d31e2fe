"""This process's answer to each workq request, one function per request type
(docs/protocol.md, "Commands").

State changes become commands through ``engine.submit`` (written to the log, applied by
the processor, then answered); reads come from the indexes and the table of the
partitions this process owns. Every failure is an ``EventqError`` whose ``reply`` is
the answer.

[eventq] A token with a prefix (docs/security.md, "Queue-name prefixes"): each answer is
for the request's caller (eventq/state/callers.py). Commands it issues carry its prefix
(``scope``), so a job or recurrence outside it is ``-NOT-FOUND`` where the command is
applied (the core decides); reads of a job outside it are ``-NOT-FOUND`` here; listings
see only its queues. Queue names it names are checked before (6a, the parser).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import cast

from eventq import core
from eventq.core import Job, State
from eventq.core.job import is_final, ready_time_ms, shown_group, waiting_count
from eventq.core.machine import Accepted, Ignored, Rejected
from eventq.core.recurrence import Recurrence
from eventq.errors import UNKNOWN_COMMAND, ClientError, EventqError, NotFound, ServerError, Timeout
from eventq.gateway import ports
from eventq.gateway.leasing import Handover, Leasing
from eventq.limits import RETRY_WAVE_JOBS
from eventq.protocol import replies
from eventq.protocol import requests as rq
from eventq.state import callers
from eventq.state.waiters import Applied

MS = 1000.0
# How often a run held by a lease looks whether that attempt ended without a result
# (given back: no client received the lease), so it need not wait out the TTR.
RUN_ATTEMPT_CHECK_S = 0.1
PROTOCOL_UUID_VERSION = 4  # add/schedule/run require v4, so no other id can exist


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def view_of(job: Job) -> replies.JobView:
    return replies.JobView(
        id=job.id,
        name=job.name,
        ttr_ms=job.ttr_ms,
        ttl_ms=job.ttl_ms,
        payload=job.payload,
        max_attempts=job.max_attempts,
        attempts=job.attempts,
        max_fails=job.max_fails,
        fails=job.fails,
        priority=job.priority,
        state=int(job.state),
        created_ms=job.created_ms,
        scheduled_ms=ready_time_ms(job),
        after=len(job.upstreams),  # [eventq] -after: 0 for a job without upstreams
        waiting=waiting_count(job),
        tags=job.tags,  # [eventq] -tags: () for a job without
        group=shown_group(job),  # [eventq] a FAILED job's group, unless a workq one
    )


def pinned_view(pinned: ports.PinnedJobs, job_id: uuid.UUID) -> replies.JobView:
    """The view of a job ``pinned`` has (``pinned.has``)."""
    return view_of(cast(Job, pinned.get(job_id)))


def _seen(job: Job | None) -> Job | None:
    """``job``, or None when its queue is outside the caller's prefix: absent to it
    (docs/security.md, "Queue-name prefixes": ``-NOT-FOUND``)."""
    return job if job is None or callers.sees(job.name) else None


def result_of(job: Job) -> bytes:
    return replies.result_reply(job.id, bool(job.result_ok), job.result or b"")


def ok_or_error(applied: Applied) -> bytes:
    outcome = applied.outcome
    if isinstance(outcome, Accepted):
        return replies.ok()
    if isinstance(outcome, Rejected):
        raise outcome.error
    raise ServerError(f"command was not applied ({outcome.reason})")


def recurrence_reply(applied: Applied) -> bytes:
    """recur and unrecur: ``+OK`` once applied, or the core's refusal (``-NOT-FOUND``:
    unrecur of none)."""
    outcome = applied.outcome
    if isinstance(outcome, Rejected):
        raise outcome.error
    if isinstance(outcome, Ignored):
        raise ServerError(f"command was not applied ({outcome.reason})")
    return replies.ok()


def recurrence_view(record: Recurrence) -> replies.RecurrenceView:
    d = record.definition
    return replies.RecurrenceView(
        d.name, d.job_name, d.ttr_ms, d.ttl_ms, d.every_ms, d.payload, d.max_attempts,
        d.max_fails, d.priority, d.created_ms, record.next_ms, d.backoff_ms, d.tags)


class LocalAnswers:
    """This process's answer to each request, from the partitions it owns: one method
    per request type, and the peer forms another eventq process asks for (merged there,
    eventq/gateway/cluster_answers.py). One per process; eventq/gateway/dispatch.py
    picks the answer a request gets."""

    def __init__(
        self,
        engine: ports.Engine,
        stats: ports.Stats,
        leasing: Leasing,
        clock_ms: Callable[[], int] = wall_clock_ms,
        bulk_status: Callable[[], Awaitable[list[tuple[int, int, int]]]] | None = None,
    ) -> None:
        self.engine = engine
        self.bulk_status = bulk_status  # streams/faust/admission.py: BulkAdmitter.status
        self.index = engine.index
        self.waiters = engine.waiters
        self.stats = stats  # .active_clients, .evicted_jobs
        self.leasing = leasing
        self.clock_ms = clock_ms

    async def peer(self, request: rq.Peer) -> bytes:
        return replies.ok()  # the server marks the connection (gateway/server.py)

    async def peek(self, request: rq.Peek) -> bytes:
        """Where each name's best ready job of this process stands (docs/architecture.md,
        "Scaling out")."""
        if not self.engine.ready.is_set():
            return replies.heads_reply({})
        heads = self.index.ready_heads(request.names, self.clock_ms(), self.engine.claimed)
        return replies.heads_reply(heads)

    async def confirm(self, request: rq.Confirm) -> bytes:
        """A peer takes the job claimed for its lease (eventq/state/offers.py): +OK while it
        is still offered, else -NOT-FOUND (withdrawn: the claim was given back)."""
        if not self.engine.offers.confirm(request.id, request.claim):
            raise NotFound()
        return replies.ok()

    async def peers_only(self, request: rq.Confirm | rq.Outcome) -> bytes:
        """Only another eventq process may take an offered claim or ask for a handed-over
        reply; to a client these verbs do not exist."""
        raise ClientError(UNKNOWN_COMMAND)

    async def outcome(self, request: rq.Outcome) -> bytes:
        """A peer's command applied here after its partition moved to this process
        (docs/architecture.md, "Abandoned commands"): ``+OK <its reply line>``, or
        -TIMEOUT when it is not applied here within the request's wait."""
        reply = await self.engine.waiters.handed_over_reply(
            request.node, request.request_id, request.wait_ms / MS)
        if reply is None:
            raise Timeout()
        return replies.handed_over_reply(reply)

    # --- writes ------------------------------------------------------------------

    async def add(self, request: rq.Add) -> bytes:
        command = core.Add(
            request.id, request.name, request.ttr_ms, request.ttl_ms, request.payload,
            request.priority, request.max_attempts, request.max_fails, request.backoff_ms,
            after=request.after, tags=request.tags, scope=callers.prefix(),
        )
        return ok_or_error(await self.engine.submit(command))

    async def schedule(self, request: rq.Schedule) -> bytes:
        command = core.Schedule(
            request.id, request.name, request.ttr_ms, request.ttl_ms, request.time_ms,
            request.payload, request.priority, request.max_attempts, request.max_fails,
            request.backoff_ms, after=request.after, tags=request.tags, scope=callers.prefix(),
        )
        return ok_or_error(await self.engine.submit(command))

    async def complete(self, request: rq.Complete) -> bytes:
        command = core.Complete(request.id, request.result, callers.prefix())
        return ok_or_error(await self.engine.submit(command))

    async def fail(self, request: rq.Fail) -> bytes:
        command = core.Fail(request.id, request.result, request.group, callers.prefix())
        return ok_or_error(await self.engine.submit(command))

    async def retry(self, request: rq.Retry) -> bytes:
        """[eventq] A FAILED job runs again under its id (docs/workflows.md, "retry"): the
        core refuses any other state, -NOT-FOUND."""
        command = core.Retry(request.id, request.delay_ms, callers.prefix())
        return ok_or_error(await self.engine.submit(command))

    async def retry_ids(self, ids: Sequence[uuid.UUID]) -> int:
        """Retry each of ``ids`` (this process's), a wave of them in flight at once (the
        engine batches what goes to one partition); how many were retried. A job that changed
        meanwhile (no longer FAILED, or gone) is -NOT-FOUND and not counted."""
        retried, scope = 0, callers.prefix()
        for start in range(0, len(ids), RETRY_WAVE_JOBS):  # limits.RETRY_WAVE_JOBS: why
            outcomes = await asyncio.gather(
                *(self.engine.submit(core.Retry(job_id, 0, scope))
                  for job_id in ids[start:start + RETRY_WAVE_JOBS]),
                return_exceptions=True)
            retried += sum(1 for applied in outcomes
                           if isinstance(applied, Applied) and isinstance(applied.outcome, Accepted))
        return retried

    async def retry_group(self, request: rq.RetryGroup) -> bytes:
        """[eventq] retry-group: up to ``count`` FAILED jobs of the group, oldest
        failure first, as the group stands now (docs/workflows.md, "retry-group"); an
        empty or unknown group retries none."""
        await self.engine.wait_ready()
        ids = self.index.failed_page(request.group, 0, request.count, callers.prefix())
        return replies.retried_reply(await self.retry_ids(ids))

    async def delete(self, request: rq.Delete) -> bytes:
        if request.id.version != PROTOCOL_UUID_VERSION:
            raise NotFound()  # [eventq] no such job can exist; nothing to log
        return ok_or_error(await self.engine.submit(core.Delete(request.id, callers.prefix())))

    async def touch(self, request: rq.Touch) -> bytes:
        """A worker's heartbeat (docs/protocol.md, "eventq extensions"). The command names the attempt that
        is LEASED now, so a touch racing a timeout and a new lease of the job is refused
        (-NOT-FOUND) rather than extending the new holder's lease."""
        await self.engine.wait_ready()
        entry = self.index.entry(request.id)
        if entry is None or entry.state is not State.LEASED:
            raise NotFound()
        command = core.Touch(request.id, entry.attempts, request.ttr_ms, callers.prefix())
        return ok_or_error(await self.engine.submit(command))

    async def pause_or_resume(self, request: rq.Pause | rq.Resume) -> bytes:
        """Written to every partition; applying it names the queue (JobIndex.set_paused)."""
        command = core.Pause if isinstance(request, rq.Pause) else core.Resume
        await self.engine.submit_everywhere(command(request.name))
        return replies.ok()

    async def recur(self, request: rq.Recur) -> bytes:
        """[eventq] Define or replace a recurrence (docs/workflows.md, "Recurring jobs"): a command
        keyed ``recur:<name>``, applied by its partition's owner (this
        process: a cluster forwards it here)."""
        command = core.Recur(
            request.name, request.job_name, request.ttr_ms, request.ttl_ms, request.every_ms,
            request.payload, request.priority, request.max_attempts, request.max_fails,
            request.backoff_ms, request.tags, callers.prefix(),
        )
        return recurrence_reply(await self.engine.submit(command))

    async def unrecur(self, request: rq.Unrecur) -> bytes:
        """[eventq] The recurrence is gone (``-NOT-FOUND`` if there was none)."""
        command = core.Unrecur(request.name, callers.prefix())
        return recurrence_reply(await self.engine.submit(command))

    def recurrence_views(self, offset: int, limit: int) -> list[replies.RecurrenceView]:
        """This process's recurrences, by name bytewise, ``offset`` to ``offset + limit``."""
        names = self.index.recurrence_names(callers.prefix())[offset:offset + limit]
        records = (self.engine.recurrence(name) for name in names)
        return [recurrence_view(record) for record in records if record is not None]

    async def inspect_recurring(self, request: rq.InspectRecurring) -> Iterator[bytes]:
        await self.engine.wait_ready()
        views = self.recurrence_views(request.offset, request.limit)
        return replies.recurrence_blocks_stream(len(views), iter(views))

    # --- blocking ----------------------------------------------------------------

    def _final_now(self, job_id: uuid.UUID) -> tuple[bool, Job | None]:
        job = _seen(self.engine.job(job_id))
        return (job is None or is_final(job)), job

    async def _wait_final(self, job_id: uuid.UUID, timeout_s: float) -> tuple[bool, Job | None]:
        return await self.waiters.wait_final(job_id, timeout_s, lambda: self._final_now(job_id))

    async def result(self, request: rq.Result) -> bytes:
        job = _seen(self.engine.job(request.id))
        if job is None:
            raise NotFound()
        if not is_final(job):
            # A stopping process ends the wait with -TIMEOUT (docs/operations.md,
            # "Planned restarts"): the client asks again, at another process.
            done, job = await self.leasing.unless_stopping(
                self._wait_final(request.id, request.wait_timeout_ms / MS), (False, None))
            if not done:
                raise Timeout()
            if job is None:
                raise NotFound()  # deleted or expired while waiting
        return result_of(job)

    async def run(self, request: rq.Run) -> bytes:
        """Enqueue, wait for a worker's result, and always delete the job at the end."""
        command = core.Add(
            request.id, request.name, request.ttr_ms, 0, request.payload, request.priority,
            scope=callers.prefix())
        # A run's job has no TTL and lives only as long as the run (spec: it is deleted
        # when run returns, whatever the outcome): an add that may still take effect
        # after the run gave up is followed by its delete, or the job would stay for good.
        ok_or_error(await self.engine.submit(command, on_abandoned=lambda at: (
            self.leasing.compensate(core.Delete(request.id), "the run's job stays until deleted"))))
        try:
            done, job = await self._wait_final(request.id, request.wait_timeout_ms / MS)
            if not done:
                done, job = await self._wait_attempt(request.id)
            if not done or job is None:
                raise Timeout()
            return result_of(job)
        finally:
            await self._delete_quietly(request.id)

    async def _wait_attempt(self, job_id: uuid.UUID) -> tuple[bool, Job | None]:
        """Leased when a run's wait ended: its result until that attempt's TTR deadline
        (docs/protocol.md, "run"; a touch moves it), or not, as soon as the attempt ends without one.
        It is given back when no client received the lease (with several processes,
        most likely a lease another process's waiter took after its client had gone; CI
        2026-11-27: a 300 ms run took its whole 60 s TTR to say -TIMEOUT)."""
        entry = self.index.entry(job_id)
        attempt = entry.attempts if entry is not None else None
        while (entry is not None and entry.state is State.LEASED
               and entry.attempts == attempt and entry.lease_deadline_ms):
            remaining_s = (entry.lease_deadline_ms - self.clock_ms()) / MS
            if remaining_s <= 0:
                return False, None
            done, job = await self._wait_final(job_id, min(remaining_s, RUN_ATTEMPT_CHECK_S))
            if done:
                return done, job
            entry = self.index.entry(job_id)
        return self._final_now(job_id)  # (a result may have come since the last wait)

    async def _delete_quietly(self, job_id: uuid.UUID) -> None:
        try:
            await asyncio.shield(self.engine.submit(core.Delete(job_id)))
        except EventqError:
            pass  # already gone, or Kafka is down: a run job without TTL stays visible

    async def lease(self, request: rq.Lease, peer_form: bool = False) -> Handover:
        leasing = self.leasing
        return await leasing.lease_loop(
            request, lambda names: leasing.take_here(names, peer_form), leasing.wait_here
        )

    async def lease_for_peer(self, request: rq.Lease) -> Handover:
        return await self.lease(request, peer_form=True)

    # --- inspect -----------------------------------------------------------------

    async def inspect_server(self, request: rq.InspectServer) -> bytes:
        return replies.server_reply(
            self.stats.active_clients, self.stats.evicted_jobs, self.engine.started_ms
        )

    def queue_view(self, name: str, now_ms: int) -> replies.QueueView:
        ready, scheduled = self.index.lengths(name, now_ms)
        return replies.QueueView(name, ready, scheduled, self.index.is_paused(name),
                                 self.index.waiting_len(name))

    async def inspect_queues(self, request: rq.InspectQueues) -> bytes:
        await self.engine.wait_ready()
        now_ms = self.clock_ms()
        names = self.index.queue_names(callers.prefix())
        names = names[request.offset : request.offset + request.limit]
        return replies.queue_blocks([self.queue_view(name, now_ms) for name in names])

    def _known_queue(self, name: str) -> None:
        if not self.index.known(name):
            raise NotFound()

    async def inspect_queue(self, request: rq.InspectQueue) -> bytes:
        await self.engine.wait_ready()
        self._known_queue(request.name)
        return replies.queue_blocks([self.queue_view(request.name, self.clock_ms())])

    def _jobs(self, ids: Sequence[uuid.UUID]) -> Iterator[bytes]:
        """The job blocks of ``ids``, streamed from a snapshot: up to 100 jobs of 1 MiB
        each (docs/architecture.md, "Limits") are never held in memory at once."""
        pinned = self.engine.pinned(ids)
        present = [job_id for job_id in ids if pinned.has(job_id)]  # decoded once, below
        views = (pinned_view(pinned, job_id) for job_id in present)
        return replies.job_blocks_stream(len(present), views)

    async def inspect_jobs(self, request: rq.InspectJobs) -> Iterator[bytes]:
        await self.engine.wait_ready()
        self._known_queue(request.name)
        ids = self.index.ready_page(request.name, self.clock_ms(), request.offset, request.limit)
        return self._jobs(ids)

    async def inspect_scheduled_jobs(self, request: rq.InspectScheduledJobs) -> Iterator[bytes]:
        await self.engine.wait_ready()
        self._known_queue(request.name)
        ids = self.index.scheduled_page(
            request.name, self.clock_ms(), request.offset, request.limit)
        return self._jobs(ids)

    async def inspect_waiting_jobs(self, request: rq.InspectWaitingJobs) -> Iterator[bytes]:
        """[eventq] The queue's WAITING jobs in lease order (docs/workflows.md, "Dependencies"): as
        inspect jobs."""
        await self.engine.wait_ready()
        self._known_queue(request.name)
        return self._jobs(self.index.waiting_page(request.name, request.offset, request.limit))

    async def inspect_tagged(self, request: rq.InspectTagged) -> Iterator[bytes]:
        """[eventq] Live jobs with the tag, in any state, by created time, then id
        (docs/workflows.md, "Tags"); none: ``+OK 0`` (a tag exists only through its
        jobs, never -NOT-FOUND)."""
        await self.engine.wait_ready()
        return self._jobs(self.index.tagged_page(request.tag, request.offset, request.limit,
                                                 callers.prefix()))

    async def inputs(self, request: rq.Inputs) -> Iterator[bytes]:
        """[eventq] The results a job's finished upstreams handed it, in -after order
        (docs/workflows.md, "Inputs"), read with the job from one snapshot and
        written one upstream at a time (up to 100 results of 1 MiB)."""
        await self.engine.wait_ready()
        pinned = self.engine.pinned([request.id])
        job = _seen(pinned.get(request.id))
        if job is None:
            raise NotFound()
        count, found = pinned.inputs(job) if job.upstreams else (0, iter(()))
        views = (replies.InputView(upstream, given.completed, given.result)
                 for upstream, given in found)
        return replies.inputs_reply_stream(count, views)

    async def inspect_job(self, request: rq.InspectJob) -> bytes:
        await self.engine.wait_ready()
        job = self.engine.job(request.id) if request.id.version == PROTOCOL_UUID_VERSION else None
        job = _seen(job)
        if job is None:
            raise NotFound()
        return replies.job_blocks([view_of(job)])

    async def edges(self, request: rq.Edges) -> bytes:
        """[eventq] internal (the dashboard's job page): the job's upstreams, from its
        record with the outcome it holds of each, then up to ``limit`` dependents
        registered with it, from the registrations under its id in its partition
        (eventq/core/workflow.py): both the owner's, like ``inspect job``. An absent
        job has no upstreams and may still have dependents waiting for it."""
        await self.engine.wait_ready()
        job = self.engine.job(request.id) if request.id.version == PROTOCOL_UUID_VERSION else None
        upstreams = [] if job is None else [(link.id, link.outcome.word) for link in job.upstreams]
        return replies.edges_reply(upstreams, self.engine.dependents(request.id, request.limit))

    async def inspect_bulk(self, request: rq.InspectBulk) -> bytes:
        """The bulk lane's backlog per partition (eventq extension; docs/architecture.md,
        "Lanes")."""
        await self.engine.wait_ready()
        if self.bulk_status is None:
            return replies.bulk_blocks([])
        try:
            async with asyncio.timeout(self.engine.write_timeout_s):
                status = await self.bulk_status()
        except Exception as error:
            raise ServerError(f"Kafka did not say where eventq.bulk ends "
                              f"({type(error).__name__}); try again") from None
        return replies.bulk_blocks([replies.BulkView(*row) for row in status])

    async def inspect_digest(self, request: rq.InspectDigest) -> bytes:
        await self.engine.wait_ready()
        return replies.digest_reply(await self.engine.digest())

    async def inspect_failed(self, request: rq.InspectFailed) -> bytes:
        """[eventq] The failure groups with FAILED jobs, by name bytewise, and how many
        each holds (docs/workflows.md, "Failure groups and retry")."""
        await self.engine.wait_ready()
        groups = self.index.failed_groups(callers.prefix())
        groups = groups[request.offset : request.offset + request.limit]
        return replies.failed_reply(groups)

    async def inspect_failed_jobs(self, request: rq.InspectFailedJobs) -> Iterator[bytes]:
        """[eventq] A group's FAILED jobs, oldest failure first (failure time, then
        id); an empty or unknown group: ``+OK 0``."""
        await self.engine.wait_ready()
        return self._jobs(self.index.failed_page(request.group, request.offset, request.limit,
                                                 callers.prefix()))

    # --- peer forms (docs/architecture.md, "Scaling out") --------------------------

    def ordered_jobs(self, name: str, kind: type, offset: int, limit: int) -> bytes:
        """A page of ``inspect jobs`` (or scheduled-jobs, [eventq] waiting-jobs, tagged,
        ``name`` being the tag, and failed-jobs, ``name`` being the group) in peer form:
        each block carries its place, for the asking gateway to merge pages by."""
        now_ms = self.clock_ms()
        if kind is rq.InspectTagged:  # listings: only the caller's queues (security.md)
            keyed = self.index.tagged_page_keys(name, offset, limit, callers.prefix())
        elif kind is rq.InspectJobs:
            keyed = self.index.ready_page_keys(name, now_ms, offset, limit)
        elif kind is rq.InspectFailedJobs:  # name: the group
            keyed = self.index.failed_page_keys(name, offset, limit, callers.prefix())
        elif kind is rq.InspectWaitingJobs:
            keyed = self.index.waiting_page_keys(name, offset, limit)
        else:
            keyed = self.index.scheduled_page_keys(name, now_ms, offset, limit)
        pinned = self.engine.pinned([job_id for _, job_id in keyed])
        return replies.ordered_job_blocks(
            [(key, pinned_view(pinned, job_id)) for key, job_id in keyed if pinned.has(job_id)]
        )

    async def ordered_jobs_for_peer(
        self, request: rq.InspectJobs | rq.InspectScheduledJobs | rq.InspectWaitingJobs
    ) -> bytes:
        await self.engine.wait_ready()
        self._known_queue(request.name)
        return self.ordered_jobs(request.name, type(request), request.offset, request.limit)

    async def tagged_for_peer(self, request: rq.InspectTagged) -> bytes:
        """[eventq] A page of ``inspect tagged`` in peer form (``+OK 0`` for a tag no job
        here has: the asker merges every process's)."""
        await self.engine.wait_ready()
        return self.ordered_jobs(request.tag, rq.InspectTagged, request.offset, request.limit)

    async def failed_jobs_for_peer(self, request: rq.InspectFailedJobs) -> bytes:
        """[eventq] A page of a group's FAILED jobs in peer form (their keys: failure
        time and id, the same in every process), for the asking gateway to merge."""
        await self.engine.wait_ready()
        return self.ordered_jobs(request.group, rq.InspectFailedJobs, request.offset,
                                 request.limit)

    async def failed_keys_for_peer(self, request: rq.RetryGroup) -> bytes:
        """[eventq] retry-group asked by another process: not a retry, the keys of this
        process's ``count`` oldest failures of the group (``<key> <id>`` lines): the
        asker picks the cluster's oldest and retries them where they are."""
        await self.engine.wait_ready()
        keyed = self.index.failed_page_keys(request.group, 0, request.count, callers.prefix())
        return replies.keys_reply(keyed)

    async def digest_for_peer(self, request: rq.InspectDigest) -> bytes:
        await self.engine.wait_ready()
        state, served = await self.engine.digest_part()
        return replies.digest_part_reply(state.sum, state.count, served)
