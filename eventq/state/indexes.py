"""Derived in-memory indexes over the live jobs of the partitions this process owns.

docs/architecture.md, "The processor": ready jobs per queue name in lease order, scheduled
jobs per name, WAITING jobs per name (docs/workflows.md: dependents waiting for their
upstreams, never leased, in neither ready-len nor scheduled-len; ``waiting_len`` and
``waiting_page`` in lease order), live jobs per tag by created time, then id
(docs/workflows.md, "Tags": ``inspect tagged``, ``tagged_page``), and deadline
heaps: the jobs' TTR and TTL, and the deadlines of registrations (an absent upstream's
are dropped by a timer's ``expire``).
They are pure derived data: rebuilt from the jobs table when a partition is assigned,
updated by the processor after every applied command, and read by the gateway. No
I/O and no clock here: ``now_ms`` is passed in.

Memory per job is the design constraint (docs/architecture.md, "Memory and restores": at
most 400 bytes of RSS per queued job, at 1,000,000 jobs). A job costs no Python object
per field here:

- its entry is one ``bytes`` (the fixed fields packed by ``_ENTRY``, then its name and,
  for a job with tags, ``\n`` and its tags with ``,`` between them),
  keyed by the id's 128-bit integer;
- its place in a queue is one integer whose order is the lease order
  (``lease_order_key`` packed most significant field first, the id in the low bits);
- its deadline is one integer in a heap: the time, the kind, the id;
- a registration with a deadline (eventq/core/workflow.py) is one integer in a heap of
  its own: the deadline and the upstream's id (its dependent is not needed: the timer
  reads the upstream's registrations from the table when the deadline comes);
- a job with tags is one integer (created time, id) in each of its tags' sorted lists
  (its entry holds its tags, to find them again when it goes): a job without tags costs
  nothing here.

Payloads and results are never here: they stay in RocksDB.

A queue holding no ready, scheduled or WAITING job is only a name, and at most
``MAX_EMPTY_QUEUE_NAMES`` of those are remembered (the least recently named are
forgotten): a lease names its queues into being (docs/protocol.md, "inspect"), and one lease
line can name 2,500 new queues, each an empty queue object of 740 bytes, never freed.
Leases naming random queues would grow the server without bound (docs/architecture.md,
"Hostile inputs").
"""

from __future__ import annotations

import heapq
import random
import struct
import sys
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple

from sortedcontainers import SortedList

from eventq.core.ids import uuid_of_int
from eventq.core.job import LEASABLE_STATES, Job, State
from eventq.core.recurrence import Recurrence
from eventq.core.slim import Slim, slim_of
from eventq.limits import MAX_PRIORITY, MIN_TIME_MS

MAX_EMPTY_QUEUE_NAMES = 10_000
SPARE_QUEUES = 256  # emptied queues kept to be reused (empty, about 1 KB each)

# A deadline past this (a saturated TTL of 2^64-1 ms) is held as this: 292 million years.
NEVER_MS = 2**63 - 1
# A put this close to a deadline pushes it again even if unchanged: the timer may have
# popped it already (a popped deadline whose command a newer version makes moot is
# never re-armed, so the new version needs its own).
REPUSH_WITHIN_MS = 5_000
# The heap is rebuilt from the entries when stale deadlines (of changed or removed
# jobs) outnumber live ones this much: deleted jobs' TTLs would otherwise stay a day.
HEAP_SLACK = 2

# --- packing: fields into integers whose order is the order we need ----------------

_TIME_BITS = 50  # MIN_TIME_MS..MAX_TIME_MS spans 2^48.2 ms
_ID_BITS = 128
_ID_MASK = (1 << _ID_BITS) - 1
_ORDER_BITS = 32 + 1 + _TIME_BITS + _TIME_BITS + _ID_BITS
_ORDER_MASK = (1 << _ORDER_BITS) - 1
_KIND_SHIFT = _ID_BITS
_DEADLINE_SHIFT = _ID_BITS + 1

TTL = "ttl"  # a job's time-to-live ends: expire(id)
TTR = "ttr"  # a lease's time-to-run ends: timeout-attempt(id, attempts)
_KIND_BITS = {TTL: 0, TTR: 1}  # the old tuples sorted "ttl" before "ttr"
_KINDS = (TTL, TTR)


def order_key(priority: int, scheduled_ms: int | None, created_ms: int, id_int: int) -> int:
    """``eventq.core.job.lease_order_key`` as one integer with the same order: priority
    descending, unscheduled first, scheduled time, creation time, id bytes."""
    key = MAX_PRIORITY - priority
    key = (key << 1) | (scheduled_ms is not None)
    key = (key << _TIME_BITS) | ((scheduled_ms or 0) - MIN_TIME_MS)
    key = (key << _TIME_BITS) | (created_ms - MIN_TIME_MS)
    return (key << _ID_BITS) | id_int


def _failed_key(failed_ms: int, id_int: int) -> int:
    """(failure time, id): a failure group's FAILED jobs, oldest failure first."""
    return ((failed_ms - MIN_TIME_MS) << _ID_BITS) | id_int


def _scheduled_key(scheduled_ms: int, order: int) -> int:
    """(scheduled time, lease order): a queue's not-yet-due jobs, soonest first."""
    return ((scheduled_ms - MIN_TIME_MS) << _ORDER_BITS) | order


def _deadline_item(deadline_ms: int, kind: str, id_int: int) -> int:
    return ((deadline_ms - MIN_TIME_MS) << _DEADLINE_SHIFT) | (_KIND_BITS[kind] << _KIND_SHIFT) | id_int


def tagged_key(created_ms: int, id_int: int) -> int:
    """A tagged job's place among its tag's jobs: created time, then id (docs/workflows.md,
    "Tags"); the same in every process, so pages merge by it."""
    return ((created_ms - MIN_TIME_MS) << _ID_BITS) | id_int


def _registration_item(deadline_ms: int, id_int: int) -> int:
    return ((min(deadline_ms, NEVER_MS) - MIN_TIME_MS) << _ID_BITS) | id_int


def _clamp(deadline_ms: int | None) -> int | None:
    return deadline_ms if deadline_ms is None or deadline_ms <= NEVER_MS else NEVER_MS


# state, partition, priority, attempts, version, created, scheduled, expires, lease
# deadline, and which of the last three are present; the queue name follows, then for a
# job with tags, _TAGS_AFTER and its tags joined by _TAG_SEPARATOR (neither byte is in a
# name or a tag).
_ENTRY = struct.Struct("<BHiIQqqqqB")
_HAS_SCHEDULED, _HAS_EXPIRES, _HAS_LEASE = 1, 2, 4
_TAGS_AFTER, _TAG_SEPARATOR = b"\n", ","
_STATES = tuple(State)


class Entry(NamedTuple):
    """What the indexes know of one live job (unpacked on demand for a reader)."""

    name: str
    state: State
    priority: int
    created_ms: int
    scheduled_ms: int | None
    expires_ms: int | None
    lease_deadline_ms: int | None
    attempts: int
    version: int
    partition: int
    tags: tuple[str, ...] = ()  # docs/workflows.md, "Tags"


def _deadlines_of(job: Slim | Entry) -> tuple[int | None, int | None]:
    """A job's (TTR, TTL) deadlines as the heap holds them: the lease's only while the
    job is LEASED; both clamped to ``NEVER_MS``."""
    lease = _clamp(job.lease_deadline_ms) if job.state is State.LEASED else None
    return lease, _clamp(job.expires_ms)


def _pack_entry(slim: Slim, partition: int) -> bytes:
    scheduled, expires, lease = slim.scheduled_ms, _clamp(slim.expires_ms), _clamp(
        slim.lease_deadline_ms)
    flags = ((scheduled is not None and _HAS_SCHEDULED) | (expires is not None and _HAS_EXPIRES)
             | (lease is not None and _HAS_LEASE))
    return _ENTRY.pack(
        slim.state, partition, slim.priority, slim.attempts, slim.version,
        slim.created_ms, scheduled or 0, expires or 0, lease or 0, flags,
    ) + (slim.name.encode() if not slim.tags else
         (slim.name + "\n" + _TAG_SEPARATOR.join(slim.tags)).encode())


def _unpack_entry(packed: bytes) -> Entry:
    (state, partition, priority, attempts, version, created, scheduled, expires, lease,
     flags) = _ENTRY.unpack_from(packed)
    text = packed[_ENTRY.size:].decode()
    name, tags = text, ()
    if "\n" in text:
        name, joined = text.split("\n", 1)
        tags = tuple(joined.split(_TAG_SEPARATOR))
    return Entry(
        name, _STATES[state], priority, created,
        scheduled if flags & _HAS_SCHEDULED else None,
        expires if flags & _HAS_EXPIRES else None,
        lease if flags & _HAS_LEASE else None,
        attempts, version, partition, tags,
    )


def _id_of(key: int) -> uuid.UUID:
    return uuid_of_int(key & _ID_MASK)


@dataclass(frozen=True, slots=True)
class Due:
    """A deadline that has passed: the timer turns it into a command."""

    kind: str
    job_id: uuid.UUID
    attempt: int
    version: int  # the job's version when it fell due; re-arming checks it still is


class Queue:
    """One queue name: its ready jobs in lease order, its not-yet-due scheduled jobs
    (``order_key`` and ``_scheduled_key`` integers) and its WAITING jobs in lease order
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
        due_below = (now_ms - MIN_TIME_MS + 1) << _ORDER_BITS
        while self.scheduled and self.scheduled[0] < due_below:
            self.ready.add(self.scheduled.pop(0) & _ORDER_MASK)
            moved += 1
        return moved

    @property
    def next_wake_ms(self) -> int | None:
        return (self.scheduled[0] >> _ORDER_BITS) + MIN_TIME_MS if self.scheduled else None


class JobIndex:
    """The live jobs of the owned partitions, indexed for lease, inspect and timers."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._entries: dict[int, bytes] = {}  # id int -> packed entry
        self.queues: dict[str, Queue] = {}  # queues holding ready, scheduled or WAITING jobs
        self.empty_names: OrderedDict[str, None] = OrderedDict()  # named, no such jobs
        # Queues emptied (no longer in ``queues``), to hold the next name that gets a
        # job: a worker's queue empties at every lease of its last job and fills at the
        # next add, and three SortedLists cost more to build than to reuse.
        self._spare_queues: list[Queue] = []
        self._partition_sizes: Counter[int] = Counter()
        self._deadlines: list[int] = []  # heap of _deadline_item, checked when popped
        self._rearmed: list[tuple[int, int, int, int]] = []  # (when, kind, id, version)
        # Registration deadlines (``_registration_item``), checked when due.
        self._registrations: list[int] = []
        self._registrations_kept = 0  # their count after the last removal of repeats
        # Paused queues (docs/protocol.md, "eventq extensions", pause) as each owned partition's log says:
        # every partition gets every pause and resume, and a queue is paused here while
        # any of them says so (they agree once each has applied the same commands).
        self._paused: dict[int, set[str]] = {}
        # Recurrences of the owned partitions (docs/workflows.md, "Recurring jobs"):
        # name -> (partition, every ms, next slot), and a heap of (when to check, name)
        # for the timer, checked when popped (a changed record pushes its own).
        self._recurrences: dict[str, tuple[int, int, int]] = {}
        # Each one's queue (its job name), for a token's prefix (docs/security.md).
        self._recurrence_queues: dict[str, str] = {}
        self._recurrence_checks: list[tuple[int, str]] = []
        # Live jobs per queue name and state, for the dashboard and the metrics
        # (docs/architecture.md, "Metrics and the dashboard").
        self._state_counts: dict[str, list[int]] = {}
        # Live jobs per tag (docs/workflows.md, "Tags"), ``tagged_key`` order.
        self._tagged: dict[str, SortedList] = {}
        # [eventq] FAILED jobs per failure group (docs/workflows.md, "Failure groups and retry"),
        # oldest failure first: ``_failed_key`` integers; and each FAILED
        # job's (group, key), to take it out again.
        self._failed: dict[str, SortedList] = {}
        self._failed_of: dict[int, tuple[str, int]] = {}
        self._rng = rng or random.Random()

    # --- updates (from the processor) ----------------------------------------------

    def queue(self, name: str) -> Queue:
        """The queue of a name, to hold a job (created if it holds none yet)."""
        queue = self.queues.get(name)
        if queue is None:
            if self._spare_queues:
                queue = self._spare_queues.pop()
                queue.name = name
            else:
                queue = Queue(name)
            self.queues[name] = queue
            self.empty_names.pop(name, None)
        return queue

    def name_queue(self, name: str) -> None:
        """A lease names its queues into being (docs/protocol.md, "inspect")."""
        if name not in self.queues:
            self._remember_empty(name)

    def _remember_empty(self, name: str) -> None:
        self.empty_names[name] = None
        self.empty_names.move_to_end(name)
        if len(self.empty_names) > MAX_EMPTY_QUEUE_NAMES:
            self.empty_names.popitem(last=False)

    def _release_if_empty(self, queue: Queue) -> None:
        if not queue.ready and not queue.scheduled and not queue.waiting:
            del self.queues[queue.name]
            self._remember_empty(queue.name)
            if len(self._spare_queues) < SPARE_QUEUES:  # its three empty lists, reused
                self._spare_queues.append(queue)

    def set_paused(self, partition: int, name: str, paused: bool) -> None:
        """A pause or resume applied in ``partition`` (it also names the queue)."""
        names = self._paused.setdefault(partition, set())
        if paused:
            names.add(name)
        else:
            names.discard(name)
        self.name_queue(name)

    def is_paused(self, name: str) -> bool:
        return any(name in names for names in self._paused.values())

    def _leasable(self, names: Iterable[str]) -> list[str]:
        """``names`` once each, paused queues left out (they hand out no jobs)."""
        names = dict.fromkeys(names)
        if any(self._paused.values()):
            return [name for name in names if not self.is_paused(name)]
        return list(names)

    def known(self, name: str) -> bool:
        return name in self.queues or name in self.empty_names

    def put(self, job: Job, partition: int, now_ms: int, record_ms: int | None = None) -> None:
        """Index the job's current state (after any applied command, at broker time
        ``record_ms``: a FAILED job's failure time, job.failure_time_ms)."""
        self.put_slim(slim_of(job, record_ms), partition, now_ms)

    def put_slim(self, slim: Slim, partition: int, now_ms: int) -> None:
        old = self._unindex(slim.id)
        self._index(slim, partition, now_ms)
        if (slim.tags or (old is not None and old.tags)) and (
            old is None or old.tags != slim.tags or old.created_ms != slim.created_ms
        ):  # a job's tags never change: only its first put (or another job's) gets here
            if old is not None and old.tags:
                self._untag(slim.id, old.created_ms, old.tags)
            self._tag(slim.id, slim.created_ms, slim.tags)
        old_lease, old_expires = (None, None) if old is None else _deadlines_of(old)
        lease, expires = _deadlines_of(slim)
        if lease is not None and (lease != old_lease or lease <= now_ms + REPUSH_WITHIN_MS):
            heapq.heappush(self._deadlines, _deadline_item(lease, TTR, slim.id))
        if expires is not None and (
            expires != old_expires or expires <= now_ms + REPUSH_WITHIN_MS
        ):
            heapq.heappush(self._deadlines, _deadline_item(expires, TTL, slim.id))
        if len(self._deadlines) > HEAP_SLACK * len(self._entries) + 1000:
            self._rebuild_deadlines()

    def _index(self, slim: Slim, partition: int, now_ms: int, ready=None, scheduled=None,
               waiting=None):
        """Enter the job in the entries and its queue (or the given lists, to be sorted
        into the queues at once by ``rebuild``)."""
        self._entries[slim.id] = _pack_entry(slim, partition)
        self._partition_sizes[partition] += 1
        counts = self._state_counts.get(slim.name)
        if counts is None:
            counts = self._state_counts[slim.name] = [0] * len(_STATES)
        counts[slim.state] += 1
        if slim.state in LEASABLE_STATES:
            order = order_key(slim.priority, slim.scheduled_ms, slim.created_ms, slim.id)
            # [eventq] a retry without delay made it ready before its time (job.early)
            if slim.scheduled_ms is not None and slim.scheduled_ms > now_ms and not slim.early:
                key = _scheduled_key(slim.scheduled_ms, order)
                if scheduled is None:
                    self.queue(slim.name).scheduled.add(key)
                else:
                    scheduled.setdefault(slim.name, []).append(key)
            elif ready is None:
                self.queue(slim.name).ready.add(order)
            else:
                ready.setdefault(slim.name, []).append(order)
        elif slim.state is State.WAITING:
            order = order_key(slim.priority, slim.scheduled_ms, slim.created_ms, slim.id)
            if waiting is None:
                self.queue(slim.name).waiting.add(order)
            else:
                waiting.setdefault(slim.name, []).append(order)
        else:
            self.name_queue(slim.name)
        if slim.group is not None:
            group = sys.intern(slim.group)
            key = _failed_key(now_ms if slim.failed_ms is None else slim.failed_ms, slim.id)
            self._failed_of[slim.id] = (group, key)
            members = self._failed.get(group)
            if members is None:
                members = self._failed[group] = SortedList()
            members.add(key)

    def remove(self, job_id: uuid.UUID) -> Entry | None:
        """Forget a job (deleted, expired, or about to be re-put)."""
        return self._forget(job_id.int)

    def _forget(self, id_int: int) -> Entry | None:
        entry = self._unindex(id_int)
        if entry is not None and entry.tags:
            self._untag(id_int, entry.created_ms, entry.tags)
        return entry

    def _tag(self, id_int: int, created_ms: int, tags: tuple[str, ...],
             into: dict[str, list[int]] | None = None) -> None:
        """Enter a job under each of its tags (or in ``into``, to be sorted in at once
        by ``rebuild``)."""
        key = tagged_key(created_ms, id_int)
        for tag in tags:
            if into is not None:
                into.setdefault(tag, []).append(key)
                continue
            jobs = self._tagged.get(tag)
            if jobs is None:
                jobs = self._tagged[tag] = SortedList()
            jobs.add(key)

    def _untag(self, id_int: int, created_ms: int, tags: tuple[str, ...]) -> None:
        key = tagged_key(created_ms, id_int)
        for tag in tags:
            jobs = self._tagged[tag]
            jobs.discard(key)
            if not jobs:
                del self._tagged[tag]

    def _unindex(self, id_int: int) -> Entry | None:
        packed = self._entries.pop(id_int, None)
        if packed is None:
            return None
        entry = _unpack_entry(packed)
        self._partition_sizes[entry.partition] -= 1
        counts = self._state_counts[entry.name]
        counts[entry.state] -= 1
        if not any(counts):
            del self._state_counts[entry.name]
        if not self._partition_sizes[entry.partition]:
            del self._partition_sizes[entry.partition]
        failed = self._failed_of.pop(id_int, None)
        if failed is not None:
            group, key = failed
            members = self._failed[group]
            members.discard(key)
            if not members:
                del self._failed[group]
        queue = self.queues.get(entry.name)
        if queue is not None:
            order = order_key(entry.priority, entry.scheduled_ms, entry.created_ms, id_int)
            if entry.state is State.WAITING:
                queue.waiting.discard(order)
            else:
                queue.ready.discard(order)
            if entry.scheduled_ms is not None:
                queue.scheduled.discard(_scheduled_key(entry.scheduled_ms, order))
            self._release_if_empty(queue)
        # Deadline heap items are dropped lazily: they no longer match the entry.
        return entry

    def drop_partition(self, partition: int) -> None:
        self._paused.pop(partition, None)
        for name in [n for n, (p, _, _) in self._recurrences.items() if p == partition]:
            del self._recurrences[name]
            self._recurrence_queues.pop(name, None)
        if partition not in self._partition_sizes:
            return
        for id_int in [i for i, packed in self._entries.items()
                       if _ENTRY.unpack_from(packed)[1] == partition]:
            self._forget(id_int)

    def partitions(self) -> set[int]:
        """The partitions of which some job is indexed."""
        return set(self._partition_sizes)

    def rebuild(
        self, partition: int, jobs: Iterable[Slim], now_ms: int, paused: Iterable[str] = (),
        registrations: Iterable[tuple[uuid.UUID, int]] = (),
        recurrences: Iterable[Recurrence] = (),
    ) -> int:
        """Replace a partition's jobs by ``jobs``, its paused queues by ``paused`` and
        add its ``registrations`` (upstream, deadline) (its table, after a recovery).
        Their queue places are sorted in at once and the deadline heaps are heapified
        once, so 1,000,000 jobs take seconds, not a million heap pushes."""
        self.drop_partition(partition)
        for name in paused:
            self.set_paused(partition, name, True)
        ready: dict[str, list[int]] = {}
        scheduled: dict[str, list[int]] = {}
        waiting: dict[str, list[int]] = {}
        deadlines = self._deadlines
        count = 0
        tagged: dict[str, list[int]] = {}
        for slim in jobs:
            if slim.id in self._entries:  # never in one table; keep one entry per id
                self._forget(slim.id)
            self._index(slim, partition, now_ms, ready, scheduled, waiting)
            if slim.tags:
                self._tag(slim.id, slim.created_ms, slim.tags, tagged)
            lease, expires = _deadlines_of(slim)
            if lease is not None:
                deadlines.append(_deadline_item(lease, TTR, slim.id))
            if expires is not None:
                deadlines.append(_deadline_item(expires, TTL, slim.id))
            count += 1
        for name, keys in ready.items():
            self.queue(name).ready.update(keys)
        for name, keys in scheduled.items():
            self.queue(name).scheduled.update(keys)
        for name, keys in waiting.items():
            self.queue(name).waiting.update(keys)
        for tag, keys in tagged.items():
            jobs = self._tagged.get(tag)
            if jobs is None:
                self._tagged[tag] = SortedList(keys)
            else:
                jobs.update(keys)
        heapq.heapify(deadlines)
        # Those of live upstreams go with their ending or removal: no timer.
        self._registrations.extend(
            _registration_item(deadline, upstream.int) for upstream, deadline in registrations
            if upstream.int not in self._entries)
        heapq.heapify(self._registrations)
        for record in recurrences:  # a due one fires at once: missed slots, the latest
            self.put_recurrence(partition, record)
        return count

    # --- reads (from the gateway) --------------------------------------------------

    def entry(self, job_id: uuid.UUID) -> Entry | None:
        packed = self._entries.get(job_id.int)
        return None if packed is None else _unpack_entry(packed)

    def job_ids(self) -> set[uuid.UUID]:
        return {uuid.UUID(int=id_int) for id_int in self._entries}

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
        with unclaimed ready jobs, then that name's lease order (docs/protocol.md, "lease"). A paused
        queue has none to offer."""
        names = self._leasable(names)
        self.promote_due(now_ms, names)
        tried: set[uuid.UUID] = set()
        while True:
            candidates = []
            for name in names:
                queue = self.queues.get(name)
                if queue is None:
                    continue
                for key in queue.ready:
                    job_id = _id_of(key)
                    if job_id not in claimed and job_id not in tried:
                        candidates.append(job_id)
                        break
            if not candidates:
                return
            job_id = candidates[self._rng.randrange(len(candidates))]
            tried.add(job_id)
            yield job_id

    def ready_heads(
        self, names: Iterable[str], now_ms: int, claimed: set[uuid.UUID]
    ) -> dict[str, int]:
        """Each name's first unclaimed ready job's place in lease order (its key): a
        gateway of several processes leases where a name's best job is
        (docs/architecture.md, "Scaling out")."""
        names = self._leasable(names)
        self.promote_due(now_ms, names)
        heads = {}
        for name in names:
            queue = self.queues.get(name)
            if queue is None:
                continue
            for key in queue.ready:
                if _id_of(key) not in claimed:
                    heads[name] = key
                    break
        return heads

    def ready_page(self, name: str, now_ms: int, offset: int, limit: int) -> list[uuid.UUID]:
        return [job_id for _, job_id in self.ready_page_keys(name, now_ms, offset, limit)]

    def scheduled_page(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[uuid.UUID]:
        return [job_id for _, job_id in self.scheduled_page_keys(name, now_ms, offset, limit)]

    def ready_page_keys(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[tuple[int, uuid.UUID]]:
        """``ready_page`` with each job's place as an integer: the same job has the same
        key in every process, so pages of several processes merge by it."""
        queue = self.queues.get(name)
        if queue is None:
            return []
        queue.promote_due(now_ms)
        return [(key, _id_of(key)) for key in queue.ready.islice(offset, offset + limit)]

    def scheduled_page_keys(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[tuple[int, uuid.UUID]]:
        queue = self.queues.get(name)
        if queue is None:
            return []
        queue.promote_due(now_ms)
        return [(key, _id_of(key)) for key in queue.scheduled.islice(offset, offset + limit)]

    def lengths(self, name: str, now_ms: int) -> tuple[int, int]:
        """(ready-len, scheduled-len) of a queue: its WAITING jobs are in neither."""
        queue = self.queues.get(name)
        if queue is None:
            return 0, 0
        queue.promote_due(now_ms)
        return len(queue.ready), len(queue.scheduled)

    def waiting_len(self, name: str) -> int:
        """waiting-len of a queue (docs/workflows.md): its WAITING jobs."""
        queue = self.queues.get(name)
        return 0 if queue is None else len(queue.waiting)

    def waiting_page(self, name: str, offset: int, limit: int) -> list[uuid.UUID]:
        """A page of ``inspect waiting-jobs``: the queue's WAITING jobs in lease order."""
        return [job_id for _, job_id in self.waiting_page_keys(name, offset, limit)]

    def waiting_page_keys(self, name: str, offset: int, limit: int) -> list[tuple[int, uuid.UUID]]:
        """``waiting_page`` with each job's place in lease order as an integer (the same
        in every process: pages of several processes merge by it, as ready pages do)."""
        queue = self.queues.get(name)
        if queue is None:
            return []
        return [(key, _id_of(key)) for key in queue.waiting.islice(offset, offset + limit)]

    def tagged_page_keys(self, tag: str, offset: int, limit: int,
                         prefix: str | None = None) -> list[tuple[int, uuid.UUID]]:
        """A page of ``inspect tagged`` (docs/workflows.md, "Tags"): live jobs with
        ``tag``, in any state, by created time, then id, each with its place as an
        integer (``tagged_key``: the same in every process, so pages merge by it).
        ``prefix``: only jobs of queues inside it (docs/security.md)."""
        jobs = self._tagged.get(tag)
        if jobs is None:
            return []
        return self._page(jobs, offset, limit, prefix)

    def _page(self, keys: SortedList, offset: int, limit: int,
              prefix: str | None) -> list[tuple[int, uuid.UUID]]:
        """``keys[offset:offset + limit]`` (ids in their low bits) as (key, id), or with
        ``prefix`` the same page of the keys of jobs whose queue name starts with it
        (docs/security.md: a token's listings see only its queues). That one is a scan
        from the first key (each a dict lookup and a bytes compare, ~0.2 s per million
        keys passed over): no index is kept per prefix, which tokens may change."""
        if prefix is None:
            return [(key, _id_of(key)) for key in keys.islice(offset, offset + limit)]
        wanted, size = prefix.encode(), _ENTRY.size
        entries, found, skipped = self._entries, [], 0
        for key in keys:
            packed = entries.get(key & _ID_MASK)
            if packed is None or not packed.startswith(wanted, size):
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append((key, _id_of(key)))
            if len(found) >= limit:
                break
        return found

    def sees(self, job_id: uuid.UUID, prefix: str | None) -> bool:
        """Whether the live job ``job_id``'s queue is inside ``prefix`` (None: any)."""
        packed = self._entries.get(job_id.int)
        return packed is not None and (prefix is None
                                       or packed.startswith(prefix.encode(), _ENTRY.size))

    def tagged_page(self, tag: str, offset: int, limit: int,
                    prefix: str | None = None) -> list[uuid.UUID]:
        return [job_id for _, job_id in self.tagged_page_keys(tag, offset, limit, prefix)]

    def tag_counts(self) -> dict[str, int]:
        """{tag: live jobs with it} of every tag some live job has (the dashboard)."""
        return {tag: len(jobs) for tag, jobs in self._tagged.items()}

    def state_counts(self) -> dict[str, dict[State, int]]:
        """{queue name: {state: live jobs}} of the queues holding any job."""
        return {name: {state: counts[state] for state in _STATES}
                for name, counts in self._state_counts.items()}

    def jobs_in_state(self, name: str, state: State, offset: int, limit: int) -> list[uuid.UUID]:
        """A page of a queue's jobs in ``state`` (the dashboard's leased and failed
        lists), oldest first. A scan of every entry (~0.1 s per million jobs): leased
        and final jobs have no per-queue order kept, and only a person paging asks."""
        tail, code = name.encode(), int(state)
        size, tagged = _ENTRY.size, tail + _TAGS_AFTER  # a tagged job's name ends at \n
        found = [
            (_ENTRY.unpack_from(packed)[5], id_int)
            for id_int, packed in self._entries.items()
            if packed[0] == code and (packed[size:] == tail
                                      or packed[size:size + len(tagged)] == tagged)
        ]
        found.sort()
        return [uuid.UUID(int=id_int) for _, id_int in found[offset : offset + limit]]

    def failed_groups(self, prefix: str | None = None) -> list[tuple[str, int]]:
        """[eventq] (group, FAILED jobs) of every group that has some, by name bytewise
        (docs/workflows.md, ``inspect failed``); with ``prefix``, only the jobs of
        queues inside it (docs/security.md), counted by a scan of the FAILED jobs."""
        groups = sorted(self._failed, key=lambda group: group.encode())
        if prefix is None:
            return [(group, len(self._failed[group])) for group in groups]
        wanted, size, entries = prefix.encode(), _ENTRY.size, self._entries
        counted = [(group, sum(1 for key in self._failed[group]
                               if entries[key & _ID_MASK].startswith(wanted, size)))
                   for group in groups]
        return [(group, count) for group, count in counted if count]

    def failed_len(self, group: str) -> int:
        members = self._failed.get(group)
        return 0 if members is None else len(members)

    def failed_page_keys(self, group: str, offset: int, limit: int,
                         prefix: str | None = None) -> list[tuple[int, uuid.UUID]]:
        """[eventq] A page of a group's FAILED jobs, oldest failure first (failure time,
        then id), each with its key: the same in every process, so pages merge by it.
        ``prefix``: only jobs of queues inside it (docs/security.md)."""
        members = self._failed.get(group)
        if members is None:
            return []
        return self._page(members, offset, limit, prefix)

    def failed_page(self, group: str, offset: int, limit: int,
                    prefix: str | None = None) -> list[uuid.UUID]:
        return [job_id for _, job_id in self.failed_page_keys(group, offset, limit, prefix)]

    def queue_names(self, prefix: str | None = None) -> list[str]:
        """Known queue names, sorted bytewise (docs/protocol.md, "inspect"); ``prefix``: only
        those that start with it (docs/security.md)."""
        names = self.queues.keys() | self.empty_names.keys()
        if prefix is not None:
            names = {name for name in names if name.startswith(prefix)}
        return sorted(names, key=lambda name: name.encode())

    # --- timers --------------------------------------------------------------------

    def _live(self, item: int) -> Entry | None:
        """The job's entry if the heap item is still its current deadline."""
        packed = self._entries.get(item & _ID_MASK)
        if packed is None:
            return None
        entry = _unpack_entry(packed)
        lease, expires = _deadlines_of(entry)
        current = lease if (item >> _KIND_SHIFT) & 1 else expires
        return entry if current == (item >> _DEADLINE_SHIFT) + MIN_TIME_MS else None

    def due(self, now_ms: int) -> list[Due]:
        """Deadlines that have passed and still apply to the job's current state."""
        found: dict[tuple[str, int], Due] = {}
        heap = self._deadlines
        below = (now_ms - MIN_TIME_MS + 1) << _DEADLINE_SHIFT
        while heap and heap[0] < below:
            item = heapq.heappop(heap)
            entry = self._live(item)
            if entry is not None:
                kind, id_int = _KINDS[(item >> _KIND_SHIFT) & 1], item & _ID_MASK
                found[(kind, id_int)] = Due(kind, uuid.UUID(int=id_int), entry.attempts,
                                            entry.version)
        rearmed = self._rearmed
        while rearmed and rearmed[0][0] <= now_ms:
            _, kind_bit, id_int, version = heapq.heappop(rearmed)
            packed = self._entries.get(id_int)
            if packed is None or _unpack_entry(packed).version != version:
                continue
            entry = _unpack_entry(packed)
            kind = _KINDS[kind_bit]
            found[(kind, id_int)] = Due(kind, uuid.UUID(int=id_int), entry.attempts, version)
        return list(found.values())

    def put_registration(self, upstream: uuid.UUID, deadline_ms: int) -> None:
        """A registration with ``upstream``, absent, that expires at ``deadline_ms`` is
        stored (or its timer is to be checked again then): ``due_registrations`` gives
        it then."""
        heapq.heappush(self._registrations, _registration_item(deadline_ms, upstream.int))
        if len(self._registrations) > HEAP_SLACK * self._registrations_kept + 1000:
            self._registrations = sorted(set(self._registrations))  # repeats gone
            self._registrations_kept = len(self._registrations)

    def due_registrations(self, now_ms: int) -> list[uuid.UUID]:
        """Upstreams, each once, with a registration deadline passed by ``now_ms`` and
        no live job here: the timer checks their registrations in the table and sends
        ``expire`` for them if one has expired (a live upstream's are dropped by its
        ending or its removal instead: eventq/core/followups.py)."""
        heap = self._registrations
        below = (now_ms - MIN_TIME_MS + 1) << _ID_BITS
        found: dict[int, None] = {}
        while heap and heap[0] < below:
            id_int = heapq.heappop(heap) & _ID_MASK
            if id_int not in self._entries:
                found[id_int] = None
        return [uuid.UUID(int=id_int) for id_int in found]

    # --- recurrences (docs/workflows.md, "Recurring jobs") -----------------------

    def put_recurrence(self, partition: int, record: Recurrence) -> None:
        """A recurrence's record as its partition's log left it (a recur, or a fire)."""
        self._recurrences[record.name] = (partition, record.every_ms, record.next_slot)
        self._recurrence_queues[record.name] = record.definition.job_name
        heapq.heappush(self._recurrence_checks, (record.next_ms, record.name))
        if len(self._recurrence_checks) > HEAP_SLACK * len(self._recurrences) + 1000:
            self._recurrence_checks = sorted(
                (self._recurrence_next_ms(name), name) for name in self._recurrences)

    def remove_recurrence(self, name: str) -> None:
        self._recurrences.pop(name, None)
        self._recurrence_queues.pop(name, None)

    def _recurrence_next_ms(self, name: str) -> int:
        _, every_ms, next_slot = self._recurrences[name]
        return every_ms * next_slot

    def recurrence_names(self, prefix: str | None = None) -> list[str]:
        """The recurrences of the owned partitions, sorted bytewise (inspect recurring);
        ``prefix``: only those whose queue starts with it (docs/security.md)."""
        names = self._recurrences.keys()
        if prefix is not None:
            names = {name for name in names if self._recurrence_queues[name].startswith(prefix)}
        return sorted(names, key=lambda name: name.encode())

    def recurrence_next_ms(self, name: str) -> int | None:
        """When recurrence ``name``'s next slot is due (None: not one of this process)."""
        return self._recurrence_next_ms(name) if name in self._recurrences else None

    def due_recurrences(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(name, every ms, next slot) of each recurrence whose next slot is due by
        ``now_ms``: the timer sends its ``fire``, and ``rearm_recurrence``s it."""
        heap = self._recurrence_checks
        found: dict[str, tuple[str, int, int]] = {}
        while heap and heap[0][0] <= now_ms:
            _, name = heapq.heappop(heap)
            known = self._recurrences.get(name)
            if known is not None and known[1] * known[2] <= now_ms:
                found[name] = (name, known[1], known[2])
        return list(found.values())

    def rearm_recurrence(self, name: str, when_ms: int) -> None:
        """Check recurrence ``name`` again at ``when_ms`` (its fire not applied yet)."""
        if name in self._recurrences:
            heapq.heappush(self._recurrence_checks, (when_ms, name))

    def rearm(self, due: Due, when_ms: int) -> None:
        """Try a deadline again later (its command was not applied yet)."""
        entry = self.entry(due.job_id)
        if entry is not None and entry.version == due.version:
            heapq.heappush(self._rearmed,
                           (when_ms, _KIND_BITS[due.kind], due.job_id.int, due.version))

    def next_deadline_ms(self) -> int | None:
        """The earliest live deadline or scheduled wake-up, for the timer's sleep."""
        heap = self._deadlines
        while heap and self._live(heap[0]) is None:
            heapq.heappop(heap)
        candidates = [(heap[0] >> _DEADLINE_SHIFT) + MIN_TIME_MS] if heap else []
        if self._rearmed:
            candidates.append(self._rearmed[0][0])
        if self._registrations:
            candidates.append((self._registrations[0] >> _ID_BITS) + MIN_TIME_MS)
        if self._recurrence_checks:
            candidates.append(self._recurrence_checks[0][0])
        candidates.extend(
            queue.next_wake_ms for queue in self.queues.values() if queue.scheduled
        )
        return min(candidates) if candidates else None

    def _rebuild_deadlines(self) -> None:
        """Drop stale deadline items (bounded memory under churn)."""
        live = {item for item in self._deadlines if self._live(item) is not None}
        self._deadlines = sorted(live)  # a sorted list is a heap; duplicates are gone

    def __len__(self) -> int:
        return len(self._entries)
