"""The changelog of each owned partition, written in Kafka transactions of its own, with
the command log's consumer offset committed in the same transaction (docs/fencing.md,
"The three fences"; docs/architecture.md, "The changelog").

Every owned partition ``p`` gets a transactional producer whose id is
``<app id>.<changelog topic>.<p>``. Starting it fences: the broker bumps the id's epoch,
aborts whatever the partition's previous owner left open, and refuses every later
record, offset and commit of the previous owner's producer (``ProducerFenced``). A
process that was paused or cut off while it owned ``p`` can therefore write nothing
that a restore, a standby or a replay will ever read: every reader of `eventq.jobs` reads
committed records only.

A transaction holds the changelog records of the commands applied since the last
commit, and the commit names the command log's next offset (``send_offsets_to_transaction``):
the changelog and the consumer offset become visible together or not at all, so a
committed offset never passes an unwritten changelog record.

RocksDB is written before the changelog (the processor reads its own writes), so a
transaction that does not commit leaves local writes the log does not have. Each
partition therefore keeps the value every key had before the first write since the
last commit (``_Undo``); an aborted or fenced transaction is rolled back from it, with
faust's persisted offset, and the local table is exactly the committed changelog again:
a later recovery (streams/faust/table_recovery.py) continues from it, and whoever owns the
partition next re-applies the uncommitted commands from the log.

Workflows' follow-up commands (docs/workflows.md, "Determinism"; streams/follow_ups.py)
are not in the transaction: they go to `eventq.commands`, which faust reads, and an open
transaction on a command partition would hold its last stable offset back. Each one a
transaction's records caused is handed to it (``follow_up``) as it is sent, and a commit
waits for the broker's acknowledgement of every one, as it waits for its own batches':
a committed offset never passes a command whose follow-ups are not in the log. One the
broker refuses fails the transaction, like a changelog batch it refuses: its commands
are applied again by the partition's next owner, who writes their follow-ups again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Awaitable, Callable, Iterable

from aiokafka.structs import OffsetAndMetadata, TopicPartition

from eventq.kafka.commit_metadata import commit_metadata
from eventq.kafka.security import KafkaTarget, aiokafka_options
from eventq.limits import KAFKA_MESSAGE_BYTES
from eventq.state.jobs_table import FAUST_OFFSET_KEY, persisted_offset, persisted_offset_records
from streams.store import JobStore, TableDB, write_records

log = logging.getLogger(__name__)

COMMIT_INTERVAL_S = 1.0  # how often each partition's transaction is committed
# A partition's changelog records handed in while nothing of it is being sent wait this
# long, then leave as one send with whatever joined them (docs/architecture.md, "The
# changelog"). Behind the replies and inside the commit interval, so it delays nothing
# that waits; what it saves is a transactional produce request per applied record at
# light load, whose cost in this process and in the broker queued every command behind
# it (bench/dag_bench.py --light-only, 2 cores: server CPU -25%, broker CPU -20%).
CHANGELOG_LINGER_S = 0.2
# A commit Kafka does not finish by then: the transaction is lost, and the partition is
# rolled back and taken again (a new producer looks its coordinator up afresh). A commit
# takes milliseconds; this covers a leader or coordinator election.
COMMIT_TIMEOUT_S = 10.0
# Giving partitions up in a rebalance: the group waits for this process, so a commit
# that cannot finish soon is rolled back instead (the next owner re-applies the tail).
RELEASE_COMMIT_TIMEOUT_S = 3.0
START_TIMEOUT_S = 30.0  # to fence the previous owner and begin (brokers may be moving)
# aiokafka bounds each of its waits inside a send by its request timeout, except one:
# the wait for the topic's metadata never ends once the producer's client is closed
# under it (its metadata task is cancelled and the future it waits on is never set).
# It only waits when the topic is missing from the client's metadata (the producer's
# start learns every topic's), but a partition given up mid-send closes its producer,
# and the apply of one record could then wait forever, and faust's next rebalance with
# it (it waits for that record's ack): a candidate cause of the fault campaign's seed
# 3204, a process that never served again. So a send not taken once every aiokafka
# bound has passed loses the transaction, as a failed commit does.
REQUEST_TIMEOUT_MS = 40_000  # aiokafka's default, stated: SEND_TIMEOUT_S depends on it
SEND_TIMEOUT_S = REQUEST_TIMEOUT_MS / 1000 + 5.0
CLOSE_TIMEOUT_S = 5.0  # a producer given up is closed in the background within this
TRANSACTION_TIMEOUT_MS = 60_000  # the broker aborts a transaction left open this long

Records = list[tuple[bytes, "bytes | None"]]


def is_fenced(error: BaseException | None) -> bool:
    """Whether another process started this partition's transactional id since: it owns
    the partition now (as opposed to Kafka failing a transaction of ours)."""
    from aiokafka.errors import ProducerFenced

    return isinstance(error, ProducerFenced) or type(error).__name__ in (
        "InvalidProducerEpoch", "ProducerFencedError")


def describe(error: BaseException) -> str:
    """An error as a log line can show it (asyncio's TimeoutError says nothing)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class ChangelogLost(Exception):
    """A partition's transaction cannot commit (fenced, or Kafka failed it): what was
    applied since its last commit is rolled back and re-applied by its next owner."""


def transactional_id(app_id: str, changelog_topic: str, partition: int) -> str:
    """One id per changelog partition, the same in every process of the app: whoever
    starts it fences whoever held it before."""
    return f"{app_id}.{changelog_topic}.{partition}"


@dataclass
class _Undo:
    """The value each key had before this partition's uncommitted writes (None: absent),
    and faust's persisted offset then."""

    before: dict[bytes, bytes | None] = field(default_factory=dict)
    persisted: bytes | None = None

    def capture(self, db: TableDB, records: Records) -> None:
        before = self.before
        for key, _ in records:
            if key not in before:
                before[key] = db.get(key)

    def merged_under(self, older: "_Undo") -> "_Undo":
        """Both uncommitted spans as one: the older span's before-values win."""
        return _Undo({**self.before, **older.before}, older.persisted)

    def write_back(self, db: TableDB) -> int:
        write_records(db, [*self.before.items(), *persisted_offset_records(self.persisted)])
        return len(self.before)


class PartitionChangelog:
    """One owned partition's changelog transaction. Its producer, an aiokafka
    AIOKafkaProducer, and what it hands back (batches, futures of RecordMetadata) are
    Any: aiokafka has no types."""

    def __init__(self, partition: int, producer: Any, store: JobStore, topic: str,
                 commands_topic: str, group_id: str,
                 on_failure: Callable[[BaseException], None] | None = None) -> None:
        self.partition = partition
        self._on_failure = on_failure  # a send behind the reply failed: report it
        self._producer = producer
        self._store = store
        self._topic = topic
        self._commands_tp = TopicPartition(commands_topic, partition)
        self._group_id = group_id
        self._undo = _Undo()
        self._committing_undo: _Undo | None = None
        # Records handed in and not yet given to the producer: sent behind the replies
        # by one flusher at a time, as soon as the producer takes more (docs/architecture.md,
        # "The changelog"), and held while a commit is under way.
        self._queued: list[Records] = []
        self._flusher: asyncio.Task | None = None
        self._linger: asyncio.TimerHandle | None = None  # a flush due (CHANGELOG_LINGER_S)
        self._idle = asyncio.Event()  # set whenever no flusher is handing records over
        self._idle.set()
        self._last_offset: int | None = None  # of the open transaction's records
        # batches sent, not yet in the log (futures of aiokafka's RecordMetadata)
        self._unacknowledged: set[asyncio.Future[Any]] = set()
        self._follow_ups: set[asyncio.Future[int]] = set()  # follow-ups sent, not yet in the log
        self._committing = False
        self.open = False  # a transaction was begun: what it holds can be committed
        # Commits take turns (the periodic one, a rebalance's last one): each needs the
        # transaction the one before it opened.
        self._turn = asyncio.Lock()
        self.failure: BaseException | None = None
        self.committed_offset: int | None = None  # the command log's, last committed
        self.commits = 0
        self.records = 0

    # --- life ------------------------------------------------------------------

    async def start(self) -> None:
        """Fence the partition's previous owner (the producer's InitProducerId)."""
        async with asyncio.timeout(START_TIMEOUT_S):
            await self._producer.start()

    async def begin(self) -> None:
        """Open the first transaction, once the table is recovered: what is written from
        now on is undone back to this. Once only (a second call would forget the undo of
        what was written since)."""
        if self.open:
            return
        self._undo = _Undo(persisted=self._db().get(FAUST_OFFSET_KEY))
        await self._producer.begin_transaction()
        self.open = True

    async def close(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._producer.stop()
        except BaseException as error:  # fenced or Kafka gone: nothing of ours is pending
            log.debug("closing the changelog producer of partition %d: %s",
                      self.partition, error)

    def _db(self) -> TableDB:
        return self._store.db(self.partition)

    # --- writing ---------------------------------------------------------------

    def store(self, records: Records) -> None:
        """Write ``records`` (key, value or None) to the local table, remembering what
        they overwrite until the transaction that logs them commits."""
        db = self._db()
        self._undo.capture(db, records)
        self._store.write_batch(self.partition, records)

    def send(self, records: Records) -> None:
        """Queue ``records`` for the open transaction, in this order (during a commit,
        for the next one), without waiting for the producer: a command's reply waits for
        its apply, never for the changelog (the commit waits for that). Raises
        ChangelogLost once the transaction cannot commit; a later failure is reported to
        ``on_failure``."""
        if self.failure is not None:
            raise ChangelogLost(describe(self.failure))
        self._queued.append(records)
        if self._committing:
            return  # the next transaction's: sent once it begins
        if self._flusher is not None and not self._flusher.done():
            return  # the flusher sends it with whatever queued meanwhile
        if self._linger is None:
            self._linger = asyncio.get_running_loop().call_later(
                CHANGELOG_LINGER_S, self._lingered)

    def _lingered(self) -> None:
        self._linger = None
        if self._queued and not self._committing and self.failure is None:
            self._flush_behind()

    def _flush_behind(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._idle.clear()
            self._flusher = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        """Hand the queued records to the producer, all that queued meanwhile as one
        send, until none is left or a commit begins."""
        try:
            while self._queued and not self._committing and self.failure is None:
                queued, self._queued = self._queued, []
                await self._send([record for records in queued for record in records])
        except ChangelogLost:
            pass  # _fail recorded it and reports it
        except BaseException as error:  # never lose a failure in a background task
            self._fail(error)
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self._idle.set()

    async def _send(self, records: Records) -> None:
        producer = self._producer
        batch = producer.create_batch()
        for key, value in records:
            if batch.append(key=key, value=value, timestamp=None) is None:
                await self._send_batch(batch)
                batch = producer.create_batch()
                # The first record always fits a new batch, whatever its size.
                if batch.append(key=key, value=value, timestamp=None) is None:
                    raise RuntimeError(f"a changelog record for {key!r} fits no batch")
        await self._send_batch(batch)

    async def _send_batch(self, batch: Any) -> None:
        count = batch.record_count()
        if not count:
            return
        batch.close()
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                future = await self._producer.send_batch(
                    batch, self._topic, partition=self.partition)
        except Exception as error:  # TimeoutError included
            self._fail(error)
            raise ChangelogLost(describe(error)) from error
        self.records += count
        self._unacknowledged.add(future)
        future.add_done_callback(lambda done: self._acknowledged(done, count))

    def _acknowledged(self, future: asyncio.Future[Any], count: int) -> None:
        self._unacknowledged.discard(future)
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            self._fail(error or RuntimeError("cancelled"))
            return
        last = future.result().offset + count - 1
        if self._last_offset is None or last > self._last_offset:
            self._last_offset = last

    def follow_up(self, written: asyncio.Future[int]) -> None:
        """A follow-up command of a record applied in this partition is on its way to
        the command log (``written``: done once the broker has it): the next commit
        waits for it; if the broker refuses it, the transaction cannot commit."""
        self._follow_ups.add(written)
        written.add_done_callback(self._followed_up)

    def _followed_up(self, written: asyncio.Future[int]) -> None:
        self._follow_ups.discard(written)
        if written.cancelled():
            self._fail(RuntimeError("a follow-up command was withdrawn before it was written"))
            return
        error = written.exception()
        if error is not None:
            self._fail(error)

    def fail(self, error: BaseException) -> None:
        """This transaction cannot commit (what it covers must be applied again)."""
        self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
            if self._on_failure is not None and not self._committing:
                # An ack that failed behind the replies: nobody else is told (a commit
                # under way raises it itself).
                asyncio.get_running_loop().call_soon(self._report_failure)

    def _report_failure(self) -> None:
        if self._on_failure is not None and self.failure is not None:
            self._on_failure(self.failure)

    # --- committing --------------------------------------------------------------

    async def commit(self, next_offset: int, timeout_s: float = COMMIT_TIMEOUT_S) -> bool:
        """Commit what was sent so far with the command log's ``next_offset``, then open
        the next transaction (after any commit under way). False if nothing is new.
        Raises ChangelogLost if the transaction cannot commit within ``timeout_s``."""
        async with self._turn:
            return await self._commit(next_offset, timeout_s)

    async def _commit(self, next_offset: int, timeout_s: float) -> bool:
        if self.failure is not None:
            raise ChangelogLost(describe(self.failure))
        if not self.open or next_offset == self.committed_offset:
            return False
        # What was queued before the commit goes into it; what is handed in from now
        # on waits in _queued for the next transaction: the producer takes none between
        # a commit and the next begin. A send already handed to the producer (waiting
        # for the batch before it to drain) is let finish first: appended during the
        # commit it would fail the transaction.
        committed_records, self._queued = self._queued, []
        self._committing = True
        self._committing_undo, self._undo = self._undo, _Undo()
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._idle.wait()
                    if self.failure is not None:
                        raise self.failure
                    if committed_records:  # the flusher stopped at the commit's start
                        await self._send([r for records in committed_records for r in records])
                    # The commit names the changelog's end, so every record it commits
                    # must have its offset: the producer waits for them anyway before
                    # it ends the transaction.
                    if self._unacknowledged:
                        await asyncio.wait(set(self._unacknowledged))
                    # And the follow-ups of what it covers must be in the command log
                    # (those of records applied since may be waited for too).
                    if self._follow_ups:
                        waited = set(self._follow_ups)
                        await asyncio.wait(waited)
                        for written in waited:
                            self._followed_up(written)  # its error, whatever ran first
                    if self.failure is not None:
                        raise self.failure
                    end = self._end_after_commit()
                    await self._producer.send_offsets_to_transaction(
                        {self._commands_tp: OffsetAndMetadata(next_offset,
                                                              commit_metadata(end))},
                        self._group_id)
                    await self._producer.commit_transaction()
            except Exception as error:
                self._fail(error)
                raise ChangelogLost(describe(error)) from error
            self._committed(next_offset)
            await self._begin_next()
        finally:
            self._committing = False
        return True

    def _end_after_commit(self) -> int | None:
        """The changelog's end once this transaction commits: after its last record, or
        (none in it) after the table's persisted offset, which only a commit or a
        recovery moves (None: the changelog has no record yet)."""
        if self._last_offset is not None:
            return self._last_offset + 1
        return self.changelog_end()

    def changelog_end(self) -> int | None:
        """The changelog's end as of the last commit (or recovery) of this partition."""
        persisted = persisted_offset(self._db())
        return None if persisted is None else persisted + 1

    def _committed(self, next_offset: int) -> None:
        """What the transaction held is in the log: remember faust's persisted offset
        (where a later recovery resumes) and forget the undo. Unless the table was rolled
        back while the commit was under way (the partition was given up meanwhile): then
        the persisted offset stays before these records, and a later recovery reads
        them back from the changelog."""
        if self.failure is not None:
            raise ChangelogLost(f"given up while committing: {describe(self.failure)}")
        assert self._committing_undo is not None
        if self._last_offset is not None:
            persisted = str(self._last_offset).encode()
            write_records(self._db(), persisted_offset_records(persisted))
            self._last_offset = None
            self._undo.persisted = persisted
        else:
            self._undo.persisted = self._committing_undo.persisted
        self._committing_undo = None
        self.committed_offset = next_offset
        self.commits += 1

    async def _begin_next(self) -> None:
        try:
            await self._producer.begin_transaction()
        except Exception as error:
            self._fail(error)
            raise ChangelogLost(describe(error)) from error
        self._committing = False
        if self._queued:  # handed in during the commit: the next transaction's
            self._flush_behind()

    # --- giving up ---------------------------------------------------------------

    def abort(self) -> int:
        """Give the open transaction up and roll the local table back to the last
        commit; returns the keys rolled back. Kafka is not asked to abort it: whoever
        takes the partition next fences this producer, which aborts it (and so does the
        broker, after TRANSACTION_TIMEOUT_MS). A commit still under way may yet succeed:
        then its records are in the changelog and the table reads them back from there
        (``_committed``)."""
        self._fail(ChangelogLost("given up"))
        return self.roll_back()

    def roll_back(self) -> int:
        if not self.open:  # never begun: nothing was written (``persist`` refuses)
            return 0
        undo = self._undo
        if self._committing_undo is not None:
            undo = undo.merged_under(self._committing_undo)
            self._committing_undo = None
        self._undo = _Undo(persisted=undo.persisted)
        self._queued.clear()
        return undo.write_back(self._db())


class Changelogs:
    """The changelog transactions of the partitions this process owns."""

    def __init__(
        self,
        *,
        bootstrap: KafkaTarget,
        app_id: str,
        topic: str,
        commands_topic: str,
        store: JobStore,
        on_lost: Callable[[int, BaseException], None],
        producer_factory: Callable[[str], Any] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._app_id = app_id
        self._topic = topic
        self._commands_topic = commands_topic
        self._store = store
        self._on_lost = on_lost
        self._new_producer = producer_factory or self._aiokafka_producer
        self._logs: dict[int, PartitionChangelog] = {}
        self.unclean = False  # a rollback failed: the local tables cannot be trusted
        self._released_records = 0
        self._released_commits = 0
        self._closing: set[asyncio.Task] = set()  # producers given up, being closed

    @property
    def records(self) -> int:
        """Changelog records sent, over every partition this process owned."""
        return self._released_records + sum(log_.records for log_ in self._logs.values())

    @property
    def commits(self) -> int:
        return self._released_commits + sum(log_.commits for log_ in self._logs.values())

    def _aiokafka_producer(self, txn_id: str) -> Any:
        from aiokafka import AIOKafkaProducer

        return AIOKafkaProducer(
            **aiokafka_options(self._bootstrap),
            client_id=txn_id,
            transactional_id=txn_id,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            linger_ms=0,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            max_request_size=KAFKA_MESSAGE_BYTES,
            # One batch holds a whole applied record's states; a smaller one makes the
            # next send wait for the last to drain.
            max_batch_size=KAFKA_MESSAGE_BYTES // 4,
        )

    def owned(self) -> frozenset[int]:
        return frozenset(self._logs)

    def log_of(self, partition: int) -> PartitionChangelog:
        try:
            return self._logs[partition]
        except KeyError:
            raise ChangelogLost(f"partition {partition} is not owned here") from None

    async def take(self, partitions: Iterable[int]) -> dict[int, BaseException]:
        """Start (fence) a transactional producer for each partition not yet taken, in
        parallel. Returns the partitions whose producer could not start, with why (they
        are not taken)."""
        new = [p for p in partitions if p not in self._logs]
        logs = [
            PartitionChangelog(
                p, self._new_producer(transactional_id(self._app_id, self._topic, p)),
                self._store, self._topic, self._commands_topic, self._app_id,
                on_failure=partial(self._failed_behind, p))
            for p in new
        ]
        try:
            results = await asyncio.gather(*(log_.start() for log_ in logs),
                                           return_exceptions=True)
        except asyncio.CancelledError:  # given up meanwhile (a loss): none is taken
            for log_ in logs:
                self._close_in_background(log_)
            raise
        failed = {}
        for log_, result in zip(logs, results):
            if isinstance(result, BaseException):
                failed[log_.partition] = result
                self._close_in_background(log_)
            else:
                self._logs[log_.partition] = log_
        return failed

    async def begin(self) -> dict[int, BaseException]:
        """Open the first transaction of each partition taken and not begun; returns the
        partitions that could not (still taken: release them)."""
        logs = [log_ for log_ in self._logs.values() if not log_.open]
        results = await asyncio.gather(*(log_.begin() for log_ in logs), return_exceptions=True)
        return {log_.partition: result for log_, result in zip(logs, results)
                if isinstance(result, BaseException)}

    def open_log(self, partition: int) -> PartitionChangelog | None:
        """The partition's changelog, if it has an open transaction here."""
        log_ = self._logs.get(partition)
        return log_ if log_ is not None and log_.open else None

    def _failed_behind(self, partition: int, error: BaseException) -> None:
        """A partition's changelog failed behind the replies (a send or its ack): lost,
        unless the partition was given up meanwhile (its rollback is what failed it)."""
        log_ = self._logs.get(partition)
        if log_ is not None and log_.failure is error:
            self._on_lost(partition, error)

    async def persist(self, partition: int, records: Records) -> None:
        """Store one applied batch's records: the local table now, the changelog queued
        for the partition's open transaction (sent behind the reply). Never raises: a
        lost transaction is reported to ``on_lost`` (the local write stays until it is
        rolled back)."""
        log_ = self._logs.get(partition)
        if log_ is None or not log_.open:  # nothing is written without a transaction
            self._on_lost(partition, ChangelogLost(
                f"partition {partition} has no open transaction here"))
            return
        log_.store(records)
        try:
            log_.send(records)
        except ChangelogLost as error:
            self._on_lost(partition, log_.failure or error)

    async def commit(self, next_offsets: dict[int, int]) -> None:
        """Commit each partition's transaction with its command log's next offset."""
        async def one(partition: int, offset: int) -> None:
            log_ = self._logs.get(partition)
            if log_ is None:
                return
            try:
                await log_.commit(offset)
            except ChangelogLost as error:
                if self._logs.get(partition) is log_:  # not given up meanwhile
                    self._on_lost(partition, log_.failure or error)

        await asyncio.gather(*(one(p, o) for p, o in next_offsets.items()))

    def failed(self) -> dict[int, BaseException]:
        return {p: log_.failure for p, log_ in self._logs.items()
                if log_.failure is not None}

    async def release(self, partitions: Iterable[int],
                      next_offsets: dict[int, int] | None) -> None:
        """Give ``partitions`` up: commit them with ``next_offsets`` (None: this process
        may no longer commit) or else roll them back, and close their producers."""
        logs = [self._logs.pop(p) for p in sorted(partitions) if p in self._logs]

        async def one(log_: PartitionChangelog) -> None:
            committed = False
            offset = None if next_offsets is None else next_offsets.get(log_.partition)
            if offset is not None and log_.failure is None:
                try:
                    await log_.commit(offset, RELEASE_COMMIT_TIMEOUT_S)
                    committed = True
                except ChangelogLost as error:
                    log.warning("partition %d: the last commit before giving it up "
                                "failed (%s); rolling back", log_.partition, error)
            if not committed:
                self._roll_back(log_, self._aborted(log_))
            self._released_records += log_.records
            self._released_commits += log_.commits
            self._close_in_background(log_)

        await asyncio.gather(*(one(log_) for log_ in logs))

    def _close_in_background(self, log_: PartitionChangelog) -> None:
        task = asyncio.ensure_future(log_.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _aborted(self, log_: PartitionChangelog) -> int | None:
        try:
            return log_.abort()
        except Exception as error:  # the table could not be written back
            log.critical("partition %d: rolling back its uncommitted writes failed (%s: %s); "
                         "the next start rebuilds every table from the log",
                         log_.partition, type(error).__name__, error)
            self.unclean = True
            return None

    @staticmethod
    def _roll_back(log_: PartitionChangelog, keys: int | None) -> None:
        if keys:
            log.info("partition %d: rolled back %d keys written since its last commit "
                     "(command log offset %s)", log_.partition, keys, log_.committed_offset)

    async def release_all(self, next_offsets: dict[int, int] | None) -> None:
        await self.release(list(self._logs), next_offsets)


def commit_loop(changelogs: Changelogs, next_offsets: Callable[[], dict[int, int]],
                may_commit: Callable[[], bool],
                interval_s: float = COMMIT_INTERVAL_S) -> Callable[[], Awaitable[None]]:
    """The periodic commit: every ``interval_s``, while ``may_commit()`` (the lease
    holds and nothing was lost), each partition with newly applied commands commits."""
    async def run() -> None:
        while True:
            await asyncio.sleep(interval_s)
            if may_commit():
                await changelogs.commit(next_offsets())
    return run
