"""Apply the records of `eventq.commands` (each one command or a batch of them) to the
`jobs` table.

For each record (docs/architecture.md, "The processor" and "Batches"): apply each of
its commands in order (streams/apply.py: decode, step with the pure core at the
broker's LogAppendTime, update the derived indexes), gathering what the record does
(streams/batch_effects.py). Then the batch's effect is stored once: one RocksDB write
batch holding only the last state of each job, the same records handed to the
partition's changelog transaction (streams/faust/transactions.py), and only then are the
issuers answered. It is handed the records of the partitions this process owns in
whole fetches (``handle_batch``, streams/faust/command_fetch.py); it is the only writer
of the tables (writes name their partition explicitly), and applies only while this
process holds its partitions (docs/fencing.md, "The three fences"). Where each
partition's apply stands is streams/progress.py's.

At-least-once: after a crash the uncommitted tail of a partition is read again, whole
records, so a crash in the middle of a batch re-reads all of it; positions make that
harmless (streams/apply.py), and the changelog's order makes any prefix of it safe to
restore from (streams/batch_effects.py).

Workflows' follow-up commands (docs/workflows.md, "Determinism";
docs/architecture.md, "Workflows") are handed on (``follow_ups``) before the batch's
records, and the partition's next commit waits until the broker has them
(streams/follow_ups.py, streams/faust/transactions.py): every committed record's
follow-ups are in the log, so a crash repeats them at worst. A table ahead of its commit
is safe only up to the last record whose follow-ups are acknowledged; eventq never keeps
one (a rollback restores the last commit, and a killed process's tables are rebuilt:
eventq/run/statedir.py).

Slices (docs/architecture.md, "Lanes"): a record admitted from `eventq.bulk` names its bulk
range (eventq/core/batch.py). The partition's admitted-through offset is kept like the
watermark, in the table and written last in the changelog; a slice at or below it is a
second copy and is skipped whole (``admits``).
"""

from __future__ import annotations

import logging
import time
from typing import Awaitable, Callable, Iterable, Protocol, Sequence

from eventq.core import CodecError
from eventq.core.batch import NOTHING_ADMITTED, SliceSource, admits, position, read_record
from eventq.core.followups import FollowUp
from eventq.limits import MAX_STATE_RECORD_BYTES
from eventq.state.buckets import BATCH_COMMANDS, Histogram
from eventq.state.indexes import JobIndex
from eventq.state.jobs_table import BULK_ADMITTED_KEY
from eventq.state.livestats import LiveStats
from eventq.state.waiters import Waiters
from streams.apply import CommandApplier, CommandRecord
from streams.batch_effects import BatchEffects, Changelog
from streams.counters import Counters
from streams.progress import ApplyProgress
from streams.store import JobStore

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


READ_AGAIN_S = 10.0  # a partition read again that has not delivered by then: seek again


class Ownership(Protocol):
    """What the processor asks of the process about its partitions
    (streams/faust/ownership.py ``Steward``)."""

    def holds(self) -> bool:
        """Whether this process still holds its partitions."""
        ...

    def lost(self, reason: str) -> None:
        """It may not: stop, and give them up."""
        ...

    async def log_start(self, partition: int) -> int | None:
        """The command log's first offset in ``partition`` (None: unknown)."""
        ...

    async def read_again(self, partition: int, offset: int) -> None:
        """Fetch ``partition`` again from ``offset``."""
        ...


class AlwaysHeld:
    """The default ownership (tests): every partition is held always, and nothing is
    read again."""

    def holds(self) -> bool:
        return True

    def lost(self, reason: str) -> None:
        pass

    async def log_start(self, partition: int) -> int | None:
        return None

    async def read_again(self, partition: int, offset: int) -> None:
        pass


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
        persist: Callable[[int, Changelog], Awaitable[None]],
        clock_ms: Callable[[], int] = wall_clock_ms,
        max_state_record_bytes: int = MAX_STATE_RECORD_BYTES,
        stats: LiveStats | None = None,
        ownership: Ownership | None = None,
        follow_ups: Callable[[int, Sequence[FollowUp]], None] = _no_follow_ups,
    ) -> None:
        self._store = store
        self._waiters = waiters
        # Stores one applied record's states: the local table, and the changelog in
        # the partition's open transaction (streams/faust/transactions.py).
        self._persist = persist
        # Hands one record's follow-up commands on to be written, each to its key's
        # partition of the command log; the partition's next commit waits for their
        # acknowledgement (streams/follow_ups.py).
        self._follow_ups = follow_ups
        self._ownership: Ownership = ownership or AlwaysHeld()
        self.suspended = False  # lost (or may have lost) its partitions: applies nothing
        self._admitted: dict[int, int] = {}  # partition -> next bulk position to admit
        self._progress = ApplyProgress()
        self.counters = Counters()
        # docs/architecture.md, "Metrics and the dashboard" (None: metrics off):
        # per-queue live statistics, and commands per record of the log (a fixed
        # histogram: no allocation per record).
        self.stats = stats
        self.batch_commands = Histogram(BATCH_COMMANDS) if stats is not None else None
        self._applier = CommandApplier(
            store=store, index=index, waiters=waiters, node=node, on_deadline=on_deadline,
            clock_ms=clock_ms, max_state_record_bytes=max_state_record_bytes, stats=stats,
            counters=self.counters)

    # --- where the partitions stand (streams/progress.py) -----------------------------

    def expect_catch_up(self, targets: dict[int, int], on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once every partition has been applied up to its target
        (the end of the log when the partitions were recovered)."""
        self._progress.expect_catch_up(targets, on_caught_up)

    def expect_partition_caught_up(self, partition: int, target: int,
                                   on_caught_up: Callable[[], None]) -> None:
        """Call ``on_caught_up`` once ``partition`` is applied up to ``target``."""
        self._progress.expect_partition_caught_up(partition, target, on_caught_up)

    async def applied(self, partition: int, offset: int) -> None:
        """Return once the record at ``offset`` of ``partition`` is handled (at once if
        this process does not own the partition: then it never will be here)."""
        if self._progress.handled(partition, offset):
            return
        if partition not in self._store.active:
            return
        await self._progress.applied(partition, offset)

    def catching_up(self) -> dict[int, int]:
        """Partitions still behind their catch-up target: the last offset applied."""
        return self._progress.catching_up()

    def catch_up_remaining(self) -> dict[int, int]:
        """Partitions still catching up: how many records each has left to re-apply."""
        return self._progress.catch_up_remaining()

    def catch_up_status(self) -> str:
        return self._progress.catch_up_status()

    def next_offsets(self) -> dict[int, int]:
        """Owned partitions with records applied: the next offset to apply (what a
        commit names, streams/faust/transactions.py)."""
        return self._progress.next_offsets()

    def applied_offsets(self) -> dict[int, int]:
        """Owned partitions: the last offset of the command log handled (before the
        first record since recovery: the one before where reading resumed)."""
        return self._progress.applied_offsets(self._store.active)

    # --- partitions coming and going ----------------------------------------------------

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
        self._progress.resume_partition(partition, offset)

    def forget(self, partitions: Iterable[int]) -> None:
        """``partitions`` left this process: nothing of theirs is applied any more, and
        whoever waited for one of their offsets is let go (it will never come here)."""
        partitions = list(partitions)
        self._forget_marks(partitions)
        self._progress.forget(partitions)

    def set_aside(self, partition: int) -> None:
        """One partition is given up to be taken again on its own (its transaction
        failed: streams/faust/ownership.py take_again): forgotten as if revoked, and no
        longer awaited by the catch-up of the others, which serve once they are caught
        up."""
        self._forget_marks([partition])
        self._progress.set_aside(partition)

    def _forget_marks(self, partitions: list[int]) -> None:
        """The table's, read again when needed."""
        self._applier.forget_watermarks(partitions)
        for partition in partitions:
            self._admitted.pop(partition, None)

    def forget_watermarks(self) -> None:
        """Partitions were reassigned: read watermarks from the table again."""
        self._applier.forget_watermarks()
        self._admitted.clear()

    def suspend(self) -> None:
        """Apply nothing until partitions are assigned and recovered again."""
        self.suspended = True

    def admitted_end(self, partition: int) -> int:
        """Bulk partition ``partition``'s admission: the next bulk position to admit
        (everything before it is admitted and applied)."""
        mark = self._admitted.get(partition)
        if mark is None:
            raw = self._store.read(partition, BULK_ADMITTED_KEY)
            mark = self._admitted[partition] = int(raw) if raw else NOTHING_ADMITTED
        return mark

    # --- applying --------------------------------------------------------------------

    async def handle_batch(self, partition: int, records: Sequence[CommandRecord]) -> None:
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
        progress = self._progress
        next_ = progress.next
        holds = self._ownership.holds
        for at, record in enumerate(records):
            if self.suspended:  # lost, or may have lost, its partitions
                self.counters.skipped += len(records) - at
                return
            offset = record.offset
            if next_.get(partition) == offset:
                if progress.reading_again:
                    progress.reading_again.pop(partition, None)
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

    async def _in_order(self, record: CommandRecord) -> bool:
        """Whether ``record`` is its partition's next record. A record before it was
        applied already (delivered again after a seek); one after it means records
        were skipped: faust's fetcher can move past records it never hands over around
        a rebalance (its getmany drops the rest of a fetch when the flow stops, and
        counts the gap as acknowledged), so the partition is read again from the
        offset expected. The command log has no gaps (no compaction, no transactions)
        except below its log start, where retention deleted records: those are gone."""
        partition, offset = record.partition, record.offset
        progress = self._progress
        expected = progress.next.get(partition)
        if expected is None or offset < expected:
            self.counters.skipped += 1  # not resumed here (yet), or applied already
            return False
        if offset == expected:
            progress.reading_again.pop(partition, None)
            return True
        self.counters.skipped += 1
        again = progress.reading_again.get(partition)
        now = time.monotonic()
        if again is not None and again[0] == expected and now - again[1] < READ_AGAIN_S:
            return False  # records fetched before the seek: already being read again
        first = await self._ownership.log_start(partition)
        if first is not None and expected < first:
            log.error("%s[%d]: offsets %d to %d were deleted by retention before they were "
                      "applied: their commands are lost", record.topic, partition,
                      expected, first - 1)
            progress.next[partition] = expected = first
            if offset == first:
                return True
        log.warning("%s[%d]@%d arrived while %d was expected next: reading the partition "
                    "again from %d", record.topic, partition, offset, expected, expected)
        progress.reading_again[partition] = (expected, now)
        await self._ownership.read_again(partition, expected)
        return False

    async def _apply_record(self, record: CommandRecord, value: bytes | None,
                            at_ms: int) -> None:
        """Apply one record's commands (see the module docstring). Whatever goes wrong
        with one command is contained (docs/architecture.md, "Hostile inputs"): it is
        rejected, its issuer told why, the event logged and counted, and the processor
        moves on."""
        partition, offset = record.partition, record.offset
        self.counters.records += 1
        try:
            source, items = read_record(value)
        except CodecError as error:  # a broken batch: none of its commands is trusted
            self.counters.undecodable += 1
            self._applier.contain(record, f"undecodable batch record: {error}", (None, None))
            self._progress.caught_up_to(partition, offset)
            return
        batch = BatchEffects()
        if source is not None:
            if not self._admits(record, source):
                self._progress.caught_up_to(partition, offset)
                return
            batch.admitted = source.end
            self.counters.slices += 1
        if len(items) > 1:
            self.counters.batches += 1
        if self.batch_commands is not None:
            self.batch_commands.observe(len(items))
        apply = self._applier.apply
        for index, data in enumerate(items):
            apply(record, position(offset, index), at_ms, data, batch)
        if batch.follow_ups:  # before the records: the commit that covers them waits
            self.counters.follow_ups += len(batch.follow_ups)
            self._follow_ups(partition, batch.follow_ups)
        if batch.records or batch.side or batch.admitted is not None:
            records = batch.changelog(self._applier.known_watermark(partition))
            await self._persist(partition, records)
            if batch.admitted is not None:
                self._admitted[partition] = batch.admitted
        on_applied = self._waiters.on_applied
        for request_id, applied in batch.replies:
            on_applied(request_id, applied)
        for node, request_id, reply in batch.handed:
            self._waiters.on_handed_over(node, request_id, reply)
        self._progress.caught_up_to(partition, offset)

    def _admits(self, record: CommandRecord, source: SliceSource) -> bool:
        """Whether a slice record is applied (see the module docstring)."""
        if source.partition != record.partition:  # only a foreign writer does this
            self.counters.undecodable += 1
            self._applier.log_contained(record, f"a slice of bulk partition {source.partition}")
            return False
        if not admits(source, self.admitted_end(record.partition)):
            self.counters.readmitted += 1
            log.warning(
                "%s[%d]@%d: bulk commands %s were already admitted: skipped",
                record.topic, record.partition, record.offset, source.describe(),
            )
            return False
        return True
