"""Apply the records of `eventq.commands` (each one command or a batch of them) to the
`jobs` table.

For each command of the record, in order (docs/architecture.md, "The processor" and
"Batches"): decode it, take the job (from this batch if an earlier command changed it,
else from the table), ``step`` it with the pure core at the broker's LogAppendTime, and
update the derived indexes. Then the batch's effect is stored once: one RocksDB write
batch holding only the last state of each job, the same records handed to the
partition's changelog transaction (streams/faust/transactions.py), and only then are the
issuers answered. It is handed the records of the partitions this process owns in
whole fetches (``handle_batch``, streams/faust/command_fetch.py); it is the only writer
of the tables (writes name their partition explicitly), and applies only while this
process holds its partitions (docs/fencing.md).

At-least-once: after a crash the uncommitted tail of a partition is read again, whole
records, so a crash in the middle of a batch re-reads all of it. Idempotency is
positional, a position being (record offset, index in the record) as one integer
(eventq/core/batch.py). A present job skips commands at or below its ``version`` (the
core does this). An absent job cannot tell "never existed" from "deleted later", so
every tombstone is preceded, in the same changelog partition, by a per-partition
watermark record (the position of the last command that removed a job): an absent
job's command at or below it was already applied. A batch's changelog is ordered so
that any prefix of it is safe to restore from: the live jobs' states, then the
watermark, then the tombstones. A prefix without the watermark has no tombstone of
this batch; with it, every state written before any removal in the batch is there, and
a job whose tombstone is missing is still present and gets its removal again.

Workflows (docs/workflows.md; docs/architecture.md, "Workflows"). A step also gives
records beside the jobs (``Step.side``: a dependent's inputs, an upstream's
registrations), registrations to read (``Step.then``: the one a ``depend`` stores, or
all of an upstream that ended, read through this batch's own earlier writes) and
follow-up commands for other partitions. Side records are stored with the batch, and
first in its changelog: side records, live states, the watermark, tombstones. Why that
order keeps every prefix safe, given that the follow-ups of the records in the prefix
are in the command log: a side record goes with a job's state (an input with the
notice that changed its dependent, a registration deleted with its upstream's ending
or removal) or with no state at all (a ``depend``'s registration, an ``expire`` of an
absent upstream that drops expired ones). A prefix that holds the state or the
watermark that makes the command read again ``ALREADY_APPLIED`` therefore holds its
side records too; a prefix that holds side records without their state re-applies the
command, which writes the same values again (what the registrations it reads lack was
deleted by this batch and its notices are in the log already; what they hold extra was
written by a later command of the batch: a later job of the dependent's id wins, and a
notice read from it tells of a real change, a duplicate its dependent passes over).
The follow-ups are handed on (``follow_ups``) before the batch's records, and the
partition's next commit waits until the broker has them (streams/follow_ups.py,
streams/faust/transactions.py): every committed record's follow-ups are in the log, so a
crash repeats them at worst. A table ahead of its commit is safe only up to the last
record whose follow-ups are acknowledged; eventq never keeps one (a rollback restores
the last commit, and a killed process's tables are rebuilt: eventq/run/statedir.py).

Slices (docs/architecture.md, "Lanes"): a record admitted from `eventq.bulk` names its bulk
range (eventq/core/batch.py). The partition's admitted-through offset is kept like the
watermark, in the table and written last in the changelog (a prefix without it re-reads
the slice from the command log, where positions make that harmless); a slice at or
below it is a second copy and is skipped whole (``admits``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

from eventq.core import CodecError, Expired, correlation_of, decode_command, decode_registration
from eventq.core.batch import NOTHING_ADMITTED, admits, position, read_record
from eventq.core.codec import decode_recurrence
from eventq.core.commands import QUEUE_COMMANDS, RECURRENCE_COMMANDS, is_paused_after
from eventq.core.events import NOTICE_EVENTS
from eventq.core.followups import FollowUp, Register, SideRecord, notify, register
from eventq.core.job import is_final, is_ready, ready_time_ms
from eventq.core.machine import ALREADY_APPLIED, Accepted, Ignored
from eventq.core.partitioner import job_key
from eventq.core.recurrence import Changed, recurrence_table_key
from eventq.core.step import RecurrenceStep, Step, step, step_recurrence, unappliable
from eventq.core.workflow import REGISTRATION_KEY_PREFIX, Registration, registration_ids
from eventq.limits import MAX_STATE_RECORD_BYTES
from eventq.observe.buckets import BATCH_COMMANDS, Histogram
from eventq.observe.livestats import LiveStats
from eventq.state.indexes import JobIndex
from eventq.state.jobs_table import (
    BULK_ADMITTED_KEY,
    LEGACY_WATERMARK_KEY,
    WATERMARK_KEY,
    pause_record,
    paused_key,
    read_pause_record,
)
from eventq.state.waiters import Applied, Waiters
from streams.store import JobStore

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


READ_AGAIN_S = 10.0  # a partition read again that has not delivered by then: seek again


class Ownership:
    """What the processor asks of the process about its partitions (streams/faust/app.py):
    whether it still holds them, what to do when it may not, and how to read a
    partition again. This default holds always and reads nothing (tests)."""

    def holds(self) -> bool:
        return True

    def lost(self, reason: str) -> None:
        pass

    async def log_start(self, partition: int) -> int | None:
        return None

    async def read_again(self, partition: int, offset: int) -> None:
        pass


@dataclass
class Counters:
    skipped: int = 0  # records not applied: applied already, out of order, or not held
    records: int = 0  # records of the command log handled
    batches: int = 0  # of which held more than one command
    applied: int = 0
    rejected: int = 0
    ignored: int = 0
    undecodable: int = 0
    unappliable: int = 0  # decoded, but applying it failed: rejected, never retried
    evicted: int = 0
    slices: int = 0  # slice records admitted from the bulk lane and applied
    readmitted: int = 0  # slice records skipped: a second copy of an admitted range
    follow_ups: int = 0  # commands handed on for other partitions (workflows)
    # [eventq] workflows (docs/architecture.md, "Workflows"): ``upstream`` notices applied
    # to their dependent (accepted; a duplicate or stale one is ``ignored``), and
    # ``depend`` commands that stored a registration (a repeat stores none).
    notices: int = 0
    registrations: int = 0
    # [eventq] recurring jobs (docs/workflows.md, "Recurring jobs"): slots fired (each
    # once: a repeated or stale fire is ``ignored``), their adds handed on as follow-ups.
    fired: int = 0


def _no_follow_ups(partition: int, follow_ups: Sequence[FollowUp]) -> None:
    """Tests that write none: a processor built without a follow-up writer."""


class Processor:
    def __init__(
        self,
        store: JobStore,
        index: JobIndex,
        waiters: Waiters,
        node: str,
        on_deadline: Callable[[int], None],
        persist: Callable[[int, list], Awaitable[None]],
        clock_ms: Callable[[], int] = wall_clock_ms,
        max_state_record_bytes: int = MAX_STATE_RECORD_BYTES,
        stats: LiveStats | None = None,
        ownership: "Ownership | None" = None,
        follow_ups: Callable[[int, Sequence[FollowUp]], None] = _no_follow_ups,
    ) -> None:
        self._store = store
        self._index = index
        self._waiters = waiters
        self._node = node
        self._on_deadline = on_deadline
        # Stores one applied record's states: the local table, and the changelog in
        # the partition's open transaction (streams/faust/transactions.py).
        self._persist = persist
        # Hands one record's follow-up commands on to be written, each to its key's
        # partition of the command log; the partition's next commit waits for their
        # acknowledgement (streams/follow_ups.py).
        self._follow_ups = follow_ups
        self._ownership = ownership or Ownership()
        self._next: dict[int, int] = {}  # partition -> the offset to apply next
        self._reading_again: dict[int, tuple[int, float]] = {}  # partition -> (from, at)
        self.suspended = False  # lost (or may have lost) its partitions: applies nothing
        self._clock_ms = clock_ms
        self._max_state_record_bytes = max_state_record_bytes
        self._watermarks: dict[int, int] = {}
        self._admitted: dict[int, int] = {}  # partition -> next bulk position to admit
        self._catch_up: dict[int, int] = {}  # partition -> last offset to re-apply
        # One partition taken again on its own: (last offset to re-apply, then what)
        self._partition_catch_up: dict[int, tuple[int, Callable[[], None]]] = {}
        self._applied_through: dict[int, int] = {}  # partition -> last offset handled
        self._resumed_at: dict[int, int] = {}  # partition -> first offset read after recovery
        self._on_caught_up: Callable[[], None] = lambda: None
        self._offset_waiters: dict[int, list[tuple[int, asyncio.Future]]] = {}
        self.counters = Counters()
        # docs/architecture.md, "Metrics and the dashboard" (None: metrics off):
        # per-queue live statistics, and commands per record of the log (a fixed
        # histogram: no allocation per record).
        self.stats = stats
        self.batch_commands = Histogram(BATCH_COMMANDS) if stats is not None else None

    def expect_catch_up(self, targets: dict[int, int], on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once every partition has been applied up to its target
        (the end of the log when the partitions were recovered)."""
        self._catch_up = {
            partition: target
            for partition, target in targets.items()
            if self._applied_through.get(partition, -1) < target
        }
        self._on_caught_up = on_caught_up
        if not self._catch_up:
            on_caught_up()

    async def applied(self, partition: int, offset: int) -> None:
        """Return once the record at ``offset`` of ``partition`` is handled (at once if
        this process does not own the partition: then it never will be here)."""
        if self._applied_through.get(partition, -1) >= offset:
            return
        if partition not in self._store.active:
            return
        future = asyncio.get_running_loop().create_future()
        self._offset_waiters.setdefault(partition, []).append((offset, future))
        await future

    def catching_up(self) -> dict[int, int]:
        """Partitions still behind their catch-up target: the last offset applied."""
        return {p: self._applied_through.get(p, -1) for p in self._catch_up}

    def catch_up_remaining(self) -> dict[int, int]:
        """Partitions still catching up: how many records each has left to re-apply."""
        return {p: max(0, target - self._applied_through.get(p, -1))
                for p, target in self._catch_up.items()}

    def resumed_at(self, positions: dict[int, int]) -> None:
        """Recovered partitions resume reading at these offsets (the committed ones):
        each record is applied in offset order from there, and only while this process
        holds its partitions."""
        for partition, offset in positions.items():
            self.resume_partition(partition, offset)
        self.suspended = False

    def resume_partition(self, partition: int, offset: int) -> None:
        """One partition resumes at ``offset`` (taken again on its own after its
        transaction failed: streams/faust/ownership.py)."""
        self._resumed_at[partition] = offset
        self._next[partition] = offset
        self._reading_again.pop(partition, None)

    def expect_partition_caught_up(self, partition: int, target: int,
                                   on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once ``partition`` is applied up to ``target``."""
        if self._applied_through.get(partition, -1) >= target:
            on_caught_up()
        else:
            self._partition_catch_up[partition] = (target, on_caught_up)

    def forget(self, partitions) -> None:
        """``partitions`` left this process: nothing of theirs is applied any more, and
        whoever waited for one of their offsets is let go (it will never come here)."""
        for partition in partitions:
            self._next.pop(partition, None)
            self._reading_again.pop(partition, None)
            self._applied_through.pop(partition, None)
            self._resumed_at.pop(partition, None)
            self._catch_up.pop(partition, None)
            self._partition_catch_up.pop(partition, None)
            self._watermarks.pop(partition, None)  # the table's, read again when needed
            self._admitted.pop(partition, None)
            for _, future in self._offset_waiters.pop(partition, []):
                if not future.done():
                    future.set_result(None)

    def set_aside(self, partition: int) -> None:
        """One partition is given up to be taken again on its own (its transaction
        failed: streams/faust/ownership.py take_again): forgotten as if revoked, and no longer
        awaited by the catch-up of the others, which serve once they are caught up."""
        waiting = bool(self._catch_up)
        self.forget([partition])
        if waiting and not self._catch_up:
            self._on_caught_up()

    def suspend(self) -> None:
        """Apply nothing until partitions are assigned and recovered again."""
        self.suspended = True

    def next_offsets(self) -> dict[int, int]:
        """Owned partitions with records applied: the next offset to apply (what a
        commit names, streams/faust/transactions.py)."""
        return {p: through + 1 for p, through in self._applied_through.items()
                if p in self._next}

    def applied_offsets(self) -> dict[int, int]:
        """Owned partitions: the last offset of the command log handled (before the
        first record since recovery: the one before where reading resumed)."""
        return {p: self._applied_through.get(p, self._resumed_at.get(p, 0) - 1)
                for p in self._store.active}

    def catch_up_status(self) -> str:
        return ", ".join(
            f"partition {p}: through {through} of {self._catch_up[p]}"
            for p, through in sorted(self.catching_up().items())
        ) or "done"

    def forget_watermarks(self) -> None:
        """Partitions were reassigned: read watermarks from the table again."""
        self._watermarks.clear()
        self._admitted.clear()

    def admitted_end(self, partition: int) -> int:
        """Bulk partition ``partition``'s admission: the next bulk position to admit
        (everything before it is admitted and applied)."""
        mark = self._admitted.get(partition)
        if mark is None:
            raw = self._store.read(partition, BULK_ADMITTED_KEY)
            mark = self._admitted[partition] = int(raw) if raw else NOTHING_ADMITTED
        return mark

    def _watermark(self, partition: int) -> int:
        mark = self._watermarks.get(partition)
        if mark is None:
            raw = self._store.read(partition, WATERMARK_KEY)
            if raw:
                mark = int(raw)
            else:  # written before positions: the offset of a single-command record
                legacy = self._store.read(partition, LEGACY_WATERMARK_KEY)
                mark = position(int(legacy)) if legacy else -1
            self._watermarks[partition] = mark
        return mark

    async def handle_batch(self, partition: int, records: Sequence) -> None:
        """Apply one fetch's records of ``partition`` (aiokafka ConsumerRecords, in
        offset order, ``timestamp`` the broker's LogAppendTime in milliseconds:
        streams/faust/command_fetch.py), each only if it is the partition's next record
        and this process still holds its partitions.

        A partition's state is the fold of its log, so its records are applied in
        offset order, each once, without a gap: a record that is the one expected goes
        straight to its apply, any other takes ``_in_order``'s path. And only while this
        process's lease on its partitions holds (streams/faust/lease.py): a process that
        was paused past its session must not apply what the partition's new owner is
        applying; it stops and gives its partitions up (``ownership.lost``)."""
        next_ = self._next
        holds = self._ownership.holds
        for at, record in enumerate(records):
            if self.suspended:  # lost, or may have lost, its partitions
                self.counters.skipped += len(records) - at
                return
            offset = record.offset
            if next_.get(partition) == offset:
                if self._reading_again:
                    self._reading_again.pop(partition, None)
            elif not await self._in_order(record):
                continue
            if not holds():
                self._lease_lost(record.topic, partition, offset)
                self.counters.skipped += len(records) - at
                return
            await self._apply_record(record, record.value, record.timestamp)
            if next_.get(partition) == offset:
                # Unless the partition was given up while this record was applied (its
                # transaction failed: streams/faust/ownership.py): then it resumes where
                # it is taken again, not here.
                next_[partition] = offset + 1

    def _lease_lost(self, topic: str, partition: int, offset: int) -> None:
        """Stop applying and give the partitions up: the lease expired before the record
        at ``offset`` was applied (``handle_batch``)."""
        self.suspend()
        self._ownership.lost("its lease on its partitions expired (a pause, or cut off "
                             "from the group coordinator) before it applied "
                             f"{topic}[{partition}]@{offset}")

    async def _in_order(self, message) -> bool:
        """Whether ``message`` is its partition's next record. A record before it was
        applied already (delivered again after a seek); one after it means records
        were skipped: faust's fetcher can move past records it never hands over around
        a rebalance (its getmany drops the rest of a fetch when the flow stops, and
        counts the gap as acknowledged), so the partition is read again from the
        offset expected. The command log has no gaps (no compaction, no transactions)
        except below its log start, where retention deleted records: those are gone."""
        partition, offset = message.partition, message.offset
        expected = self._next.get(partition)
        if expected is None or offset < expected:
            self.counters.skipped += 1  # not resumed here (yet), or applied already
            return False
        if offset == expected:
            self._reading_again.pop(partition, None)
            return True
        self.counters.skipped += 1
        again = self._reading_again.get(partition)
        now = time.monotonic()
        if again is not None and again[0] == expected and now - again[1] < READ_AGAIN_S:
            return False  # records fetched before the seek: already being read again
        first = await self._ownership.log_start(partition)
        if first is not None and expected < first:
            log.error("%s[%d]: offsets %d to %d were deleted by retention before they were "
                      "applied: their commands are lost", message.topic, partition,
                      expected, first - 1)
            self._next[partition] = expected = first
            if offset == first:
                return True
        log.warning("%s[%d]@%d arrived while %d was expected next: reading the partition "
                    "again from %d", message.topic, partition, offset, expected, expected)
        self._reading_again[partition] = (expected, now)
        await self._ownership.read_again(partition, expected)
        return False

    async def _apply_record(self, message, value: bytes | None, at_ms: int) -> None:
        """Apply one record's commands (see the module docstring). Whatever goes wrong
        with one command is contained here (docs/architecture.md, "Hostile inputs"): it
        is rejected, its issuer told why, the event logged and counted, and the
        processor moves on."""
        partition, offset = message.partition, message.offset
        self.counters.records += 1
        try:
            source, items = read_record(value)
        except CodecError as error:  # a broken batch: none of its commands is trusted
            self.counters.undecodable += 1
            self._contain(message, f"undecodable batch record: {error}", (None, None))
            self._caught_up_to(partition, offset)
            return
        batch = _Batch()
        if source is not None:
            if not self._admits(message, source):
                self._caught_up_to(partition, offset)
                return
            batch.admitted = source.end
            self.counters.slices += 1
        if len(items) > 1:
            self.counters.batches += 1
        if self.batch_commands is not None:
            self.batch_commands.observe(len(items))
        for index, data in enumerate(items):
            self._apply(message, position(offset, index), at_ms, data, batch)
        if batch.follow_ups:  # before the records: the commit that covers them waits
            self.counters.follow_ups += len(batch.follow_ups)
            self._follow_ups(partition, batch.follow_ups)
        if batch.records or batch.side or batch.admitted is not None:
            records = batch.changelog(self._watermarks.get(partition))
            await self._persist(partition, records)
            if batch.admitted is not None:
                self._admitted[partition] = batch.admitted
        on_applied = self._waiters.on_applied
        for request_id, applied in batch.replies:
            on_applied(request_id, applied)
        self._caught_up_to(partition, offset)

    def _admits(self, message, source) -> bool:
        """Whether a slice record is applied (see the module docstring)."""
        if source.partition != message.partition:  # only a foreign writer does this
            self.counters.undecodable += 1
            self._log_contained(message, f"a slice of bulk partition {source.partition}")
            return False
        if not admits(source, self.admitted_end(message.partition)):
            self.counters.readmitted += 1
            log.warning(
                "%s[%d]@%d: bulk commands %s were already admitted: skipped",
                message.topic, message.partition, message.offset, source.describe(),
            )
            return False
        return True

    def _apply(self, message, at: int, at_ms: int, data: bytes, batch: "_Batch") -> None:
        """Apply the command ``data`` at position ``at`` to the batch."""
        partition = message.partition
        try:
            decoded = decode_command(data)
        except CodecError as error:
            self.counters.undecodable += 1
            self._contain(message, f"undecodable command: {error}", correlation_of(data), batch)
            return
        command = decoded.command
        if isinstance(command, RECURRENCE_COMMANDS):
            self._apply_recurrence(message, command, at, at_ms, decoded, batch)
            return
        if isinstance(command, QUEUE_COMMANDS):
            self._apply_queue_command(command, partition, at, decoded, batch)
            return
        key = job_key(command.job_id)
        job = batch.jobs.get(key, _UNREAD)
        if job is _UNREAD:
            # A failing read is the store's failure, not this command's: it raises (a
            # replay, which reads no store, would otherwise decide differently).
            raw = self._store.read(partition, key)
            job = self._store.decode(raw, partition, key) if raw is not None else None
        if job is None and at <= self._watermark(partition):
            result = Step(Ignored(ALREADY_APPLIED), None)
        else:  # the pure core, its failures contained as rejections (eventq/core/step.py)
            result = step(job, command, at_ms, at, self._max_state_record_bytes)
        outcome = result.outcome
        if isinstance(outcome, Accepted):
            self._store_job(key, partition, at, outcome.event, result, command.job_id, batch)
            self.counters.applied += 1
            if isinstance(outcome.event, NOTICE_EVENTS):
                self.counters.notices += 1
            if self.stats is not None:
                self.stats.observe(outcome.event, job, result.job, at_ms)
        elif isinstance(outcome, Ignored):
            self.counters.ignored += 1
        elif outcome.error.code == "SERVER-ERROR":
            self.counters.unappliable += 1
            self._log_contained(message, outcome.error.text)
        else:
            self.counters.rejected += 1
        if result.follow_ups or result.side or result.then is not None:
            self._apply_workflow(message, at, result, batch)
        if decoded.node == self._node and decoded.request_id is not None:
            batch.replies.append((decoded.request_id, Applied(outcome, result.job, at)))

    def _apply_queue_command(self, command, partition: int, at: int, decoded,
                             batch: "_Batch") -> None:
        """pause/resume (docs/protocol.md, "eventq extensions"): the queue's state in this partition is what
        the last of them said. The pause record keeps the position of the command that
        set it, and a command at or below it was applied already: re-reading a tail over
        a table that holds a later command's state (a slice skipped whole as admitted,
        streams/memory.py's contract) must not bring an older state back. A resume wakes
        the leases waiting on the queue."""
        key = paused_key(command.name)
        stored = batch.records.get(key) or self._store.read(partition, key)
        if stored is not None and read_pause_record(stored)[1] >= at:
            self.counters.ignored += 1
        else:
            paused = is_paused_after(command)
            batch.records[key] = pause_record(paused, at)
            self._index.set_paused(partition, command.name, paused)
            if not paused:
                self._waiters.wake_all(command.name)
            self.counters.applied += 1
        if decoded.node == self._node and decoded.request_id is not None:
            batch.replies.append((decoded.request_id, Applied(QUEUE_STATE_SET, None)))

    def _apply_recurrence(self, message, command, at: int, at_ms: int, decoded,
                          batch: "_Batch") -> None:
        """recur, unrecur, fire (docs/workflows.md, "Recurring jobs";
        eventq/core/recurrence.py): the recurrence's record lives beside the jobs of the
        partition its key ``recur:<name>`` hashes to, read through this batch's own
        writes, and is positional like a job: its ``version`` skips a re-read command,
        and an unrecur moves the partition's watermark as a job's removal does, so a
        re-read command of a removed recurrence is skipped too. A fire that fires a slot
        hands on the slot's add, written into the job id's partition before this record
        is committed (``follow_ups``)."""
        partition = message.partition
        key = recurrence_table_key(command.name)
        raw = batch.records[key] if key in batch.records else self._store.read(partition, key)
        record = None
        if raw is not None:
            try:
                record = decode_recurrence(raw)
            except CodecError as error:  # a record no fold can have written: start afresh
                self._store.undecodable += 1
                log.error("%s[%d]@%d: undecodable recurrence %r (taken as absent): %s",
                          message.topic, partition, message.offset, key, error)
        if record is None and at <= self._watermark(partition):
            result = RecurrenceStep(Ignored(ALREADY_APPLIED), None)
        else:
            result = step_recurrence(record, command, at_ms, at)
        outcome = result.outcome
        if isinstance(outcome, Changed):
            self.counters.applied += 1
            if result.removes:
                self._watermarks[partition] = at
                batch.removed = True
                batch.records[key] = None
                self._index.remove_recurrence(command.name)
            else:
                assert result.record is not None and result.value is not None
                batch.records[key] = result.value
                self._index.put_recurrence(partition, result.record)
                self._on_deadline(result.record.next_ms)
            if outcome.fired is not None:
                self.counters.fired += 1
            batch.follow_ups.extend(result.follow_ups)
        elif isinstance(outcome, Ignored):
            self.counters.ignored += 1
        elif outcome.error.code == "SERVER-ERROR":
            self.counters.unappliable += 1
            self._log_contained(message, outcome.error.text)
        else:
            self.counters.rejected += 1
        if decoded.node == self._node and decoded.request_id is not None:
            batch.replies.append((decoded.request_id, Applied(outcome, None, at)))

    def _contain(
        self, message, reason: str, issuer: tuple[str | None, int | None], batch=None
    ) -> None:
        """A record or element that is not a command: reject it for its issuer, if
        known (with the batch's other replies, when it is in one)."""
        rejection = unappliable(reason)
        self._log_contained(message, rejection.error.text)
        node, request_id = issuer
        if node == self._node and request_id is not None:
            if batch is None:
                self._waiters.on_applied(request_id, Applied(rejection, None))
            else:
                batch.replies.append((request_id, Applied(rejection, None)))

    @staticmethod
    def _log_contained(message, reason: str) -> None:
        log.error(
            "command at %s[%d]@%d rejected: %s",
            message.topic, message.partition, message.offset, reason,
        )

    def _caught_up_to(self, partition: int, offset: int) -> None:
        if partition not in self._next:
            return  # given up while the record was applied: nothing of it counts
        self._applied_through[partition] = offset
        waiting = self._offset_waiters.get(partition)
        if waiting:
            still = []
            for at, future in waiting:
                if at <= offset:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((at, future))
            self._offset_waiters[partition] = still
        target = self._catch_up.get(partition)
        if target is not None and offset >= target:
            del self._catch_up[partition]
            if not self._catch_up:
                self._on_caught_up()
        alone = self._partition_catch_up.get(partition)
        if alone is not None and offset >= alone[0]:
            del self._partition_catch_up[partition]
            alone[1]()

    def _apply_workflow(self, message, at: int, result: Step, batch: "_Batch") -> None:
        """What a step asks beyond its job's record (eventq/core/followups.py): its
        follow-ups and side records, then the registrations its ``then`` reads (through
        this batch's own writes) and what ``register`` or ``notify`` make of them. Runs
        for ignored outcomes too: a ``depend`` and an ``expire`` of an absent job are
        ``Ignored`` and still carry work."""
        partition = message.partition
        batch.follow_ups.extend(result.follow_ups)
        batch.side.update(result.side)
        then = result.then
        if then is None:
            return
        try:  # pure, and fed what the core wrote: a failure here is a bug, contained
            if isinstance(then, Register):
                raw = self._read_side(partition, then.key, batch)
                existing = None if raw is None else self._registration(message, then.key, raw)
                effects = register(then, existing)
            else:
                effects = notify(then, self._registrations(message, then.prefix, batch))
        except Exception as error:
            self.counters.unappliable += 1
            self._log_contained(message, f"its workflow records could not be read or "
                                         f"written: {type(error).__name__}: {error}")
            return
        batch.follow_ups.extend(effects.follow_ups)
        batch.side.update(effects.side)
        if isinstance(then, Register) and effects.side:  # (a repeat writes nothing)
            self.counters.registrations += 1
        if effects.removes:  # registrations of an absent job dropped: as a tombstone
            self._watermarks[partition] = at
            batch.removed = True
        if isinstance(then, Register) and result.job is None:
            # An absent upstream's registration is dropped by a timer's expire of its id
            # once its deadline has passed (streams/timers.py); a live upstream's go
            # with its ending or removal.
            self._registration_timers(effects.side)

    def _registration_timers(self, side: Sequence[SideRecord]) -> None:
        for key, value in side:
            if value is not None and key.startswith(REGISTRATION_KEY_PREFIX):
                deadline = decode_registration(value).deadline_ms
                if deadline is not None:
                    self._index.put_registration(registration_ids(key)[0], deadline)
                    self._on_deadline(deadline)

    def _read_side(self, partition: int, key: bytes, batch: "_Batch") -> bytes | None:
        """A record beside the jobs as this batch left it so far."""
        if key in batch.side:
            return batch.side[key]
        return self._store.read(partition, key)

    def _registrations(self, message, prefix: bytes, batch: "_Batch") -> list[Registration]:
        """Every registration under ``prefix`` as this batch left it so far, in key
        order (an undecodable one is logged and passed over)."""
        found = dict(self._store.scan(message.partition, prefix))
        for key, value in batch.side.items():
            if key.startswith(prefix):
                found[key] = value
        registrations = []
        for key in sorted(found):
            raw = found[key]
            if raw is not None:
                registration = self._registration(message, key, raw)
                if registration is not None:
                    registrations.append(registration)
        return registrations

    def _registration(self, message, key: bytes, raw: bytes) -> Registration | None:
        try:
            return decode_registration(raw)
        except CodecError as error:
            self._store.undecodable += 1
            log.error("%s[%d]@%d: undecodable registration %r (passed over): %s",
                      message.topic, message.partition, message.offset, key, error)
            return None

    def _store_job(self, key, partition, at, event, result: Step, job_id, batch) -> None:
        after = result.job
        batch.jobs[key] = after
        if result.removes:
            self._watermarks[partition] = at
            batch.removed = True
            batch.records[key] = None
            self._index.remove(job_id)
            if isinstance(event, Expired) and event.evicted:
                self.counters.evicted += 1
            self._waiters.on_final(job_id, None)
            return
        assert after is not None and result.record is not None
        batch.records[key] = result.record
        now_ms = self._clock_ms()
        self._index.put(after, partition, now_ms, event.at_ms)
        if is_final(after):
            self._waiters.on_final(job_id, after)
        elif is_ready(after, now_ms):
            self._waiters.on_ready((after.name,))
        for deadline in (after.lease_deadline_ms, after.expires_ms, ready_time_ms(after)):
            if deadline is not None:
                self._on_deadline(deadline)


_UNREAD = object()  # a job this batch has not read yet
QUEUE_STATE_SET = Ignored("queue state set")  # the reply to pause/resume: no job changed


class _Batch:
    """What one record's commands did: each job's last state, the records beside the
    jobs, the follow-ups to hand on, the replies to send."""

    __slots__ = ("jobs", "records", "side", "follow_ups", "removed", "replies", "admitted")

    def __init__(self) -> None:
        self.jobs: dict[bytes, object] = {}  # key -> Job or None, after this batch
        self.records: dict[bytes, bytes | None] = {}  # key -> last state record or None
        self.side: dict[bytes, bytes | None] = {}  # key -> last side record or None
        self.follow_ups: list[FollowUp] = []  # in the order the commands gave them
        self.removed = False  # a removal moved the partition's watermark
        self.replies: list[tuple[int, Applied]] = []
        self.admitted: int | None = None  # a slice's last bulk offset

    def changelog(self, watermark: int | None) -> list[tuple[bytes, bytes | None]]:
        """The records to store, in the order that keeps every prefix restorable (see
        the module's docstring): records beside the jobs (written and deleted), live
        states, the watermark, tombstones, and last the bulk offset this record
        admitted."""
        live = [(key, value) for key, value in self.records.items() if value is not None]
        dead = [(key, None) for key, value in self.records.items() if value is None]
        records = [*self.side.items(), *live]
        if dead or self.removed:
            assert watermark is not None
            records = [*records, (WATERMARK_KEY, str(watermark).encode()), *dead]
        if self.admitted is not None:
            records.append((BULK_ADMITTED_KEY, str(self.admitted).encode()))
        return records
