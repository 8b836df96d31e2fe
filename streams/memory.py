"""The processor without a broker or RocksDB: a dict-backed jobs table, a command log
in lists, and a driver that feeds one to the processor over the other
(docs/architecture.md, "Testing without a broker").

- ``MemoryStore``: the jobs table (streams/store.py ``JobStore``, every method of it)
  over one dict per partition instead of faust's RocksDB.
- ``MemoryLog``: `eventq.commands` as one list of records per partition, each with its
  offset and the broker's LogAppendTime; commands are appended as the gateway's writer
  appends them (streams/command_writer.py: one command alone is a plain record under
  its job's key, more are a batch record, eventq/core/batch.py), bulk slices as the
  admission writes them (docs/architecture.md, "Lanes").
- ``Driver``: a ``Processor`` (streams/processor.py) fed a partition's records in offset
  order, with the changelog and its commit points (docs/architecture.md, "The
  changelog"): ``commit`` remembers each partition's changelog and its next offset,
  ``crash`` is a kill -9 between apply and commit (the table back to what the changelog
  holds once recovered, a new processor, the uncommitted tail read again). Workflows'
  follow-up commands (streams/follow_ups.py) go into the log as the broker would take
  them: at once, or (``acks_at_once=False``) when ``ack`` or a ``commit``, which waits
  for them as streams/faust/transactions.py does, acknowledges them; a crash loses those not
  acknowledged yet (or, told so, finds them written).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Callable

from eventq.core import Command, QueueCommand
from eventq.core.batch import BatchBuilder, SliceSource, encode_slice, position
from eventq.core.commands import QUEUE_COMMANDS, RECURRENCE_COMMANDS, RecurrenceCommand
from eventq.core.followups import FollowUp
from eventq.core.partitioner import job_key, partition_for_key
from eventq.state.indexes import JobIndex
from eventq.state.waiters import Waiters
from streams.engine import command_record
from streams.processor import AlwaysHeld, Processor
from streams.store import JobStore

START_MS = 1_800_000_000_000  # a MemoryLog's broker clock starts here unless told

# What a MemoryLog appends: a command, or an encoded record of one (any bytes, a broken
# one too).
LogCommand = Command | QueueCommand | RecurrenceCommand
Appended = LogCommand | bytes


class MemoryDB:
    """One partition's table: what streams/store.py and eventq/state/jobs_table.py read of a
    rocksdict DB (``get``, sorted ``items``, ``keys``, ``snapshot``)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[bytes, bytes] | None = None) -> None:
        self.data: dict[bytes, bytes] = {} if data is None else data

    def get(self, key: bytes, default: bytes | None = None) -> bytes | None:
        return self.data.get(key, default)

    def items(self, from_key: bytes | None = None,
              read_opt: object = None) -> Iterator[tuple[bytes, bytes]]:
        for key in sorted(self.data):
            if from_key is None or key >= from_key:
                yield key, self.data[key]

    def keys(self, from_key: bytes | None = None) -> list[bytes]:
        return [key for key in sorted(self.data) if from_key is None or key >= from_key]

    def snapshot(self) -> "MemoryDB":
        """A copy, read like rocksdict's Snapshot (``[key]``, ``keys(from_key=)``)."""
        return MemoryDB(dict(self.data))

    def __getitem__(self, key: bytes) -> bytes:
        return self.data[key]

    def write(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write (key, value) records in order (value None deletes)."""
        for key, value in records:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value


class MemoryStore(JobStore):
    """The jobs table in dicts, one per partition. Every partition is active unless
    ``active`` says otherwise (the processor's ``applied`` and ``applied_offsets`` read
    it, as the gateway's reads do)."""

    def __init__(self, partitions: int = 1, active: Iterable[int] | None = None) -> None:
        super().__init__(table=None, partitions=partitions)
        self.dbs: dict[int, MemoryDB] = {}
        self.active = frozenset(range(partitions) if active is None else active)

    def db(self, partition: int) -> MemoryDB:
        db = self.dbs.get(partition)
        if db is None:
            db = self.dbs[partition] = MemoryDB()
        return db

    def table(self, partition: int) -> dict[bytes, bytes]:
        """The partition's records as a dict (its live view, not a copy)."""
        return self.db(partition).data

    def write_batch(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        self.db(partition).write(records)

    async def persist(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """A processor's ``persist`` with no changelog: the table only."""
        self.write_batch(partition, records)


@dataclass(frozen=True)
class Message:
    """One record of a topic, as eventq's log readers give it
    (eventq/kafka/logreader.py ``Record``: ``timestamp_ms``, key, value); ``fetched``
    is the same record as the processor is handed it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int  # LogAppendTime: stamped by the broker
    key: bytes | None = None
    value: bytes | None = None

    def fetched(self) -> Fetched:
        """This record as the fetcher hands it over (streams/faust/command_fetch.py), with
        what the processor reads of aiokafka's ConsumerRecord: ``timestamp`` in ms."""
        return Fetched(self.topic, self.partition, self.offset, self.timestamp_ms, self.key,
                       self.value)


@dataclass(frozen=True)
class Fetched:
    """A fetched record as ``Processor.handle_batch`` reads it (the fields of aiokafka's
    ConsumerRecord it uses, with no aiokafka here: streams/faust holds that)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms
    key: bytes | None
    value: bytes | None


class MemoryLog:
    """A topic of ``partitions`` partitions in lists. Its clock is the broker's: every
    record appended is stamped with ``now_ms`` (``advance`` moves it on)."""

    def __init__(
        self, partitions: int, topic: str = "eventq.commands", start_ms: int = START_MS
    ) -> None:
        self.partitions = partitions
        self.topic = topic
        self.start_ms = self.now_ms = start_ms
        self._records: list[list[Message]] = [[] for _ in range(partitions)]

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def partition_of(self, job_id: uuid.UUID) -> int:
        return partition_for_key(job_key(job_id), self.partitions)

    def partition_of_key(self, key: bytes) -> int:
        return partition_for_key(key, self.partitions)

    def append(self, partition: int, value: bytes | None, key: bytes | None = None) -> Message:
        """Append one record as it is (any value, a broken one too)."""
        records = self._records[partition]
        message = Message(self.topic, partition, len(records), self.now_ms, key, value)
        records.append(message)
        return message

    def append_commands(self, partition: int, commands: Sequence[Appended]) -> list[int]:
        """Append commands (``Command`` objects or encoded records) to ``partition`` as
        one record, as the gateway's writer does: a single command is a plain record
        under its job's key, more are a batch record without a key. Returns each
        command's position."""
        if not commands:
            raise ValueError("a record holds at least one command")
        builder = BatchBuilder(max_commands=len(commands), max_bytes=2**62)
        for command in commands:
            self._check_partition(partition, command)
            builder.add(command if isinstance(command, bytes) else command_record(command))
        key = _key_of(commands[0]) if len(commands) == 1 else None
        message = self.append(partition, builder.take(), key)
        return [position(message.offset, index) for index in range(len(commands))]

    def append_command(self, command: Command | RecurrenceCommand) -> int:
        """Append one job command to its job's partition: its position."""
        if isinstance(command, QUEUE_COMMANDS):
            raise ValueError("a queue's command goes to every partition: append_everywhere")
        if isinstance(command, RECURRENCE_COMMANDS):
            return self.append_commands(self.partition_of_key(command.key), [command])[0]
        return self.append_commands(self.partition_of(command.job_id), [command])[0]

    def append_everywhere(self, command: QueueCommand) -> None:
        """A queue's command (pause, resume) in every partition, as the gateway writes
        it (streams/engine.py ``submit_everywhere``)."""
        for partition in range(self.partitions):
            self.append_commands(partition, [command])

    def append_slice(self, source: SliceSource, commands: Sequence[Appended]) -> Message:
        """A slice admitted from bulk partition ``source.partition`` into the same
        partition of this log (docs/architecture.md, "Lanes"); appending the same
        slice twice is an admission repeated after a crash."""
        encoded = []
        for command in commands:
            self._check_partition(source.partition, command)
            encoded.append(command if isinstance(command, bytes) else command_record(command))
        return self.append(source.partition, encode_slice(source, encoded))

    def _check_partition(self, partition: int, command: Appended) -> None:
        if isinstance(command, bytes) or isinstance(command, QUEUE_COMMANDS):
            return
        if isinstance(command, RECURRENCE_COMMANDS):
            if self.partition_of_key(command.key) != partition:
                raise ValueError(f"recurrence {command.name} is not in partition {partition}")
            return
        if self.partition_of(command.job_id) != partition:
            raise ValueError(f"job {command.job_id} is in partition "
                             f"{self.partition_of(command.job_id)}, not {partition}")

    def records(self, partition: int, start: int = 0) -> list[Message]:
        return self._records[partition][start:]

    def end(self, partition: int) -> int:
        """The next offset of ``partition`` (its record count: nothing is deleted)."""
        return len(self._records[partition])

    def __iter__(self) -> Iterator[Message]:
        """Every record, partition by partition in offset order (as eventq's readers
        read a topic: eventq/kafka/logreader.py ``read_topic``)."""
        for records in self._records:
            yield from records


def _key_of(command: Appended) -> bytes | None:
    if isinstance(command, bytes):
        return None
    if isinstance(command, QUEUE_COMMANDS):
        return b"queue:" + command.name.encode()  # as streams/engine.py writes it
    if isinstance(command, RECURRENCE_COMMANDS):
        return command.key  # recur:<name>
    return job_key(command.job_id)


class _Seeks(AlwaysHeld):
    """The driver's ownership: partitions are always held, nothing is deleted by
    retention, and reading a partition again moves the driver's fetch position."""

    def __init__(self, driver: "Driver") -> None:
        self._driver = driver

    async def log_start(self, partition: int) -> int | None:
        return 0

    async def read_again(self, partition: int, offset: int) -> None:
        self._driver.fetch[partition] = offset
        self._driver.seeking[partition] = offset


Changelog = list[tuple[bytes, "bytes | None"]]


class Driver:
    """A processor over a ``MemoryStore`` fed a ``MemoryLog``, partition by partition in
    offset order, as the fetcher feeds it (streams/faust/command_fetch.py), and a
    changelog per partition with commit points (docs/architecture.md, "The changelog").

    ``deliver`` hands records to the processor from each partition's fetch position;
    ``rewind`` and ``skip`` move that position back (records delivered again) or on
    (a fetcher that passed over records: the processor asks to read them again).
    ``commit`` is a transaction committed: each partition's changelog so far and the
    processor's next offset. ``crash`` is a kill -9 at any point after the last commit:
    the table is rebuilt from the changelog as recovery leaves it (the committed
    records, and ``keep`` more of those written since: 0 for a transactional changelog,
    more for any prefix of it, which the processor's changelog order keeps safe), a new
    processor with a new index resumes at the committed offsets, and the tail after them
    is read again.

    Follow-ups the processor hands on (``follow_up``) are appended to the log, in their
    keys' partitions, once acknowledged: at once by default;
    with ``acks_at_once=False`` they stay ``in_flight`` until ``ack`` or a ``commit``.
    A table ahead of its commit holds at most the records whose follow-ups were
    acknowledged (``acked``): eventq never keeps one (docs/architecture.md,
    "Workflows"), and beyond that point it could hold a state whose follow-ups were
    never written."""

    def __init__(
        self,
        log: MemoryLog,
        store: MemoryStore | None = None,
        node: str = "memory",
        make_processor: Callable[["Driver"], Processor] | None = None,
        acks_at_once: bool = True,
        by_fetch: bool = False,
    ) -> None:
        self.log = log
        # ``deliver`` hands the records over as one fetch, else each in a fetch of its
        # own (``handle_batch``, as streams/faust/command_fetch.py does).
        self.by_fetch = by_fetch
        self.store = store if store is not None else MemoryStore(log.partitions)
        self.node = node
        self._make_processor = make_processor or _processor
        partitions = range(log.partitions)
        self.changelogs: dict[int, Changelog] = {p: [] for p in partitions}
        self.committed: dict[int, tuple[int, int]] = {p: (0, 0) for p in partitions}
        self.fetch: dict[int, int] = {p: 0 for p in partitions}
        self.seeking: dict[int, int] = {}  # partition -> where the processor asked to read
        self.crashes = 0
        self.acks_at_once = acks_at_once
        self.in_flight: list[FollowUp] = []  # handed on, not acknowledged yet
        # partition -> length of its changelog whose records' follow-ups are in the log
        self.acked: dict[int, int] = {p: 0 for p in partitions}
        self.follow_ups_written = 0
        self.index = JobIndex()
        self.waiters = Waiters()
        self.processor = self._start()

    def _start(self) -> Processor:
        self.index = JobIndex()
        self.waiters = Waiters()
        for partition in range(self.log.partitions):
            self.index.rebuild(partition, self.store.slims_in(partition), self.log.now_ms,
                               self.store.paused_in(partition),
                               self.store.registrations_in(partition),
                               self.store.recurrences_in(partition))
        processor = self._make_processor(self)
        processor.resumed_at({p: offset for p, (_, offset) in self.committed.items()})
        return processor

    async def persist(self, partition: int, records: Changelog) -> None:
        """The processor's ``persist``: the table, then the partition's changelog
        (streams/faust/transactions.py: RocksDB, then the open transaction)."""
        self.store.write_batch(partition, records)
        self.changelogs[partition].extend(records)
        if not self.in_flight:
            self.acked[partition] = len(self.changelogs[partition])

    def follow_up(self, partition: int, follow_ups: Sequence[FollowUp]) -> None:
        """The processor's ``follow_ups``: on their way to the log (streams/follow_ups.py)."""
        self.in_flight.extend(follow_ups)
        if self.acks_at_once:
            self.ack()

    def ack(self) -> None:
        """The broker takes every follow-up in flight, stamped with the log's clock: those
        for one partition leave together, as a command writer's lane sends what waited
        (streams/command_writer.py): one alone is a plain record, more a batch record."""
        in_flight, self.in_flight = self.in_flight, []
        lanes: dict[int, list] = {}
        for follow_up in in_flight:
            lanes.setdefault(self.log.partition_of(follow_up.command.job_id), []).append(
                follow_up.command)
        for partition, commands in lanes.items():
            self.log.append_commands(partition, commands)
            self.follow_ups_written += len(commands)
        self.acked = {p: len(changelog) for p, changelog in self.changelogs.items()}

    async def deliver(self, partition: int, count: int = 1) -> int:
        """Hand the processor up to ``count`` records of ``partition`` from its fetch
        position (one at a time, or ``by_fetch`` all at once): how many it was handed."""
        fetch: list[Message] = []
        while len(fetch) < count and self.fetch[partition] < self.log.end(partition):
            message = self.log.records(partition, self.fetch[partition])[0]
            self.fetch[partition] += 1
            if self.seeking.get(partition) == message.offset:
                del self.seeking[partition]
            fetch.append(message)
            if not self.by_fetch:
                await self.processor.handle_batch(partition, [message.fetched()])
        if self.by_fetch and fetch:
            await self.processor.handle_batch(partition, [m.fetched() for m in fetch])
        return len(fetch)

    async def drain(self) -> None:
        """Deliver every partition's records to the end of the log, the follow-ups they
        write included (those in flight are acknowledged once nothing else is left, as
        the next commit would)."""
        while True:
            handed = 0
            for partition in range(self.log.partitions):
                handed += await self.deliver(partition, self.log.end(partition))
            if not handed:
                if not self.in_flight:
                    return
                self.ack()

    def rewind(self, partition: int, count: int) -> None:
        """Deliver the last ``count`` records handed again (after a seek back)."""
        self.fetch[partition] = max(0, self.fetch[partition] - count)

    def skip(self, partition: int, count: int) -> None:
        """Pass over up to ``count`` records without handing them, as faust's fetcher
        can when it drops a fetch (streams/processor.py ``_in_order``): always in front
        of a record it hands over next, by which the processor sees the gap and reads
        the partition again, and never in the records a seek asked for (the processor
        takes what arrives meanwhile for records fetched before the seek). Records
        passed over at the end of the log, or again after a seek, would wait for a
        later record or ``READ_AGAIN_S``: only a catch-up watches (streams/catch_up.py)."""
        if partition in self.seeking:
            return
        last = self.log.end(partition) - 1
        self.fetch[partition] = max(self.fetch[partition], min(last, self.fetch[partition] + count))

    def commit(self, partitions: Iterable[int] | None = None) -> None:
        """Commit the partitions' transactions: their changelog so far and the next
        offset to apply (the processor's, as streams/faust/transactions.py commits it), once
        the follow-ups of what they cover are in the log (the commit waits for them)."""
        self.ack()
        next_offsets = self.processor.next_offsets()
        for partition in range(self.log.partitions) if partitions is None else partitions:
            length, offset = self.committed[partition]
            self.committed[partition] = (len(self.changelogs[partition]),
                                         next_offsets.get(partition, offset))

    def crash(self, keep: int | dict[int, int] = 0, written: bool = False) -> None:
        """A kill -9 now, and a restart: each partition's changelog is cut after its
        commit and ``keep`` more records (an int for every partition, or per partition)
        whose follow-ups were acknowledged, its table rebuilt from it, and a new
        processor reads on from the committed offsets. Follow-ups in flight are lost,
        or ``written``: the broker had them, its acknowledgement never came."""
        self.crashes += 1
        if written:
            self.ack()
        self.in_flight = []
        for partition, (length, offset) in self.committed.items():
            extra = keep if isinstance(keep, int) else keep.get(partition, 0)
            extra = min(max(0, extra), self.acked[partition] - length)
            changelog = self.changelogs[partition]
            del changelog[length + extra:]
            self.acked[partition] = len(changelog)
            db = self.store.db(partition)
            db.data.clear()
            db.write(changelog)
            self.fetch[partition] = offset
        self.seeking.clear()
        self.processor = self._start()


def _processor(driver: Driver) -> Processor:
    return Processor(
        driver.store, driver.index, driver.waiters, driver.node, lambda deadline: None,
        driver.persist, clock_ms=lambda: driver.log.now_ms, ownership=_Seeks(driver),
        follow_ups=driver.follow_up,
    )
