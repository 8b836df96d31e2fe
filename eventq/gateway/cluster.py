"""Many eventq processes as one queue (docs/architecture.md, "Scaling out").

Each process owns some partitions (faust's assignment). A request for a job is answered
by the process owning the job's partition: the gateway a client reached forwards it
there (eventq/gateway/peers.py says why forwarding) and relays the reply. Figures over
all jobs (``inspect queues``, ``inspect jobs``, ``inspect digest``) combine what every
process reports for its own partitions; the merge functions here are pure.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eventq.core.partitioner import job_key, partition_for_key
from eventq.errors import EventqError, ServerError
from eventq.gateway.peers import Peers
from eventq.protocol import requests as rq
from eventq.protocol.encode import encode_request
from eventq.protocol.replies import QueueView
from eventq.protocol.reply_reader import Block, Shape, parse_blocks
from eventq.state import callers

# How each request's reply is framed (docs/protocol.md, "Connections and framing").
SHAPES: dict[type, Shape] = {
    rq.Add: Shape.STATUS, rq.Schedule: Shape.STATUS, rq.Complete: Shape.STATUS,
    rq.Fail: Shape.STATUS, rq.Delete: Shape.STATUS, rq.Peer: Shape.STATUS,
    rq.Touch: Shape.STATUS, rq.Pause: Shape.STATUS, rq.Resume: Shape.STATUS,
    rq.Confirm: Shape.STATUS, rq.Outcome: Shape.STATUS, rq.Recur: Shape.STATUS,
    rq.Unrecur: Shape.STATUS, rq.Retry: Shape.STATUS, rq.RetryGroup: Shape.LINES,
    rq.InspectFailed: Shape.BLOCKS, rq.InspectFailedJobs: Shape.BLOCKS,
    rq.Run: Shape.DATA, rq.Result: Shape.DATA, rq.Lease: Shape.DATA, rq.Inputs: Shape.DATA,
    rq.InspectServer: Shape.BLOCKS, rq.InspectQueues: Shape.BLOCKS,
    rq.InspectQueue: Shape.BLOCKS, rq.InspectJobs: Shape.BLOCKS,
    rq.InspectScheduledJobs: Shape.BLOCKS, rq.InspectWaitingJobs: Shape.BLOCKS,
    rq.InspectTagged: Shape.BLOCKS, rq.InspectJob: Shape.BLOCKS,
    rq.InspectBulk: Shape.BLOCKS, rq.InspectDigest: Shape.LINES, rq.Peek: Shape.LINES,
    rq.Edges: Shape.LINES, rq.InspectRecurring: Shape.BLOCKS, rq.As: Shape.STATUS,
}

# Requests about one job: answered by the owner of the job's partition.
KEYED = (rq.Add, rq.Schedule, rq.Run, rq.Result, rq.Complete, rq.Fail, rq.Delete,
         rq.InspectJob, rq.Touch, rq.Inputs, rq.Edges, rq.Retry)

MS = 1000.0
PAGE_LIMIT = 100  # the protocol's largest limit: longer reads page


def wait_s(request: object) -> float:
    """How long the owner may legitimately hold the request (blocking ones)."""
    if isinstance(request, (rq.Lease, rq.Result)):
        return request.wait_timeout_ms / MS
    if isinstance(request, rq.Run):
        return (request.wait_timeout_ms + request.ttr_ms) / MS
    return 0.0


def raise_if_error(reply: bytes) -> bytes:
    """A peer's error reply as the error it is (relayed to the client as is)."""
    if reply[:1] == b"-":
        raise RelayedError(reply)
    return reply


class RelayedError(EventqError):
    """An error reply of another process, answered to the client unchanged."""

    def __init__(self, reply: bytes) -> None:
        super().__init__(reply[1:-2].decode("latin-1"))
        self._reply = reply

    @property
    def reply(self) -> bytes:
        return self._reply


class Cluster:
    """Who owns what, and asking them. With no other process it is never consulted."""

    def __init__(
        self,
        *,
        self_address: str,
        partitions: int,
        owner_of: Callable[[int], str | None],
        members: Callable[[], Iterable[str]],
        peers: Peers,
        request_timeout_s: float,
    ) -> None:
        self.self_address = self_address
        self.partitions = partitions
        self._owner_of = owner_of
        self._members = members
        self.peers = peers
        self.request_timeout_s = request_timeout_s

    def others(self) -> list[str]:
        """The other processes of the consumer group, by gateway address."""
        return sorted(set(self._members()) - {self.self_address})

    def remote_owner(self, job_id: uuid.UUID) -> str | None:
        """The address of the other process owning the job's partition, or None when
        it is this one (or nobody yet: then this process answers "retry")."""
        return self.remote_owner_of_key(job_key(job_id))

    def remote_owner_of_key(self, key: bytes) -> str | None:
        """The same for any Kafka key ([eventq] a recurrence's ``recur:<name>``)."""
        return self.remote_owner_of_partition(partition_for_key(key, self.partitions))

    def remote_owner_of_partition(self, partition: int) -> str | None:
        owner = self._owner_of(partition)
        return None if owner is None or owner == self.self_address else owner

    async def ask(self, address: str, request: object) -> bytes:
        """The complete reply of ``address`` to ``request`` (errors included), served
        there for the client this process serves it for (eventq/state/callers.py: its
        scope, and its name on the commands written; docs/security.md, "Queue-name
        prefixes")."""
        timeout_s = self.request_timeout_s + wait_s(request)
        return await self.peers.exchange(
            address, encode_request(request), SHAPES[type(request)], timeout_s,
            callers.current(),
        )

    async def ask_others(self, request: object) -> list[bytes]:
        """Every other process's reply; any failure to answer fails the whole."""
        others = self.others()
        return list(await asyncio.gather(*(self.ask(a, request) for a in others)))

    async def pages(
        self, address: str, page: Callable[[int, int], object], upto: int
    ) -> list[Block] | None:
        """Blocks 0..upto of a paged ``inspect`` from ``address``; None if it answers
        ``-NOT-FOUND`` (the queue is unknown there)."""
        blocks: list[Block] = []
        while len(blocks) < upto:
            limit = min(PAGE_LIMIT, upto - len(blocks))
            reply = await self.ask(address, page(len(blocks), limit))
            if reply.startswith(b"-NOT-FOUND"):
                return None
            got = parse_blocks(raise_if_error(reply))
            blocks.extend(got)
            if len(got) < limit:
                break
        return blocks

    async def pages_of_others(
        self, page: Callable[[int, int], object], upto: int
    ) -> list[list[Block] | None]:
        others = self.others()
        return list(await asyncio.gather(*(self.pages(a, page, upto) for a in others)))


# --- merges (pure) ---------------------------------------------------------------


def queue_views(blocks: Iterable[Block]) -> list[QueueView]:
    """Queue blocks (replies.queue_blocks) back to their views ([eventq] ``waiting-len``
    and ``paused`` only where present: absent is 0 and not paused)."""
    return [
        QueueView(b.head.decode("latin-1"), int(b.value(b"ready-len")),
                  int(b.value(b"scheduled-len")), any(k == b"paused" for k, _ in b.lines),
                  sum(int(v) for k, v in b.lines if k == b"waiting-len"))
        for b in blocks
    ]


def merge_queues(parts: Iterable[Iterable[QueueView]]) -> list[QueueView]:
    """Every process's figures per queue name, summed, in the spec's bytewise order."""
    totals: dict[str, list[Any]] = {}  # ready-len, scheduled-len, paused, waiting-len
    for part in parts:
        for q in part:
            total = totals.setdefault(q.name, [0, 0, False, 0])
            total[0] += q.ready_len
            total[1] += q.scheduled_len
            total[2] = total[2] or q.paused  # paused where any process says so
            total[3] += q.waiting_len
    names = sorted(totals, key=lambda name: name.encode("latin-1"))
    return [QueueView(name, *totals[name]) for name in names]


def merge_recurrences(parts: Iterable[Iterable[Block]], offset: int, limit: int) -> list[Block]:
    """Recurrence blocks of several processes (each owns its partitions' recurrences),
    in the spec's bytewise order of names, once each, paged."""
    by_name: dict[bytes, Block] = {}
    for part in parts:
        for block in part:
            by_name.setdefault(block.head, block)
    return [by_name[name] for name in sorted(by_name)[offset:offset + limit]]


def merge_job_pages(parts: Iterable[Sequence[Block]], offset: int, limit: int) -> list[Block]:
    """Peer-form job blocks of several processes (each ending in ``order``), merged in
    that order (the same job has the same key everywhere), paged, ``order`` dropped."""
    blocks = [block for part in parts for block in part]
    blocks.sort(key=lambda block: int(block.value(b"order")))
    return [block.without(b"order") for block in blocks[offset:offset + limit]]


@dataclass(frozen=True)
class DigestPart:
    sum: int
    count: int
    partitions: frozenset[int]


def digest_part_of(reply: bytes) -> DigestPart:
    """``+OK 1`` / ``digest-part <sum> <count> <partitions>`` (replies.digest_part_reply)."""
    words = raise_if_error(reply).split(b"\r\n")[1].split(b" ")
    served = frozenset() if words[3] == b"-" else frozenset(map(int, words[3].split(b",")))
    return DigestPart(int(words[1], 16), int(words[2]), served)


def check_covers(parts: Sequence[DigestPart], partitions: int) -> None:
    """A digest of the cluster holds each partition exactly once (none moving)."""
    seen: list[int] = sorted(p for part in parts for p in part.partitions)
    if seen != list(range(partitions)):
        missing = sorted(set(range(partitions)) - set(seen))
        raise ServerError(
            f"partitions {missing or 'some'} are moving between eventq processes "
            "(a rebalance); retry shortly"
        )


