"""The queues: per queue name, its ready jobs in lease order, its not-yet-due scheduled
jobs and its WAITING jobs (docs/architecture.md, "The processor").

A job's place is one integer (``keys.order_key``: lease order, the id in the low
bits), in exactly one of its queue's three lists while it is NEW or PENDING (ready,
or scheduled while its time is ahead) or WAITING (docs/workflows.md, "Dependencies":
dependents waiting for their upstreams, never leased, in neither ready-len nor
scheduled-len), and in none in any other state.

Invariants: a queue is in ``by_name`` exactly while one of its lists holds a job
(``queue`` makes one only to put a job in it), and its name is then not among the
empty names; ``ready`` and ``waiting`` hold ``order_key``s, ``scheduled``
``scheduled_key``s (scheduled time, then lease order).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Iterator

from sortedcontainers import SortedList

from eventq.core.job import LEASABLE_STATES, State
from eventq.core.slim import Slim

from .entries import Entry
from .keys import ORDER_BITS, ORDER_MASK, due_below, id_of, order_key, scheduled_key, time_of
from .names import EmptyNames

SPARE_QUEUES = 256  # emptied queues kept to be reused (empty, about 1 KB each)


class Queue:
    """One queue name: its ready jobs in lease order, its not-yet-due scheduled jobs
    (``order_key`` and ``scheduled_key`` integers) and its WAITING jobs in lease order
    (``order_key``: never leased, listed by ``inspect waiting-jobs``)."""

    __slots__ = ("name", "ready", "scheduled", "waiting")

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready: SortedList = SortedList()
        self.scheduled: SortedList = SortedList()
        self.waiting: SortedList = SortedList()

    def promote_due(self, now_ms: int) -> int:
        """Move scheduled jobs whose time has come into ready. Returns how many moved."""
        moved = 0
        below = due_below(now_ms, ORDER_BITS)
        while self.scheduled and self.scheduled[0] < below:
            self.ready.add(self.scheduled.pop(0) & ORDER_MASK)
            moved += 1
        return moved

    @property
    def next_wake_ms(self) -> int | None:
        return time_of(self.scheduled[0], ORDER_BITS) if self.scheduled else None

    @property
    def is_empty(self) -> bool:
        return not self.ready and not self.scheduled and not self.waiting


class Placement:
    """The places of a rebuild's jobs, by name, to be sorted into the queues at once
    (``Queues.fill``): 1,000,000 jobs take seconds, not a million insertions."""

    __slots__ = ("ready", "scheduled", "waiting")

    def __init__(self) -> None:
        self.ready: dict[str, list[int]] = {}
        self.scheduled: dict[str, list[int]] = {}
        self.waiting: dict[str, list[int]] = {}


class Queues:
    """Every queue holding jobs (``by_name``) and the names known without jobs."""

    __slots__ = ("by_name", "empty", "_spare")

    def __init__(self) -> None:
        self.by_name: dict[str, Queue] = {}  # queues holding ready, scheduled or WAITING jobs
        self.empty = EmptyNames()  # named, no such jobs
        # Queues emptied (no longer in ``by_name``), to hold the next name that gets a
        # job: a worker's queue empties at every lease of its last job and fills at the
        # next add, and three SortedLists cost more to build than to reuse.
        self._spare: list[Queue] = []

    def queue(self, name: str) -> Queue:
        """The queue of a name, to hold a job (created if it holds none yet)."""
        queue = self.by_name.get(name)
        if queue is None:
            if self._spare:
                queue = self._spare.pop()
                queue.name = name
            else:
                queue = Queue(name)
            self.by_name[name] = queue
            self.empty.forget(name)
        return queue

    def name(self, name: str) -> None:
        """A lease names its queues into being (docs/protocol.md, "inspect")."""
        if name not in self.by_name:
            self.empty.remember(name)

    def known(self, name: str) -> bool:
        return name in self.by_name or name in self.empty

    def _release_if_empty(self, queue: Queue) -> None:
        if queue.is_empty:
            del self.by_name[queue.name]
            self.empty.remember(queue.name)
            if len(self._spare) < SPARE_QUEUES:  # its three empty lists, reused
                self._spare.append(queue)

    # --- a job's place ---------------------------------------------------------

    def enter(self, slim: Slim, now_ms: int, placement: Placement | None = None) -> None:
        """Enter a job in its queue (or in ``placement``, to be sorted in at once by
        ``fill``); a job in no list names its queue."""
        if slim.state in LEASABLE_STATES:
            order = order_key(slim.priority, slim.scheduled_ms, slim.created_ms, slim.id)
            # [eventq] a retry without delay made it ready before its time (job.early)
            if slim.scheduled_ms is not None and slim.scheduled_ms > now_ms and not slim.early:
                key = scheduled_key(slim.scheduled_ms, order)
                if placement is None:
                    self.queue(slim.name).scheduled.add(key)
                else:
                    placement.scheduled.setdefault(slim.name, []).append(key)
            elif placement is None:
                self.queue(slim.name).ready.add(order)
            else:
                placement.ready.setdefault(slim.name, []).append(order)
        elif slim.state is State.WAITING:
            order = order_key(slim.priority, slim.scheduled_ms, slim.created_ms, slim.id)
            if placement is None:
                self.queue(slim.name).waiting.add(order)
            else:
                placement.waiting.setdefault(slim.name, []).append(order)
        else:
            self.name(slim.name)

    def leave(self, entry: Entry, id_int: int) -> None:
        """Take the job ``entry`` (its entry as it was entered) out of its queue."""
        queue = self.by_name.get(entry.name)
        if queue is None:
            return
        order = order_key(entry.priority, entry.scheduled_ms, entry.created_ms, id_int)
        if entry.state is State.WAITING:
            queue.waiting.discard(order)
        else:
            queue.ready.discard(order)
        if entry.scheduled_ms is not None:
            queue.scheduled.discard(scheduled_key(entry.scheduled_ms, order))
        self._release_if_empty(queue)

    def fill(self, placement: Placement) -> None:
        """Sort a rebuild's places into the queues."""
        for name, keys in placement.ready.items():
            self.queue(name).ready.update(keys)
        for name, keys in placement.scheduled.items():
            self.queue(name).scheduled.update(keys)
        for name, keys in placement.waiting.items():
            self.queue(name).waiting.update(keys)

    # --- leasing -----------------------------------------------------------------

    def promote_due(self, now_ms: int, names: Iterable[str] | None = None) -> list[str]:
        """Wake scheduled jobs whose time has come; returns a queue's name once for
        each job that became ready there (each may wake one lease waiter)."""
        queues = self.by_name.values() if names is None else (
            self.by_name[name] for name in names if name in self.by_name
        )
        return [queue.name for queue in queues for _ in range(queue.promote_due(now_ms))]

    def ready_candidates(self, names: list[str], claimed: set[uuid.UUID],
                         rng: random.Random) -> Iterator[uuid.UUID]:
        """Ready jobs to try leasing, best first: a uniformly random name among those
        with unclaimed ready jobs, then that name's lease order (docs/protocol.md,
        "lease")."""
        tried: set[uuid.UUID] = set()
        while True:
            candidates = []
            for name in names:
                queue = self.by_name.get(name)
                if queue is None:
                    continue
                for key in queue.ready:
                    job_id = id_of(key)
                    if job_id not in claimed and job_id not in tried:
                        candidates.append(job_id)
                        break
            if not candidates:
                return
            job_id = candidates[rng.randrange(len(candidates))]
            tried.add(job_id)
            yield job_id

    def ready_heads(self, names: list[str], claimed: set[uuid.UUID]) -> dict[str, int]:
        """Each name's first unclaimed ready job's place in lease order (its key)."""
        heads = {}
        for name in names:
            queue = self.by_name.get(name)
            if queue is None:
                continue
            for key in queue.ready:
                if id_of(key) not in claimed:
                    heads[name] = key
                    break
        return heads

    # --- reads ---------------------------------------------------------------------

    def ready_page_keys(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[tuple[int, uuid.UUID]]:
        return self._page_keys(name, now_ms, "ready", offset, limit)

    def scheduled_page_keys(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[tuple[int, uuid.UUID]]:
        return self._page_keys(name, now_ms, "scheduled", offset, limit)

    def _page_keys(
        self, name: str, now_ms: int, which: str, offset: int, limit: int
    ) -> list[tuple[int, uuid.UUID]]:
        """A page of one of a queue's sorted lists, after moving what is due to ready."""
        queue = self.by_name.get(name)
        if queue is None:
            return []
        queue.promote_due(now_ms)
        keys = queue.ready if which == "ready" else queue.scheduled
        return [(key, id_of(key)) for key in keys.islice(offset, offset + limit)]

    def waiting_page_keys(self, name: str, offset: int, limit: int) -> list[tuple[int, uuid.UUID]]:
        queue = self.by_name.get(name)
        if queue is None:
            return []
        return [(key, id_of(key)) for key in queue.waiting.islice(offset, offset + limit)]

    def lengths(self, name: str, now_ms: int) -> tuple[int, int]:
        """(ready-len, scheduled-len) of a queue: its WAITING jobs are in neither."""
        queue = self.by_name.get(name)
        if queue is None:
            return 0, 0
        queue.promote_due(now_ms)
        return len(queue.ready), len(queue.scheduled)

    def waiting_len(self, name: str) -> int:
        queue = self.by_name.get(name)
        return 0 if queue is None else len(queue.waiting)

    def names(self, prefix: str | None = None) -> list[str]:
        """Known queue names, sorted bytewise (docs/protocol.md, "inspect"); ``prefix``:
        only those that start with it (docs/security.md, "Queue-name prefixes")."""
        names = self.by_name.keys() | self.empty.keys()
        if prefix is not None:
            names = {name for name in names if name.startswith(prefix)}
        return sorted(names, key=lambda name: name.encode())

    def next_wake_ms(self) -> int | None:
        """The earliest time a scheduled job of any queue becomes ready."""
        return min((time_of(queue.scheduled[0], ORDER_BITS)
                    for queue in self.by_name.values() if queue.scheduled), default=None)
