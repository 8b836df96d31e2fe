"""Which answer a parsed request gets: this process's (eventq/gateway/handlers.py), or,
with other eventq processes in the group, the cluster's (eventq/gateway/cluster_answers.py:
the owner's for a request about one job, every process's for one over all jobs;
docs/architecture.md, "Scaling out"). A request from another process (a ``peer``
connection) is answered here, in the peer form where the asker merges, and never
forwarded again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from eventq import core
from eventq.errors import EventqError, PartitionMoved, Unserved
from eventq.gateway import ports
from eventq.gateway.cluster_answers import ClusterAnswers
from eventq.gateway.handlers import LocalAnswers
from eventq.gateway.leasing import Handover, Leasing
from eventq.protocol import requests as rq

# A reply: bytes, a lease's hand-over, or for long replies the pieces to write in turn.
Reply = bytes | Handover | Iterator[bytes]
Answer = Callable[[Any], Awaitable[Reply]]

# A request refused because its partition is not served here right now (``Unserved``:
# moving, this process or the owner still recovering, the owner's listener closed) is
# asked again, its owner looked up anew, for this long from its arrival, before the
# client hears the refusal (docs/operations.md, "Planned restarts"). Within a forward's own
# deadline (eventq/run/serve.py: twice the write timeout + 5 s), so a process asking
# this one never gives up on an answer still coming.
REDISPATCH_FOR_S = 5.0
REDISPATCH_PAUSE_S = 0.1
# Those whose answer writes one command at most, after which nothing can refuse it so:
# a ``run`` (an add, a wait, a delete) or a ``retry-group`` (many) could have written
# before the refusal.
REDISPATCHED = frozenset({rq.Add, rq.Schedule, rq.Complete, rq.Fail, rq.Delete, rq.Touch,
                          rq.Lease, rq.Retry, rq.Result, rq.InspectJob, rq.Inputs, rq.Edges})
# Those whose reply is their one command's outcome alone: when the command's partition
# moved before this process applied it, the new owner, which applies it, gives the reply
# (docs/architecture.md, "Abandoned commands").
REPLIED_BY_NEW_OWNER = frozenset({rq.Add, rq.Schedule, rq.Complete, rq.Fail, rq.Delete,
                                  rq.Touch})


class Gateway:
    """Answers parsed requests. One per process; connections share it."""

    def __init__(
        self,
        local: LocalAnswers,
        leasing: Leasing,
        cluster_answers: ClusterAnswers | None = None,
    ) -> None:
        self._leasing = leasing
        self._cluster_answers = cluster_answers  # None: this process alone
        self._answers: dict[type, Answer] = {
            rq.Add: local.add,
            rq.Schedule: local.schedule,
            rq.Run: local.run,
            rq.Result: local.result,
            rq.Lease: local.lease,
            rq.Complete: local.complete,
            rq.Fail: local.fail,
            rq.Retry: local.retry,
            rq.RetryGroup: local.retry_group,
            rq.InspectFailed: local.inspect_failed,
            rq.InspectFailedJobs: local.inspect_failed_jobs,
            rq.Delete: local.delete,
            rq.Touch: local.touch,
            rq.Pause: local.pause_or_resume,
            rq.Resume: local.pause_or_resume,
            rq.Recur: local.recur,
            rq.Unrecur: local.unrecur,
            rq.InspectRecurring: local.inspect_recurring,
            rq.InspectServer: local.inspect_server,
            rq.InspectQueues: local.inspect_queues,
            rq.InspectQueue: local.inspect_queue,
            rq.InspectJobs: local.inspect_jobs,
            rq.InspectScheduledJobs: local.inspect_scheduled_jobs,
            rq.InspectWaitingJobs: local.inspect_waiting_jobs,
            rq.InspectTagged: local.inspect_tagged,
            rq.InspectJob: local.inspect_job,
            rq.Inputs: local.inputs,
            rq.Edges: local.edges,
            rq.InspectDigest: local.inspect_digest,
            rq.InspectBulk: local.inspect_bulk,
            rq.Peer: local.peer,
            rq.Peek: local.peek,
            rq.Confirm: local.peers_only,
            rq.Outcome: local.peers_only,
        }
        # Asked by another eventq process (a `peer` connection): this process's own
        # partitions only, and replies the asker merges carry what it merges by.
        self._peer_answers: dict[type, Answer] = {
            rq.Lease: local.lease_for_peer,
            rq.InspectJobs: local.ordered_jobs_for_peer,
            rq.InspectScheduledJobs: local.ordered_jobs_for_peer,
            rq.InspectWaitingJobs: local.ordered_jobs_for_peer,
            rq.InspectTagged: local.tagged_for_peer,
            rq.InspectFailedJobs: local.failed_jobs_for_peer,
            rq.RetryGroup: local.failed_keys_for_peer,
            rq.InspectDigest: local.digest_for_peer,
            rq.Confirm: local.confirm,
            rq.Outcome: local.outcome,
        }

    @property
    def cluster(self) -> ports.Cluster | None:
        """The other processes, if any (the dashboard says whose figures it shows)."""
        return None if self._cluster_answers is None else self._cluster_answers.cluster

    async def handle(self, request: object, peer: bool = False) -> Reply:
        """The reply: bytes, or for long replies an iterator of pieces to write in turn.
        ``peer``: the request comes from another eventq process (never forwarded).

        Refused while partitions move (``Unserved``), it is answered again
        (``REDISPATCH_FOR_S``): nothing happened, so retrying it is safe, and the client
        would only have to do it itself. A write Kafka did not take within the write
        timeout is answered at once: that deadline is the user's."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        while True:
            try:
                return await self._answer(request, peer)
            except Unserved as error:
                if (type(request) not in REDISPATCHED or self._leasing.stopping.is_set()
                        or loop.time() - began >= REDISPATCH_FOR_S):
                    return error.reply
            except PartitionMoved as moved:
                return await self._reply_after_move(request, moved)
            except EventqError as error:
                return error.reply
            await asyncio.sleep(REDISPATCH_PAUSE_S)

    async def _answer(self, request: object, peer: bool) -> Reply:
        if peer:
            answer = self._peer_answers.get(type(request))
            if answer is not None:
                return await answer(request)
        elif self._cluster_answers is not None:
            routed = await self._cluster_answers.answer(request)
            if routed is not None:
                return routed
        return await self._answers[type(request)](request)

    async def _reply_after_move(self, request: object, moved: PartitionMoved) -> bytes:
        if type(request) in REPLIED_BY_NEW_OWNER and self._cluster_answers is not None:
            reply = await self._cluster_answers.reply_after_move(moved)
            if reply is not None:
                return reply
        return moved.reply

    def stopping(self) -> None:
        """This process stops: waiting leases end (eventq/gateway/leasing.py)."""
        self._leasing.stopping.set()

    async def settle(self, timeout_s: float) -> None:
        """Until the give-backs and compensations written so far are in Kafka, at most
        ``timeout_s``: a stop does not close the producer under them."""
        await self._leasing.settle(timeout_s)

    def give_back(self, release: core.ReleaseAttempt) -> None:
        """A lease's attempt no client received (eventq/gateway/server.py)."""
        self._leasing.give_back(release)
