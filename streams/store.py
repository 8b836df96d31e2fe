"""Reading the `jobs` table outside faust's streams, only from actively owned partitions.

faust's own ``table.get`` outside a stream searches every open RocksDB, standby copies
included (a trap: a standby may be behind). eventq knows a job's partition from its id
(murmur2, as every producer), so it reads exactly that partition's RocksDB, and only
when this worker actively owns it.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Iterable, Iterator, Protocol

from rocksdict import WriteBatch

from eventq.core import (
    CodecError,
    Input,
    Job,
    decode_input,
    decode_recurrence,
    decode_registration,
    decode_state,
)
from eventq.core.commands import recurrence_key
from eventq.core.digest import InputEntry
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.recurrence import RECURRENCE_TABLE_PREFIX, Recurrence, recurrence_table_key
from eventq.core.slim import Slim
from eventq.core.workflow import (
    INPUT_KEY_PREFIX,
    REGISTRATION_KEY_PREFIX,
    input_ids,
    input_key,
    inputs_prefix,
    registration_ids,
    registrations_prefix,
)
from eventq.state.jobs_table import PAUSED_KEY_PREFIX, is_job_key, read_pause_record, slims_of

log = logging.getLogger(__name__)


class NotOwned(Exception):
    """The job's partition is not actively owned by this worker (yet)."""


class FaustTable(Protocol):
    """What is read of faust's `jobs` Table (streams/faust/app.py): its Store, whose
    per-partition RocksDB faust's types do not declare, hence Any."""

    @property
    def data(self) -> Any: ...


class TableSnapshot(Protocol):
    """A partition's table as it was at one moment (rocksdict's Snapshot)."""

    def __getitem__(self, key: bytes) -> Any: ...

    def keys(self, *, from_key: bytes | None = None) -> Iterable[Any]: ...


class TableDB(Protocol):
    """One partition's table: rocksdict's Rdict in raw mode (faust's RocksDB store),
    whose keys and values are bytes but typed Any by its stubs; or, without RocksDB,
    streams/memory.py's MemoryDB."""

    def get(self, key: bytes, default: None = None) -> Any: ...

    def items(self, *, from_key: bytes | None = None,
              read_opt: Any = None) -> Iterator[tuple[Any, Any]]: ...

    def keys(self, *, from_key: bytes | None = None) -> Iterable[Any]: ...

    def snapshot(self) -> TableSnapshot: ...

    def write(self, batch: Any, /) -> None:
        """Rdict: a rocksdict WriteBatch (``write_records``); MemoryDB: the records."""


class PinnedJobs:
    """Jobs read as they were at one moment (a RocksDB snapshot per partition), however
    long the reply that shows them takes to write: `inspect jobs` of 100 jobs of 1 MiB
    is streamed, not built in memory (docs/architecture.md, "Hostile inputs"), and the
    processor may change the jobs meanwhile."""

    def __init__(self, store: "JobStore", snapshots: dict[int, TableSnapshot]) -> None:
        self._store = store
        self._snapshots = snapshots

    def has(self, job_id: uuid.UUID) -> bool:
        return self._raw(job_id) is not None

    def get(self, job_id: uuid.UUID) -> Job | None:
        raw = self._raw(job_id)
        if raw is None:
            return None
        return self._store.decode(raw, self._store.partition_of(job_id), job_key(job_id))

    def inputs(self, job: Job) -> tuple[int, Iterator[tuple[uuid.UUID, Input]]]:
        """A dependent's inputs as they were at the same moment as the job (see
        ``JobStore.inputs``): how many, then each in -after order, read only when the
        reply reaches it: up to 100 inputs of 1 MiB are written one at a time, never
        held together (docs/architecture.md, "Hostile inputs")."""
        snapshot = self._snapshots[self._store.partition_of(job.id)]
        prefix = inputs_prefix(job.id)
        present = set()
        for key in snapshot.keys(from_key=prefix):  # keys only: no result is kept
            if not key.startswith(prefix):
                break
            present.add(key)
        ordered = [link.id for link in job.upstreams if input_key(job.id, link.id) in present]
        return len(ordered), self._read_inputs(job.id, ordered)

    def _read_inputs(self, dependent: uuid.UUID,
                     upstreams: list[uuid.UUID]) -> Iterator[tuple[uuid.UUID, Input]]:
        for upstream in upstreams:
            raw = self._read(dependent, input_key(dependent, upstream))
            if raw is None:  # listed by the same snapshot: cannot happen
                raise CodecError(f"the input of {dependent} from {upstream} vanished")
            yield upstream, decode_input(raw)

    def _raw(self, job_id: uuid.UUID) -> bytes | None:
        return self._read(job_id, job_key(job_id))

    def _read(self, job_id: uuid.UUID, key: bytes) -> bytes | None:
        snapshot = self._snapshots[self._store.partition_of(job_id)]
        try:
            raw: bytes | None = snapshot[key]
        except Exception:  # rocksdict's snapshot says "key not found" this way
            return None
        return raw


class JobStore:
    def __init__(self, table: FaustTable | None, partitions: int) -> None:
        self._table = table
        self._partitions = partitions
        self.active: frozenset[int] = frozenset()  # set by the processor on recovery
        self.undecodable = 0

    def partition_of(self, job_id: uuid.UUID) -> int:
        return partition_for_key(job_key(job_id), self._partitions)

    def db(self, partition: int) -> TableDB:
        """The partition's rocksdict DB, owned or not (recovery and rollback write it)."""
        # faust's RocksDB Store keeps one rocksdict DB per partition (tables/base.py).
        # (No table: a MemoryStore, which answers its own.)
        table: Any = self._table
        db: TableDB = table.data._db_for_partition(partition)
        return db

    # --- the processor's access (for the partition of the record it applies) -------

    def read(self, partition: int, key: bytes) -> bytes | None:
        raw: bytes | None = self.db(partition).get(key)
        return raw

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The records whose keys start with ``prefix``, in key order (a workflow's
        records beside the jobs: eventq/core/workflow.py)."""
        for key, value in self.db(partition).items(from_key=prefix):
            if not key.startswith(prefix):
                break
            yield key, value

    def write_batch(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Store the records of one applied batch atomically (a RocksDB write batch;
        value None deletes). The processor sends the same records to the changelog
        (streams/faust/transactions.py): together the two effects of faust's ``table[key] =
        value``, per batch instead of per key, with the partition stated instead of
        taken from ``current_event()``."""
        write_records(self.db(partition), records)

    # --- the gateway's access -----------------------------------------------------

    def get(self, job_id: uuid.UUID) -> Job | None:
        partition = self.partition_of(job_id)
        if partition not in self.active:
            raise NotOwned(partition)
        raw = self.db(partition).get(job_key(job_id))
        return self.decode(raw, partition, job_key(job_id)) if raw is not None else None

    def inputs(self, job: Job) -> list[tuple[uuid.UUID, Input]]:
        """A dependent's inputs (docs/workflows.md, "Inputs"): for each upstream
        that has finished, in -after order, what it handed on (eventq/core/workflow.py).
        Read from the owned partition of ``job`` (as ``get`` read it: read both from one
        ``pinned`` view where they must agree)."""
        partition = self.partition_of(job.id)
        if partition not in self.active:
            raise NotOwned(partition)
        db = self.db(partition)
        found = []
        for link in job.upstreams:
            raw = db.get(input_key(job.id, link.id))
            if raw is not None:
                found.append((link.id, decode_input(raw)))
        return found

    def dependents(self, upstream: uuid.UUID, limit: int) -> list[uuid.UUID]:
        """Up to ``limit`` dependents registered with ``upstream``, in id order: its
        registrations' prefix scan (eventq/core/workflow.py), whether the upstream is
        there or not (the dashboard's job page: docs/architecture.md, "Workflows")."""
        partition = self.partition_of(upstream)
        if partition not in self.active:
            raise NotOwned(partition)
        found: list[uuid.UUID] = []
        for key, _ in self.scan(partition, registrations_prefix(upstream)):
            if len(found) == limit:
                break
            try:
                found.append(registration_ids(key)[1])
            except ValueError as error:
                self._undecodable(partition, key, error)
        return found

    def earliest_registration_ms(self, upstream: uuid.UUID) -> int | None:
        """The earliest deadline among the registrations stored with ``upstream`` (None:
        none with a deadline, or its partition is not owned here): when a timer's
        ``expire`` of it, absent, drops one (streams/timers.py)."""
        partition = self.partition_of(upstream)
        if partition not in self.active:
            return None
        earliest = None
        for key, raw in self.scan(partition, registrations_prefix(upstream)):
            try:
                deadline = decode_registration(raw).deadline_ms
            except CodecError as error:
                self._undecodable(partition, key, error)
                continue
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def registrations_in(self, partition: int) -> Iterator[tuple[uuid.UUID, int]]:
        """(upstream, deadline) of every registration with a deadline stored in a
        partition (to rebuild the timers of the indexes)."""
        for key, raw in self.scan(partition, REGISTRATION_KEY_PREFIX):
            try:
                deadline = decode_registration(raw).deadline_ms
                upstream = registration_ids(key)[0]
            except (CodecError, ValueError) as error:
                self._undecodable(partition, key, error)
                continue
            if deadline is not None:
                yield upstream, deadline

    def inputs_in(self, partition: int) -> Iterator[InputEntry]:
        """(dependent, upstream, input) of every input stored in a partition (for the
        digest, which covers them: eventq/core/digest.py)."""
        for key, raw in self.scan(partition, INPUT_KEY_PREFIX):
            try:
                dependent, upstream = input_ids(key)
                entry = decode_input(raw)
            except (CodecError, ValueError) as error:
                self._undecodable(partition, key, error)
                continue
            yield dependent, upstream, entry

    def recurrences_in(self, partition: int) -> Iterator[Recurrence]:
        """Every recurrence's record stored in a partition (to rebuild the index and
        its timers: docs/workflows.md, "Recurring jobs")."""
        for key, raw in self.scan(partition, RECURRENCE_TABLE_PREFIX):
            try:
                yield decode_recurrence(raw)
            except CodecError as error:
                self._undecodable(partition, key, error)

    def recurrence_partition(self, name: str) -> int:
        return partition_for_key(recurrence_key(name), self._partitions)

    def recurrence(self, name: str) -> Recurrence | None:
        """Recurrence ``name``'s record, from its owned partition (``NotOwned`` if not)."""
        partition = self.recurrence_partition(name)
        if partition not in self.active:
            raise NotOwned(partition)
        key = recurrence_table_key(name)
        raw = self.db(partition).get(key)
        if raw is None:
            return None
        try:
            return decode_recurrence(raw)
        except CodecError as error:
            self._undecodable(partition, key, error)
            return None

    def pinned(self, job_ids: Iterable[uuid.UUID]) -> PinnedJobs:
        """A consistent view of ``job_ids`` for a long reply (see ``PinnedJobs``)."""
        partitions = {self.partition_of(job_id) for job_id in job_ids}
        for partition in partitions:
            if partition not in self.active:
                raise NotOwned(partition)
        return PinnedJobs(self, {p: self.db(p).snapshot() for p in partitions})

    def decode(self, raw: bytes, partition: int, key: bytes) -> Job | None:
        try:
            _, job = decode_state(raw)
        except CodecError as error:
            self.undecodable += 1
            log.error(
                "undecodable state record for key %r in partition %d: %s (skipped)",
                key,
                partition,
                error,
            )
            return None
        return job

    def slims_in(self, partition: int) -> Iterator[Slim]:
        """The slim projection of every live job stored for a partition (to rebuild the
        indexes: eventq/core/slim.py)."""
        return slims_of(self.db(partition), partition, self._undecodable)

    def paused_in(self, partition: int) -> list[str]:
        """The queues paused in ``partition`` (its pause records are sorted together)."""
        paused = []
        for key, value in self.db(partition).items(from_key=PAUSED_KEY_PREFIX):
            if not key.startswith(PAUSED_KEY_PREFIX):
                break
            if read_pause_record(value)[0]:
                paused.append(key[len(PAUSED_KEY_PREFIX):].decode())
        return paused

    def _undecodable(self, partition: int, key: bytes, error: Exception) -> None:
        self.undecodable += 1
        log.error("undecodable state record for key %r in partition %d: %s (skipped)",
                  key, partition, error)

    def jobs_in(self, partition: int) -> Iterator[Job]:
        """Every live job stored for a partition, fully decoded (for the digest)."""
        for key, raw in self.db(partition).items():
            if not is_job_key(key) or raw is None:
                continue
            job = self.decode(raw, partition, key)
            if job is not None:
                yield job


def write_records(db: TableDB, records: Iterable[tuple[bytes, bytes | None]]) -> None:
    """Write (key, value) records to a table's DB atomically (one RocksDB write batch;
    value None deletes)."""
    batch = WriteBatch(raw_mode=True)
    for key, value in records:
        if value is None:
            batch.delete(key)
        else:
            batch.put(key, value)
    db.write(batch)
