"""The deadlines of the live jobs: each job's TTR while it is LEASED, and its TTL
(docs/architecture.md, "Timers").

A deadline is one integer in a heap (``keys.deadline_item``: the time, the kind, the
id). Items are never taken out when a job changes or goes: a popped item is checked
against the job's entry (``_live``) and a stale one dropped, and the heap is rebuilt
from the entries when stale items outnumber live ones ``HEAP_SLACK`` times.

Invariants: ``due(t)`` gives only deadlines that are a live job's current ones,
passed by ``t``, with its current attempts and version; and once it returns, every
deadline of a live job's current version passed by ``t`` has been given (a put within
``REPUSH_WITHIN_MS`` of a deadline pushes it again for the new version), and so has
every re-armed one whose time has come.
"""

from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass

from eventq.core.job import State
from eventq.core.slim import Slim

from .entries import Entries, Entry
from .keys import (
    DEADLINE_SHIFT,
    ID_MASK,
    KIND_BITS,
    KIND_SHIFT,
    KINDS,
    TTL,
    TTR,
    clamp,
    deadline_item,
    due_below,
    time_of,
)

# A put this close to a deadline pushes it again even if unchanged: the timer may have
# popped it already (a popped deadline whose command a newer version makes moot is
# never re-armed, so the new version needs its own).
REPUSH_WITHIN_MS = 5_000
# A heap is rebuilt when its stale items (of changed or removed jobs) outnumber live
# ones this much, beyond HEAP_SLACK_ITEMS: deleted jobs' TTLs would otherwise stay a day.
HEAP_SLACK = 2
HEAP_SLACK_ITEMS = 1000


@dataclass(frozen=True, slots=True)
class Due:
    """A deadline that has passed: the timer turns it into a command."""

    kind: str
    job_id: uuid.UUID
    attempt: int
    version: int  # the job's version when it fell due; re-arming checks it still is


def deadlines_of(job: Slim | Entry) -> tuple[int | None, int | None]:
    """A job's (TTR, TTL) deadlines as the heap holds them: the lease's only while the
    job is LEASED; both clamped to ``NEVER_MS``."""
    lease = clamp(job.lease_deadline_ms) if job.state is State.LEASED else None
    return lease, clamp(job.expires_ms)


class Deadlines:
    """The heap of the jobs' deadlines, and deadlines re-armed by the timer."""

    __slots__ = ("_entries", "_heap", "_rearmed")

    def __init__(self, entries: Entries) -> None:
        self._entries = entries  # the jobs' current deadlines, to check popped items by
        self._heap: list[int] = []  # of ``deadline_item``
        self._rearmed: list[tuple[int, int, int, int]] = []  # (when, kind, id, version)

    def arm(self, old: Entry | None, slim: Slim, now_ms: int) -> None:
        """The job ``slim`` was put (``old``: its entry before, None if new): push its
        deadlines that changed, and those close enough to have been popped already."""
        old_lease, old_expires = (None, None) if old is None else deadlines_of(old)
        lease, expires = deadlines_of(slim)
        if lease is not None and (lease != old_lease or lease <= now_ms + REPUSH_WITHIN_MS):
            heapq.heappush(self._heap, deadline_item(lease, TTR, slim.id))
        if expires is not None and (
            expires != old_expires or expires <= now_ms + REPUSH_WITHIN_MS
        ):
            heapq.heappush(self._heap, deadline_item(expires, TTL, slim.id))
        if len(self._heap) > HEAP_SLACK * len(self._entries) + HEAP_SLACK_ITEMS:
            self._compact()

    def add(self, slim: Slim) -> None:
        """A rebuild's job: its deadlines go in unordered, ``heapify`` orders them."""
        lease, expires = deadlines_of(slim)
        if lease is not None:
            self._heap.append(deadline_item(lease, TTR, slim.id))
        if expires is not None:
            self._heap.append(deadline_item(expires, TTL, slim.id))

    def heapify(self) -> None:
        heapq.heapify(self._heap)

    def _live(self, item: int) -> Entry | None:
        """The job's entry if the heap item is still its current deadline."""
        entry = self._entries.get(item & ID_MASK)
        if entry is None:
            return None
        lease, expires = deadlines_of(entry)
        current = lease if (item >> KIND_SHIFT) & 1 else expires
        return entry if current == time_of(item, DEADLINE_SHIFT) else None

    def due(self, now_ms: int) -> list[Due]:
        """Deadlines that have passed and still apply to the job's current state."""
        found: dict[tuple[str, int], Due] = {}
        heap = self._heap
        below = due_below(now_ms, DEADLINE_SHIFT)
        while heap and heap[0] < below:
            item = heapq.heappop(heap)
            entry = self._live(item)
            if entry is not None:
                kind, id_int = KINDS[(item >> KIND_SHIFT) & 1], item & ID_MASK
                found[(kind, id_int)] = Due(kind, uuid.UUID(int=id_int), entry.attempts,
                                            entry.version)
        rearmed = self._rearmed
        while rearmed and rearmed[0][0] <= now_ms:
            _, kind_bit, id_int, version = heapq.heappop(rearmed)
            entry = self._entries.get(id_int)
            if entry is None or entry.version != version:
                continue
            kind = KINDS[kind_bit]
            found[(kind, id_int)] = Due(kind, uuid.UUID(int=id_int), entry.attempts, version)
        return list(found.values())

    def rearm(self, due: Due, when_ms: int) -> None:
        """Try a deadline again later (its command was not applied yet)."""
        entry = self._entries.get(due.job_id.int)
        if entry is not None and entry.version == due.version:
            heapq.heappush(self._rearmed,
                           (when_ms, KIND_BITS[due.kind], due.job_id.int, due.version))

    def next_ms(self) -> int | None:
        """The earliest live or re-armed deadline (stale items at the top dropped)."""
        heap = self._heap
        while heap and self._live(heap[0]) is None:
            heapq.heappop(heap)
        candidates = [time_of(heap[0], DEADLINE_SHIFT)] if heap else []
        if self._rearmed:
            candidates.append(self._rearmed[0][0])
        return min(candidates) if candidates else None

    def _compact(self) -> None:
        """Drop stale deadline items (bounded memory under churn)."""
        live = {item for item in self._heap if self._live(item) is not None}
        self._heap = sorted(live)  # a sorted list is a heap; duplicates are gone
