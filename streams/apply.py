"""Apply one command of a record of `eventq.commands` to what that record does
(streams/batch_effects.py), for the processor (streams/processor.py).

For each command (docs/architecture.md, "The processor" and "Batches"): decode it, take
the job (from this batch if an earlier command changed it, else from the table),
``step`` it with the pure core at the broker's LogAppendTime, and update the derived
indexes, the waiters and the timers' deadlines; the batch's effect is stored once,
afterwards. Whatever goes wrong with one command is contained here
(docs/architecture.md, "Hostile inputs"): it is rejected, its issuer told why, the
event logged and counted, and the processor moves on.

Idempotency is positional, a position being (record offset, index in the record) as
one integer (eventq/core/batch.py). A present job skips commands at or below its
``version`` (the core does this). An absent job cannot tell "never existed" from
"deleted later", so every removal moves the partition's watermark (the position of the
last command that removed a job, stored before the tombstones: streams/batch_effects.py):
an absent job's command at or below it was already applied.

Workflows (docs/workflows.md, "Determinism"; docs/architecture.md, "Workflows"). A step
also gives records beside the jobs (``Step.side``: a dependent's inputs, an upstream's
registrations), registrations to read (``Step.then``: the one a ``depend`` stores, or all
of an upstream that ended, read through this batch's own earlier writes) and follow-up
commands for other partitions, gathered with the batch.
"""

from __future__ import annotations

import logging
import uuid
from typing import Callable, Iterable, Protocol, Sequence

from eventq.core import (
    CodecError,
    Expired,
    Job,
    correlation_of,
    decode_command,
    decode_registration,
)
from eventq.core.batch import position
from eventq.core.codec import DecodedCommand, decode_recurrence
from eventq.core.commands import (
    QUEUE_COMMANDS,
    RECURRENCE_COMMANDS,
    Command,
    QueueCommand,
    RecurrenceCommand,
    is_paused_after,
)
from eventq.core.events import NOTICE_EVENTS, Event
from eventq.core.followups import Register, SideRecord, notify, register
from eventq.core.job import is_final, is_ready, ready_time_ms
from eventq.core.machine import ALREADY_APPLIED, Accepted, Ignored
from eventq.core.partitioner import job_key
from eventq.core.recurrence import Changed, recurrence_table_key
from eventq.core.step import RecurrenceStep, Step, step, step_recurrence, unappliable
from eventq.core.workflow import REGISTRATION_KEY_PREFIX, Registration, registration_ids
from eventq.protocol.replies import outcome_reply
from eventq.state.indexes import JobIndex
from eventq.state.jobs_table import (
    LEGACY_WATERMARK_KEY,
    WATERMARK_KEY,
    pause_record,
    paused_key,
    read_pause_record,
)
from eventq.state.livestats import LiveStats
from eventq.state.waiters import Applied, Waiters
from streams.batch_effects import BatchEffects
from streams.counters import Counters
from streams.store import JobStore

log = logging.getLogger(__name__)

QUEUE_STATE_SET = Ignored("queue state set")  # the reply to pause/resume: no job changed

Issuer = tuple["str | None", "int | None"]  # (node, request id) of whoever waits


class CommandRecord(Protocol):
    """A record of the command log as the processor is handed it: what it reads of
    aiokafka's ConsumerRecord (streams/faust/command_fetch.py; streams/memory.py
    ``Fetched`` without a broker)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> int: ...  # LogAppendTime, stamped by the broker, in ms

    @property
    def value(self) -> bytes | None: ...


class CommandApplier:
    """Applies commands for the processor; keeps each partition's watermark, read from
    the table when first needed."""

    def __init__(
        self,
        *,
        store: JobStore,
        index: JobIndex,
        waiters: Waiters,
        node: str,
        on_deadline: Callable[[int], None],
        clock_ms: Callable[[], int],
        max_state_record_bytes: int,
        stats: LiveStats | None,
        counters: Counters,
    ) -> None:
        self._store = store
        self._index = index
        self._waiters = waiters
        self._node = node
        self._on_deadline = on_deadline
        self._clock_ms = clock_ms
        self._max_state_record_bytes = max_state_record_bytes
        self._stats = stats
        self._counters = counters
        self._watermarks: dict[int, int] = {}  # partition -> position of its last removal

    # --- the partition's watermark -------------------------------------------------------

    def watermark(self, partition: int) -> int:
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

    def known_watermark(self, partition: int) -> int | None:
        """The watermark as known here: read from the table, or moved by a removal since
        (None: neither yet)."""
        return self._watermarks.get(partition)

    def forget_watermarks(self, partitions: Iterable[int] | None = None) -> None:
        """Read ``partitions``' watermarks (None: all) from the table again when needed."""
        if partitions is None:
            self._watermarks.clear()
            return
        for partition in partitions:
            self._watermarks.pop(partition, None)

    # --- one command ----------------------------------------------------------------------

    def apply(self, record: CommandRecord, at: int, at_ms: int, data: bytes,
              batch: BatchEffects) -> None:
        """Apply the command ``data`` at position ``at`` to the batch."""
        try:
            decoded = decode_command(data)
        except CodecError as error:
            self._counters.undecodable += 1
            self.contain(record, f"undecodable command: {error}", correlation_of(data), batch)
            return
        command = decoded.command
        if isinstance(command, RECURRENCE_COMMANDS):
            self._apply_recurrence(record, command, at, at_ms, decoded, batch)
        elif isinstance(command, QUEUE_COMMANDS):
            self._apply_queue_command(command, record.partition, at, decoded, batch)
        else:
            self._apply_job_command(record, command, at, at_ms, decoded, batch)

    def _apply_job_command(self, record: CommandRecord, command: Command, at: int,
                           at_ms: int, decoded: DecodedCommand, batch: BatchEffects) -> None:
        partition = record.partition
        key = job_key(command.job_id)
        if key in batch.jobs:
            job = batch.jobs[key]
        else:
            # A failing read is the store's failure, not this command's: it raises (a
            # replay, which reads no store, would otherwise decide differently).
            raw = self._store.read(partition, key)
            job = self._store.decode(raw, partition, key) if raw is not None else None
        if job is None and at <= self.watermark(partition):
            result = Step(Ignored(ALREADY_APPLIED), None)
        else:  # the pure core, its failures contained as rejections (eventq/core/step.py)
            result = step(job, command, at_ms, at, self._max_state_record_bytes)
        outcome = result.outcome
        counters = self._counters
        if isinstance(outcome, Accepted):
            self._store_job(key, partition, at, outcome.event, result, command.job_id, batch)
            counters.applied += 1
            if isinstance(outcome.event, NOTICE_EVENTS):
                counters.notices += 1
            if self._stats is not None:
                self._stats.observe(outcome.event, job, result.job, at_ms)
        elif isinstance(outcome, Ignored):
            counters.ignored += 1
        elif outcome.error.code == "SERVER-ERROR":
            counters.unappliable += 1
            self.log_contained(record, outcome.error.text)
        else:
            counters.rejected += 1
        if result.follow_ups or result.side or result.then is not None:
            self._apply_workflow(record, at, result, batch)
        if decoded.request_id is not None:
            if decoded.node == self._node:
                batch.replies.append((decoded.request_id, Applied(outcome, result.job, at)))
            elif decoded.node is not None and not isinstance(outcome, Ignored):
                # Its writer lost the partition before it applied it and may ask for
                # the reply here (docs/architecture.md, "Abandoned commands"). An
                # ignored one (a re-read) has no reply to give: it stays unknown.
                error = None if isinstance(outcome, Accepted) else outcome.error
                batch.handed.append((decoded.node, decoded.request_id,
                                     outcome_reply(error is None, error)))

    def _apply_queue_command(self, command: QueueCommand, partition: int, at: int,
                             decoded: DecodedCommand, batch: BatchEffects) -> None:
        """pause/resume (docs/protocol.md, "eventq extensions"): the queue's state in
        this partition is what the last of them said. The pause record keeps the
        position of the command that set it, and a command at or below it was applied
        already: re-reading a tail over a table that holds a later command's state (a
        slice skipped whole as admitted, streams/memory.py's contract) must not bring an
        older state back. A resume wakes the leases waiting on the queue."""
        key = paused_key(command.name)
        stored = batch.records.get(key) or self._store.read(partition, key)
        if stored is not None and read_pause_record(stored)[1] >= at:
            self._counters.ignored += 1
        else:
            paused = is_paused_after(command)
            batch.records[key] = pause_record(paused, at)
            self._index.set_paused(partition, command.name, paused)
            if not paused:
                self._waiters.wake_all(command.name)
            self._counters.applied += 1
        if decoded.node == self._node and decoded.request_id is not None:
            batch.replies.append((decoded.request_id, Applied(QUEUE_STATE_SET, None)))

    def _apply_recurrence(self, record: CommandRecord, command: RecurrenceCommand, at: int,
                          at_ms: int, decoded: DecodedCommand, batch: BatchEffects) -> None:
        """recur, unrecur, fire (docs/workflows.md, "Recurring jobs";
        eventq/core/recurrence.py): the recurrence's record lives beside the jobs of the
        partition its key ``recur:<name>`` hashes to, read through this batch's own
        writes, and is positional like a job: its ``version`` skips a re-read command,
        and an unrecur moves the partition's watermark as a job's removal does, so a
        re-read command of a removed recurrence is skipped too. A fire that fires a slot
        hands on the slot's add, written into the job id's partition before this record
        is committed (``follow_ups``)."""
        partition = record.partition
        key = recurrence_table_key(command.name)
        raw = batch.records[key] if key in batch.records else self._store.read(partition, key)
        recurrence = None
        if raw is not None:
            try:
                recurrence = decode_recurrence(raw)
            except CodecError as error:  # a record no fold can have written: start afresh
                self._store.undecodable += 1
                log.error("%s[%d]@%d: undecodable recurrence %r (taken as absent): %s",
                          record.topic, partition, record.offset, key, error)
        if recurrence is None and at <= self.watermark(partition):
            result = RecurrenceStep(Ignored(ALREADY_APPLIED), None)
        else:
            result = step_recurrence(recurrence, command, at_ms, at)
        outcome = result.outcome
        counters = self._counters
        if isinstance(outcome, Changed):
            counters.applied += 1
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
                counters.fired += 1
            batch.follow_ups.extend(result.follow_ups)
        elif isinstance(outcome, Ignored):
            counters.ignored += 1
        elif outcome.error.code == "SERVER-ERROR":
            counters.unappliable += 1
            self.log_contained(record, outcome.error.text)
        else:
            counters.rejected += 1
        if decoded.node == self._node and decoded.request_id is not None:
            # Applied names the outcomes of a job's commands; a recurrence's reply
            # (eventq/gateway/handlers.py recurrence_reply) tells only a Rejected and an
            # Ignored from the rest, Changed among them.
            applied = Applied(outcome, None, at)  # type: ignore[arg-type]
            batch.replies.append((decoded.request_id, applied))

    # --- what is not a command ------------------------------------------------------------

    def contain(self, record: CommandRecord, reason: str, issuer: Issuer,
                batch: BatchEffects | None = None) -> None:
        """A record or element that is not a command: reject it for its issuer, if
        known (with the batch's other replies, when it is in one)."""
        rejection = unappliable(reason)
        self.log_contained(record, rejection.error.text)
        node, request_id = issuer
        if node == self._node and request_id is not None:
            if batch is None:
                self._waiters.on_applied(request_id, Applied(rejection, None))
            else:
                batch.replies.append((request_id, Applied(rejection, None)))

    @staticmethod
    def log_contained(record: CommandRecord, reason: str) -> None:
        log.error(
            "command at %s[%d]@%d rejected: %s",
            record.topic, record.partition, record.offset, reason,
        )

    # --- workflows ------------------------------------------------------------------------

    def _apply_workflow(self, record: CommandRecord, at: int, result: Step,
                        batch: BatchEffects) -> None:
        """What a step asks beyond its job's record (eventq/core/followups.py): its
        follow-ups and side records, then the registrations its ``then`` reads (through
        this batch's own writes) and what ``register`` or ``notify`` make of them. Runs
        for ignored outcomes too: a ``depend`` and an ``expire`` of an absent job are
        ``Ignored`` and still carry work."""
        partition = record.partition
        batch.follow_ups.extend(result.follow_ups)
        batch.side.update(result.side)
        then = result.then
        if then is None:
            return
        try:  # pure, and fed what the core wrote: a failure here is a bug, contained
            if isinstance(then, Register):
                raw = self._read_side(partition, then.key, batch)
                existing = None if raw is None else self._registration(record, then.key, raw)
                effects = register(then, existing)
            else:
                effects = notify(then, self._registrations(record, then.prefix, batch))
        except Exception as error:
            self._counters.unappliable += 1
            self.log_contained(record, f"its workflow records could not be read or "
                                       f"written: {type(error).__name__}: {error}")
            return
        batch.follow_ups.extend(effects.follow_ups)
        batch.side.update(effects.side)
        if isinstance(then, Register) and effects.side:  # (a repeat writes nothing)
            self._counters.registrations += 1
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

    def _read_side(self, partition: int, key: bytes, batch: BatchEffects) -> bytes | None:
        """A record beside the jobs as this batch left it so far."""
        if key in batch.side:
            return batch.side[key]
        return self._store.read(partition, key)

    def _registrations(self, record: CommandRecord, prefix: bytes,
                       batch: BatchEffects) -> list[Registration]:
        """Every registration under ``prefix`` as this batch left it so far, in key
        order (an undecodable one is logged and passed over)."""
        found: dict[bytes, bytes | None] = dict(self._store.scan(record.partition, prefix))
        for key, value in batch.side.items():
            if key.startswith(prefix):
                found[key] = value
        registrations = []
        for key in sorted(found):
            raw = found[key]
            if raw is not None:
                registration = self._registration(record, key, raw)
                if registration is not None:
                    registrations.append(registration)
        return registrations

    def _registration(self, record: CommandRecord, key: bytes,
                      raw: bytes) -> Registration | None:
        try:
            return decode_registration(raw)
        except CodecError as error:
            self._store.undecodable += 1
            log.error("%s[%d]@%d: undecodable registration %r (passed over): %s",
                      record.topic, record.partition, record.offset, key, error)
            return None

    # --- a job's new state ----------------------------------------------------------------

    def _store_job(self, key: bytes, partition: int, at: int, event: Event, result: Step,
                   job_id: uuid.UUID, batch: BatchEffects) -> None:
        after: Job | None = result.job
        batch.jobs[key] = after
        if result.removes:
            self._watermarks[partition] = at
            batch.removed = True
            batch.records[key] = None
            self._index.remove(job_id)
            if isinstance(event, Expired) and event.evicted:
                self._counters.evicted += 1
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
