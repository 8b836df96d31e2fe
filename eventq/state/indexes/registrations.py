"""The deadlines of registrations with upstreams that are no live job here
(docs/workflows.md, "Command types"; eventq/core/workflow.py).

A registration with a deadline is one integer in a heap (``keys.registration_item``:
the deadline and the upstream's id). Its dependent is not needed: the timer reads the
upstream's registrations from the table when the deadline comes, and sends ``expire``
for those that have expired. A live upstream's registrations are dropped by its
ending or its removal instead (eventq/core/followups.py): no timer.

Invariant: every deadline put since it was last given by ``due`` is in the heap
(repeats may be, and are dropped when they outnumber the rest ``HEAP_SLACK`` times).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable

from .deadlines import HEAP_SLACK, HEAP_SLACK_ITEMS
from .entries import Entries
from .keys import ID_BITS, ID_MASK, due_below, registration_item, time_of


class Registrations:
    """The heap of registration deadlines, checked against the live jobs when due."""

    __slots__ = ("_entries", "_heap", "_kept")

    def __init__(self, entries: Entries) -> None:
        self._entries = entries  # the live jobs: an upstream among them needs no timer
        self._heap: list[int] = []
        self._kept = 0  # the heap's size after the last removal of repeats

    def put(self, upstream: uuid.UUID, deadline_ms: int) -> None:
        """A registration with ``upstream``, absent, that expires at ``deadline_ms`` is
        stored (or its timer is to be checked again then): ``due`` gives it then."""
        heapq.heappush(self._heap, registration_item(deadline_ms, upstream.int))
        if len(self._heap) > HEAP_SLACK * self._kept + HEAP_SLACK_ITEMS:
            self._heap = sorted(set(self._heap))  # repeats gone
            self._kept = len(self._heap)

    def add_all(self, registrations: Iterable[tuple[uuid.UUID, int]]) -> None:
        """A rebuilt partition's (upstream, deadline) pairs; those of live upstreams go
        with their ending or removal: no timer."""
        self._heap.extend(
            registration_item(deadline, upstream.int) for upstream, deadline in registrations
            if upstream.int not in self._entries)
        heapq.heapify(self._heap)

    def due(self, now_ms: int) -> list[uuid.UUID]:
        """Upstreams, each once, with a registration deadline passed by ``now_ms`` and
        no live job here: the timer checks their registrations in the table and sends
        ``expire`` for them if one has expired."""
        heap = self._heap
        below = due_below(now_ms, ID_BITS)
        found: dict[int, None] = {}
        while heap and heap[0] < below:
            id_int = heapq.heappop(heap) & ID_MASK
            if id_int not in self._entries:
                found[id_int] = None
        return [uuid.UUID(int=id_int) for id_int in found]

    def next_ms(self) -> int | None:
        return time_of(self._heap[0], ID_BITS) if self._heap else None
