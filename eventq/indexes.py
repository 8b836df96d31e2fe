"""Derived in-memory indexes over the live jobs of the partitions this process owns.

ARCHITECTURE.md, "The processor": ready jobs per queue name in lease order, scheduled
jobs per name, and deadline heaps. They are pure derived data: rebuilt from the jobs
table when a partition is assigned, updated by the processor after every applied
command, and read by the gateway. No I/O and no clock here: ``now_ms`` is passed in.

Each job is held as a slim ``Entry`` (no payload or result): those stay in RocksDB, so
memory grows with the number of jobs, not with their size.

A queue holding no ready or scheduled job is only a name, and at most
``MAX_EMPTY_QUEUE_NAMES`` of those are remembered (the least recently named are
forgotten): a lease names its queues into being (spec: inspect queues), and one lease
line can name 2,500 new queues, each an empty queue object of 740 bytes, never freed.
Leases naming random queues would grow the server without bound (issue 8).
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Iterator

from sortedcontainers import SortedList

from eventq.core.job import WAITING_STATES, Job, State, lease_order_key

OrderKey = tuple  # eventq.core.job.lease_order_key
MAX_EMPTY_QUEUE_NAMES = 10_000


@dataclass(slots=True)
class Entry:
    """What the indexes need to know of one live job."""

    name: str
    state: State
    order_key: OrderKey
    scheduled_ms: int | None
    expires_ms: int | None
    lease_deadline_ms: int | None
    attempts: int
    version: int
    partition: int

    @classmethod
    def of(cls, job: Job, partition: int) -> "Entry":
        return cls(
            job.name,
            job.state,
            lease_order_key(job),
            job.scheduled_ms,
            job.expires_ms,
            job.lease_deadline_ms,
            job.attempts,
            job.version,
            partition,
        )

    @property
    def waiting(self) -> bool:
        return self.state in WAITING_STATES


TTR = "ttr"  # a lease's time-to-run ends: timeout-attempt(id, attempts)
TTL = "ttl"  # a job's time-to-live ends: expire(id)


@dataclass(frozen=True, slots=True)
class Due:
    """A deadline that has passed: the timer turns it into a command."""

    kind: str
    job_id: uuid.UUID
    attempt: int
    version: int  # the job's version when it fell due; re-arming checks it still is


class Queue:
    """One queue name: its ready jobs in lease order and its not-yet-due scheduled jobs."""

    __slots__ = ("name", "ready", "scheduled")

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready: SortedList = SortedList()  # (order_key, id)
        self.scheduled: SortedList = SortedList()  # (scheduled_ms, order_key, id)

    def promote_due(self, now_ms: int) -> int:
        """Move scheduled jobs whose time has come into ready. Returns how many moved."""
        moved = 0
        while self.scheduled and self.scheduled[0][0] <= now_ms:
            _, order_key, job_id = self.scheduled.pop(0)
            self.ready.add((order_key, job_id))
            moved += 1
        return moved

    @property
    def next_wake_ms(self) -> int | None:
        return self.scheduled[0][0] if self.scheduled else None


class JobIndex:
    """The live jobs of the owned partitions, indexed for lease, inspect and timers."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.entries: dict[uuid.UUID, Entry] = {}
        self.queues: dict[str, Queue] = {}  # queues holding ready or scheduled jobs
        self.empty_names: OrderedDict[str, None] = OrderedDict()  # named, no such jobs
        self.by_partition: dict[int, set[uuid.UUID]] = {}
        self._deadlines: list[tuple[int, str, uuid.UUID, int]] = []  # lazy heap
        self._rng = rng or random.Random()

    # --- updates (from the processor) ----------------------------------------------

    def queue(self, name: str) -> Queue:
        """The queue of a name, to hold a job (created if it holds none yet)."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue(name)
            self.empty_names.pop(name, None)
        return queue

    def name_queue(self, name: str) -> None:
        """A lease names its queues into being (spec: inspect queues)."""
        if name not in self.queues:
            self._remember_empty(name)

    def _remember_empty(self, name: str) -> None:
        self.empty_names[name] = None
        self.empty_names.move_to_end(name)
        if len(self.empty_names) > MAX_EMPTY_QUEUE_NAMES:
            self.empty_names.popitem(last=False)

    def _release_if_empty(self, queue: Queue) -> None:
        if not queue.ready and not queue.scheduled:
            del self.queues[queue.name]
            self._remember_empty(queue.name)

    def known(self, name: str) -> bool:
        return name in self.queues or name in self.empty_names

    def put(self, job: Job, partition: int, now_ms: int) -> None:
        """Index the job's current state (after any applied command)."""
        self.remove(job.id)
        entry = Entry.of(job, partition)
        self.entries[job.id] = entry
        self.by_partition.setdefault(partition, set()).add(job.id)
        if entry.waiting:
            queue = self.queue(job.name)
            if entry.scheduled_ms is not None and entry.scheduled_ms > now_ms:
                queue.scheduled.add((entry.scheduled_ms, entry.order_key, job.id))
            else:
                queue.ready.add((entry.order_key, job.id))
        else:
            self.name_queue(job.name)
        if entry.state is State.LEASED and entry.lease_deadline_ms is not None:
            heapq.heappush(
                self._deadlines, (entry.lease_deadline_ms, TTR, job.id, entry.version)
            )
        if entry.expires_ms is not None:
            heapq.heappush(self._deadlines, (entry.expires_ms, TTL, job.id, entry.version))

    def remove(self, job_id: uuid.UUID) -> Entry | None:
        """Forget a job (deleted, expired, or about to be re-put)."""
        entry = self.entries.pop(job_id, None)
        if entry is None:
            return None
        self.by_partition.get(entry.partition, set()).discard(job_id)
        queue = self.queues.get(entry.name)
        if queue is not None:
            queue.ready.discard((entry.order_key, job_id))
            if entry.scheduled_ms is not None:
                queue.scheduled.discard((entry.scheduled_ms, entry.order_key, job_id))
            self._release_if_empty(queue)
        # Deadline heap entries are dropped lazily: their version no longer matches.
        return entry

    def drop_partition(self, partition: int) -> None:
        for job_id in list(self.by_partition.pop(partition, ())):
            self.remove(job_id)

    def rebuild_partition(self, partition: int, jobs: Iterable[Job], now_ms: int) -> int:
        self.drop_partition(partition)
        count = 0
        for job in jobs:
            self.put(job, partition, now_ms)
            count += 1
        return count

    # --- reads (from the gateway) --------------------------------------------------

    def promote_due(self, now_ms: int, names: Iterable[str] | None = None) -> list[str]:
        """Wake scheduled jobs whose time has come; returns a queue's name once for
        each job that became ready there (each may wake one lease waiter)."""
        queues = self.queues.values() if names is None else (
            self.queues[name] for name in names if name in self.queues
        )
        return [queue.name for queue in queues for _ in range(queue.promote_due(now_ms))]

    def ready_candidates(
        self, names: Iterable[str], now_ms: int, claimed: set[uuid.UUID]
    ) -> Iterator[uuid.UUID]:
        """Ready jobs to try leasing, best first: a uniformly random name among those
        with unclaimed ready jobs, then that name's lease order (spec: lease)."""
        names = list(dict.fromkeys(names))
        self.promote_due(now_ms, names)
        tried: set[uuid.UUID] = set()
        while True:
            candidates = []
            for name in names:
                queue = self.queues.get(name)
                if queue is None:
                    continue
                for _, job_id in queue.ready:
                    if job_id not in claimed and job_id not in tried:
                        candidates.append(job_id)
                        break
            if not candidates:
                return
            job_id = candidates[self._rng.randrange(len(candidates))]
            tried.add(job_id)
            yield job_id

    def ready_page(self, name: str, now_ms: int, offset: int, limit: int) -> list[uuid.UUID]:
        queue = self.queues.get(name)
        if queue is None:
            return []
        queue.promote_due(now_ms)
        return [job_id for _, job_id in queue.ready.islice(offset, offset + limit)]

    def scheduled_page(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[uuid.UUID]:
        queue = self.queues.get(name)
        if queue is None:
            return []
        queue.promote_due(now_ms)
        return [job_id for _, _, job_id in queue.scheduled.islice(offset, offset + limit)]

    def lengths(self, name: str, now_ms: int) -> tuple[int, int]:
        """(ready-len, scheduled-len) of a queue."""
        queue = self.queues.get(name)
        if queue is None:
            return 0, 0
        queue.promote_due(now_ms)
        return len(queue.ready), len(queue.scheduled)

    def queue_names(self) -> list[str]:
        """Known queue names, sorted bytewise (spec: inspect queues)."""
        names = self.queues.keys() | self.empty_names.keys()
        return sorted(names, key=lambda name: name.encode())

    # --- timers --------------------------------------------------------------------

    def due(self, now_ms: int) -> list[Due]:
        """Deadlines that have passed and still apply to the job's current state."""
        found = []
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms:
            _, kind, job_id, version = heapq.heappop(heap)
            entry = self.entries.get(job_id)
            if entry is None or entry.version != version:
                continue  # stale: the job changed or left since this was pushed
            found.append(Due(kind, job_id, entry.attempts, version))
        return found

    def rearm(self, due: Due, when_ms: int) -> None:
        """Try a deadline again later (its command was not applied yet)."""
        entry = self.entries.get(due.job_id)
        if entry is not None and entry.version == due.version:
            heapq.heappush(self._deadlines, (when_ms, due.kind, due.job_id, due.version))

    def next_deadline_ms(self) -> int | None:
        """The earliest live deadline or scheduled wake-up, for the timer's sleep."""
        heap = self._deadlines
        while heap:
            _, _, job_id, version = heap[0]
            entry = self.entries.get(job_id)
            if entry is not None and entry.version == version:
                break
            heapq.heappop(heap)
        candidates = [heap[0][0]] if heap else []
        candidates.extend(
            queue.scheduled[0][0] for queue in self.queues.values() if queue.scheduled
        )
        return min(candidates) if candidates else None

    def __len__(self) -> int:
        return len(self.entries)
