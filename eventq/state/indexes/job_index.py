"""``JobIndex``: the indexes of the owned partitions' live jobs, kept together.

Each index is its own small class with its own invariants (this package's modules);
``JobIndex`` puts a job into all of them at once (``put``, ``rebuild``), takes it out
of all of them at once (``remove``, ``drop_partition``), and answers the processor,
the timers and the gateway by asking the one that knows.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from eventq.core.job import Job, State
from eventq.core.recurrence import Recurrence
from eventq.core.slim import Slim, slim_of

from .counts import StateCounts
from .deadlines import Deadlines, Due
from .entries import Entries, Entry
from .failed import FailureGroups
from .paused import Paused
from .queues import Placement, Queue, Queues
from .recurrences import Recurrences
from .registrations import Registrations
from .tags import Tagged


class JobIndex:
    """The live jobs of the owned partitions, indexed for lease, inspect and timers."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._entries = Entries()
        self._queues = Queues()
        self._counts = StateCounts()
        self._tagged = Tagged()
        self._failed = FailureGroups()
        self._deadlines = Deadlines(self._entries)
        self._registrations = Registrations(self._entries)
        self._recurrences = Recurrences()
        self._paused = Paused()
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def queues(self) -> dict[str, Queue]:
        """The queues holding ready, scheduled or WAITING jobs, by name."""
        return self._queues.by_name

    @property
    def empty_names(self) -> OrderedDict[str, None]:
        """The names known without such jobs, least recently named first."""
        return self._queues.empty.names

    # --- updates (from the processor) ----------------------------------------------

    def queue(self, name: str) -> Queue:
        """The queue of a name, to hold a job (created if it holds none yet)."""
        return self._queues.queue(name)

    def name_queue(self, name: str) -> None:
        """A lease names its queues into being (docs/protocol.md, "inspect")."""
        self._queues.name(name)

    def known(self, name: str) -> bool:
        return self._queues.known(name)

    def set_paused(self, partition: int, name: str, paused: bool) -> None:
        """A pause or resume applied in ``partition`` (it also names the queue)."""
        self._paused.set(partition, name, paused)
        self._queues.name(name)

    def is_paused(self, name: str) -> bool:
        return name in self._paused

    def put(self, job: Job, partition: int, now_ms: int, record_ms: int | None = None) -> None:
        """Index the job's current state (after any applied command, at broker time
        ``record_ms``: a FAILED job's failure time, job.failure_time_ms)."""
        self.put_slim(slim_of(job, record_ms), partition, now_ms)

    def put_slim(self, slim: Slim, partition: int, now_ms: int) -> None:
        old = self._unindex(slim.id)
        self._index(slim, partition, now_ms)
        self._tagged.change(old, slim)
        self._deadlines.arm(old, slim, now_ms)

    def _index(self, slim: Slim, partition: int, now_ms: int,
               placement: Placement | None = None) -> None:
        """Enter the job in the entries, its counts, its queue (or ``placement``, to
        be sorted into the queues at once by ``rebuild``) and its failure group."""
        self._entries.put(slim, partition)
        self._counts.add(slim.name, slim.state)
        self._queues.enter(slim, now_ms, placement)
        if slim.group is not None:
            self._failed.add(slim.id, slim.group,
                             now_ms if slim.failed_ms is None else slim.failed_ms)

    def _unindex(self, id_int: int) -> Entry | None:
        """Take the job out of every index but its tags' (``put_slim`` keeps them when
        they do not change). Deadline items are dropped lazily: they no longer match."""
        entry = self._entries.pop(id_int)
        if entry is None:
            return None
        self._counts.remove(entry.name, entry.state)
        self._failed.discard(id_int)
        self._queues.leave(entry, id_int)
        return entry

    def remove(self, job_id: uuid.UUID) -> Entry | None:
        """Forget a job (deleted, expired, or about to be re-put)."""
        return self._forget(job_id.int)

    def _forget(self, id_int: int) -> Entry | None:
        entry = self._unindex(id_int)
        if entry is not None and entry.tags:
            self._tagged.discard(id_int, entry.created_ms, entry.tags)
        return entry

    def drop_partition(self, partition: int) -> None:
        self._paused.drop_partition(partition)
        self._recurrences.drop_partition(partition)
        for id_int in self._entries.ids_in(partition):
            self._forget(id_int)

    def partitions(self) -> set[int]:
        """The partitions of which some job is indexed."""
        return self._entries.partitions()

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
        placement = Placement()
        tagged: dict[str, list[int]] = {}
        count, indexed = 0, self._entries.ids()  # a view: ``in`` is a dict lookup
        for slim in jobs:
            if slim.id in indexed:  # never in one table; keep one entry per id
                self._forget(slim.id)
            self._index(slim, partition, now_ms, placement)
            if slim.tags:
                self._tagged.add(slim.id, slim.created_ms, slim.tags, tagged)
            self._deadlines.add(slim)
            count += 1
        self._queues.fill(placement)
        self._tagged.fill(tagged)
        self._deadlines.heapify()
        self._registrations.add_all(registrations)
        for record in recurrences:  # a due one fires at once: missed slots, the latest
            self._recurrences.put(partition, record)
        return count

    # --- reads (from the gateway) --------------------------------------------------

    def entry(self, job_id: uuid.UUID) -> Entry | None:
        return self._entries.get(job_id.int)

    def job_ids(self) -> set[uuid.UUID]:
        return {uuid.UUID(int=id_int) for id_int in self._entries.ids()}

    def sees(self, job_id: uuid.UUID, prefix: str | None) -> bool:
        """Whether the live job ``job_id``'s queue is inside ``prefix`` (None: any)."""
        return self._entries.sees(job_id.int, prefix)

    def promote_due(self, now_ms: int, names: Iterable[str] | None = None) -> list[str]:
        """Wake scheduled jobs whose time has come; returns a queue's name once for
        each job that became ready there (each may wake one lease waiter)."""
        return self._queues.promote_due(now_ms, names)

    def ready_candidates(
        self, names: Iterable[str], now_ms: int, claimed: set[uuid.UUID]
    ) -> Iterator[uuid.UUID]:
        """Ready jobs to try leasing, best first: a uniformly random name among those
        with unclaimed ready jobs, then that name's lease order (docs/protocol.md,
        "lease"). A paused queue has none to offer."""
        leasable = self._paused.leasable(names)
        self._queues.promote_due(now_ms, leasable)
        yield from self._queues.ready_candidates(leasable, claimed, self._rng)

    def ready_heads(
        self, names: Iterable[str], now_ms: int, claimed: set[uuid.UUID]
    ) -> dict[str, int]:
        """Each name's first unclaimed ready job's place in lease order (its key): a
        gateway of several processes leases where a name's best job is
        (docs/architecture.md, "Scaling out")."""
        leasable = self._paused.leasable(names)
        self._queues.promote_due(now_ms, leasable)
        return self._queues.ready_heads(leasable, claimed)

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
        return self._queues.ready_page_keys(name, now_ms, offset, limit)

    def scheduled_page_keys(
        self, name: str, now_ms: int, offset: int, limit: int
    ) -> list[tuple[int, uuid.UUID]]:
        return self._queues.scheduled_page_keys(name, now_ms, offset, limit)

    def lengths(self, name: str, now_ms: int) -> tuple[int, int]:
        """(ready-len, scheduled-len) of a queue: its WAITING jobs are in neither."""
        return self._queues.lengths(name, now_ms)

    def waiting_len(self, name: str) -> int:
        """waiting-len of a queue (docs/workflows.md, "inspect waiting-jobs"): its WAITING
        jobs."""
        return self._queues.waiting_len(name)

    def waiting_page(self, name: str, offset: int, limit: int) -> list[uuid.UUID]:
        """A page of ``inspect waiting-jobs``: the queue's WAITING jobs in lease order."""
        return [job_id for _, job_id in self.waiting_page_keys(name, offset, limit)]

    def waiting_page_keys(self, name: str, offset: int, limit: int) -> list[tuple[int, uuid.UUID]]:
        """``waiting_page`` with each job's place in lease order as an integer (the same
        in every process: pages of several processes merge by it, as ready pages do)."""
        return self._queues.waiting_page_keys(name, offset, limit)

    def queue_names(self, prefix: str | None = None) -> list[str]:
        """Known queue names, sorted bytewise (docs/protocol.md, "inspect"); ``prefix``:
        only those that start with it (docs/security.md, "Queue-name prefixes")."""
        return self._queues.names(prefix)

    def tagged_page_keys(self, tag: str, offset: int, limit: int,
                         prefix: str | None = None) -> list[tuple[int, uuid.UUID]]:
        """A page of ``inspect tagged`` (docs/workflows.md, "Tags"): live jobs with
        ``tag``, in any state, by created time, then id, each with its place as an
        integer (``tagged_key``: the same in every process, so pages merge by it).
        ``prefix``: only jobs of queues inside it (docs/security.md, "Queue-name
        prefixes")."""
        jobs = self._tagged.get(tag)
        if jobs is None:
            return []
        return self._entries.page(jobs, offset, limit, prefix)

    def tagged_page(self, tag: str, offset: int, limit: int,
                    prefix: str | None = None) -> list[uuid.UUID]:
        return [job_id for _, job_id in self.tagged_page_keys(tag, offset, limit, prefix)]

    def tag_counts(self) -> dict[str, int]:
        """{tag: live jobs with it} of every tag some live job has (the dashboard)."""
        return self._tagged.counts()

    def state_counts(self) -> dict[str, dict[State, int]]:
        """{queue name: {state: live jobs}} of the queues holding any job."""
        return self._counts.by_name()

    def jobs_in_state(self, name: str, state: State, offset: int, limit: int) -> list[uuid.UUID]:
        """A page of a queue's jobs in ``state`` (the dashboard's leased and failed
        lists), oldest first."""
        found = self._entries.in_state(name, state)
        return [uuid.UUID(int=id_int) for id_int in found[offset : offset + limit]]

    def failed_groups(self, prefix: str | None = None) -> list[tuple[str, int]]:
        """[eventq] (group, FAILED jobs) of every group that has some, by name bytewise
        (docs/workflows.md, "inspect failed and inspect failed-jobs"); with ``prefix``,
        only the jobs of queues inside it (docs/security.md, "Queue-name prefixes"),
        counted by a scan of the FAILED jobs."""
        groups = self._failed.by_name()
        if prefix is None:
            return [(group, len(members)) for group, members in groups]
        counted = [(group, self._entries.count_inside(members, prefix))
                   for group, members in groups]
        return [(group, count) for group, count in counted if count]

    def failed_len(self, group: str) -> int:
        members = self._failed.get(group)
        return 0 if members is None else len(members)

    def failed_page_keys(self, group: str, offset: int, limit: int,
                         prefix: str | None = None) -> list[tuple[int, uuid.UUID]]:
        """[eventq] A page of a group's FAILED jobs, oldest failure first (failure time,
        then id), each with its key: the same in every process, so pages merge by it.
        ``prefix``: only jobs of queues inside it (docs/security.md, "Queue-name
        prefixes")."""
        members = self._failed.get(group)
        if members is None:
            return []
        return self._entries.page(members, offset, limit, prefix)

    def failed_page(self, group: str, offset: int, limit: int,
                    prefix: str | None = None) -> list[uuid.UUID]:
        return [job_id for _, job_id in self.failed_page_keys(group, offset, limit, prefix)]

    # --- timers --------------------------------------------------------------------

    def due(self, now_ms: int) -> list[Due]:
        """Deadlines that have passed and still apply to the job's current state."""
        return self._deadlines.due(now_ms)

    def rearm(self, due: Due, when_ms: int) -> None:
        """Try a deadline again later (its command was not applied yet)."""
        self._deadlines.rearm(due, when_ms)

    def put_registration(self, upstream: uuid.UUID, deadline_ms: int) -> None:
        """A registration with ``upstream``, absent, that expires at ``deadline_ms`` is
        stored (or its timer is to be checked again then): ``due_registrations`` gives
        it then."""
        self._registrations.put(upstream, deadline_ms)

    def due_registrations(self, now_ms: int) -> list[uuid.UUID]:
        """Upstreams, each once, with a registration deadline passed by ``now_ms`` and
        no live job here: the timer checks their registrations in the table and sends
        ``expire`` for them if one has expired (a live upstream's are dropped by its
        ending or its removal instead: eventq/core/followups.py)."""
        return self._registrations.due(now_ms)

    def next_deadline_ms(self) -> int | None:
        """The earliest live deadline or scheduled wake-up, for the timer's sleep."""
        candidates = [self._deadlines.next_ms(), self._registrations.next_ms(),
                      self._recurrences.next_check_ms(), self._queues.next_wake_ms()]
        return min((when for when in candidates if when is not None), default=None)

    # --- recurrences (docs/workflows.md, "Recurring jobs") -----------------------

    def put_recurrence(self, partition: int, record: Recurrence) -> None:
        """A recurrence's record as its partition's log left it (a recur, or a fire)."""
        self._recurrences.put(partition, record)

    def remove_recurrence(self, name: str) -> None:
        self._recurrences.remove(name)

    def recurrence_names(self, prefix: str | None = None) -> list[str]:
        """The recurrences of the owned partitions, sorted bytewise (inspect recurring);
        ``prefix``: only those whose queue starts with it (docs/security.md, "Queue-name
        prefixes")."""
        return self._recurrences.names(prefix)

    def recurrence_next_ms(self, name: str) -> int | None:
        """When recurrence ``name``'s next slot is due (None: not one of this process)."""
        return self._recurrences.next_ms(name)

    def due_recurrences(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(name, every ms, next slot) of each recurrence whose next slot is due by
        ``now_ms``: the timer sends its ``fire``, and ``rearm_recurrence``s it."""
        return self._recurrences.due(now_ms)

    def rearm_recurrence(self, name: str, when_ms: int) -> None:
        """Check recurrence ``name`` again at ``when_ms`` (its fire not applied yet)."""
        self._recurrences.rearm(name, when_ms)
