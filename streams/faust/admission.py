"""The bulk lane: admit records of `eventq.bulk` into `eventq.commands` a slice at a time.

docs/architecture.md, "Lanes". A Kafka partition is FIFO, so a worker's command written
behind 100,000 bulk adds waits for all of them (a lease failed after 5 s with 99,900
jobs ready). Bulk producers therefore write to the staging topic; this process
reads the bulk partitions it owns and copies their commands into the command log in
slices, each a batch record naming its range of bulk positions (a slice may end inside
a bulk record: ``eventq.core.batch.encode_slice``). Admission is paced by the
processor, not by the producers:

- a partition admits its next slice only once its last one is applied, and
- at most ``BULK_SLICES_IN_FLIGHT`` slices are written and not yet applied across all
  partitions (``BULK_SLICES_IN_FLIGHT_SHARED`` while workers' commands are being
  written), each at most ``BULK_SLICE_COMMANDS`` commands (``_SHARED``: fewer),

so an interactive command waits behind at most that much bulk work, however large the
load. Where a partition's admission stands is the processor's (the table's), never
this reader's memory: after a crash, reading resumes from what was applied, and a slice
written twice is applied once (``eventq.core.batch.admits``).

The offset of the first bulk record not wholly admitted is also committed, once
applied, as the offset of the consumer group ``<app id>.bulk`` on the bulk topic:
advisory only, so that `--wait` of a bulk load and any Kafka tool
(kafka-consumer-groups.sh) see the backlog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Protocol

from eventq.core import CodecError
from eventq.core.batch import (
    SliceSource,
    encode_slice,
    offset_of,
    position,
    read_record,
)
from eventq.kafka.security import KafkaTarget, aiokafka_options
from eventq.limits import KAFKA_MESSAGE_BYTES
from streams.command_writer import RecordProducer

log = logging.getLogger(__name__)

BULK_SLICE_COMMANDS = 500  # ~15 ms of the processor (28 us per command, as measured)
BULK_SLICE_COMMANDS_SHARED = 250  # while workers' commands arrive: ~7 ms (bench/mixed_bench.py)
BULK_SLICE_BYTES = 512 * 1024  # a slice grows to this (or holds one larger command)
BULK_SLICES_IN_FLIGHT = 2  # written but not applied, across all partitions, when no
BULK_SLICES_IN_FLIGHT_SHARED = 1  # interactive command was written lately; else this
INTERACTIVE_RECENT_S = 0.05  # "lately"
# Read ahead per partition: the fetch pauses beyond this many bytes of records (in
# bytes, not records: a pipeline's records may each hold one command, and a slice should
# still fill up; one fetch may overshoot it by up to a fetch's size).
BULK_READ_AHEAD_BYTES = 2 * 1024 * 1024
BULK_COMMIT_EVERY_S = 0.5  # advisory commits of the admitted offsets, at most this often
RETRY_AFTER_S = 1.0  # a slice Kafka did not take is written again after this


class _Read:
    """A bulk record read ahead: the commands of it not admitted yet, from ``index``."""

    __slots__ = ("offset", "index", "size", "commands")

    def __init__(self, offset: int, index: int, size: int, commands: list[bytes]) -> None:
        self.offset = offset
        self.index = index  # the position in its record of commands[0]
        self.size = size  # the record's bytes
        self.commands = commands

    @classmethod
    def of(cls, offset: int, value: bytes | None, resume: int) -> "_Read":
        """The bulk record ``value`` at ``offset``, less the commands before the
        admission ``resume`` (reading resumes inside a record a slice ended in)."""
        commands = _commands_of(value)
        skip = min(len(commands), max(0, resume - position(offset)))
        return cls(offset, skip, len(value or b""), commands[skip:])


def _commands_of(value: bytes | None) -> list[bytes]:
    """The encoded commands a bulk record holds. What is not a batch or a command is
    passed on whole: the processor rejects it as undecodable and logs where it is (and
    it stays in the bulk topic); a null record holds nothing."""
    if value is None:
        return []
    try:
        source, items = read_record(value)
    except CodecError:
        return [value]
    return [value] if source is not None else items


class _Lane:
    __slots__ = ("records", "size", "resume", "ready", "committed_at", "committed")

    def __init__(self, resume: int) -> None:
        self.records: list[_Read] = []  # in offset order
        self.size = 0  # their bytes
        self.resume = resume  # the admission when reading began: skip what is before it
        self.ready = asyncio.Event()
        self.committed_at = 0.0
        self.committed = -1


class _Restart(Exception):
    """Reading must start again from the admitted offsets (a slice was a second copy)."""


class Admitted(Protocol):
    """What the admission asks of the processor (streams/processor.py)."""

    def admitted_end(self, partition: int) -> int:
        """The next bulk position to admit into ``partition``."""
        ...

    async def applied(self, partition: int, offset: int) -> None:
        """Return once the record at ``offset`` of ``partition`` is applied."""
        ...


class BulkAdmitter:
    def __init__(
        self,
        *,
        bootstrap: KafkaTarget,
        bulk_topic: str,
        commands_topic: str,
        group_id: str,
        producer: Callable[[], RecordProducer | None],
        processor: Admitted,
        interactive_since: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._bulk_topic = bulk_topic
        self._commands_topic = commands_topic
        self._group_id = group_id
        self._producer = producer  # faust's AIOKafkaProducer (acks=all, idempotent)
        self._processor = processor  # admitted_end(p), applied(p, offset)
        self._interactive_since = interactive_since  # monotonic time of the last write
        self._in_flight = 0
        self._released = asyncio.Event()
        self._partitions: list[int] = []
        # The AIOKafkaConsumer while admitting (aiokafka has no types: Any, as every
        # consumer and TopicPartition here).
        self._consumer: Any = None
        self._lanes: dict[int, _Lane] = {}
        self._task: asyncio.Task | None = None
        self.slices = 0
        self.records = 0
        self.commands = 0

    # --- control -------------------------------------------------------------------

    def start(self, partitions: list[int]) -> None:
        """Admit the bulk records of ``partitions`` (those this process now serves,
        whose state is up to date: their admitted offsets are the table's)."""
        previous = self._task
        if previous is not None:
            previous.cancel()
        self._partitions = sorted(partitions)
        self._task = asyncio.ensure_future(self._run(after=previous))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def status(self) -> list[tuple[int, int, int]]:
        """Per partition this process admits from: (partition, next bulk offset to
        admit, bulk records from there to the topic's end). The ends are asked of Kafka
        (a fetch's high-water mark is stale while a full lane has paused its fetch)."""
        partitions = list(self._partitions)
        consumer = self._consumer
        if consumer is not None:
            from aiokafka import TopicPartition

            found = await consumer.end_offsets(
                [TopicPartition(self._bulk_topic, p) for p in partitions])
            ends = {tp.partition: end for tp, end in found.items()}
        else:  # between two assignments, or restarting after a failure
            from eventq.kafka.logreader import end_offsets

            found = await asyncio.to_thread(end_offsets, self._bootstrap, self._bulk_topic)
            ends = {p: high for p, (_low, high) in found.items()}
        result = []
        for partition in partitions:
            admitted = offset_of(self._processor.admitted_end(partition))
            result.append((partition, admitted, max(0, ends.get(partition, 0) - admitted)))
        return result

    # --- the loop ------------------------------------------------------------------

    async def _run(self, after: asyncio.Task | None = None) -> None:
        if after is not None:  # the admission of the last assignment ends first
            await asyncio.gather(after, return_exceptions=True)
        while True:
            try:
                await self._admit_all()
                return
            except _Restart:
                continue
            except asyncio.CancelledError:
                raise
            except Exception:  # Kafka unreachable at start, ...: try again shortly
                log.exception("bulk admission failed; starting again in %.0fs", RETRY_AFTER_S)
                await asyncio.sleep(RETRY_AFTER_S)

    async def _admit_all(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        if not self._partitions:
            return
        consumer = AIOKafkaConsumer(
            **aiokafka_options(self._bootstrap),
            group_id=self._group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # the admitted offset fell out of retention
            isolation_level="read_committed",  # a transactional pipeline's aborts: never
            max_partition_fetch_bytes=KAFKA_MESSAGE_BYTES,
            fetch_max_bytes=4 * KAFKA_MESSAGE_BYTES,
        )
        try:
            await consumer.start()
        except BaseException:  # a stop during the start: close what it opened
            await asyncio.shield(consumer.stop())
            raise
        self._consumer = consumer
        self._lanes = {p: _Lane(self._processor.admitted_end(p)) for p in self._partitions}
        self._in_flight = 0
        tasks = []
        try:
            assigned = [TopicPartition(self._bulk_topic, p) for p in self._partitions]
            consumer.assign(assigned)
            for tp in assigned:
                consumer.seek(tp, offset_of(self._lanes[tp.partition].resume))
            tasks.append(asyncio.ensure_future(self._read(consumer)))
            for partition, lane in self._lanes.items():
                tasks.append(asyncio.ensure_future(self._admit(consumer, partition, lane)))
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # raises what ended it (_Restart, a failure)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._consumer = None
            await consumer.stop()

    async def _read(self, consumer: Any) -> None:
        while True:
            fetched = await consumer.getmany(timeout_ms=1000)
            for tp, records in fetched.items():
                lane = self._lanes[tp.partition]
                for record in records:
                    read = _Read.of(record.offset, record.value, lane.resume)
                    lane.records.append(read)
                    lane.size += read.size
                if lane.size >= BULK_READ_AHEAD_BYTES:
                    consumer.pause(tp)
                lane.ready.set()

    def _shared(self) -> bool:
        """Whether workers' commands are being written: then bulk work goes in fewer,
        smaller slices, so each of their commands waits behind less of it."""
        return time.monotonic() - self._interactive_since() < INTERACTIVE_RECENT_S

    def _slots(self) -> int:
        return BULK_SLICES_IN_FLIGHT_SHARED if self._shared() else BULK_SLICES_IN_FLIGHT

    async def _take_slot(self) -> None:
        while self._in_flight >= self._slots():
            self._released.clear()
            try:
                async with asyncio.timeout(INTERACTIVE_RECENT_S):
                    await self._released.wait()
            except TimeoutError:
                pass
        self._in_flight += 1

    def _give_slot(self) -> None:
        self._in_flight -= 1
        self._released.set()

    async def _admit(self, consumer: Any, partition: int, lane: _Lane) -> None:
        from aiokafka import TopicPartition

        tp = TopicPartition(self._bulk_topic, partition)
        while True:
            while not lane.records:
                lane.ready.clear()
                await self._commit(consumer, tp, lane, force=True)
                await lane.ready.wait()
            await self._take_slot()
            try:
                source, commands, taken = self._take_slice(partition, lane, self._shared())
                if lane.size < BULK_READ_AHEAD_BYTES // 2:
                    consumer.resume(tp)
                offset = await self._send(partition, encode_slice(source, commands), source)
                await self._processor.applied(partition, offset)
            finally:
                self._give_slot()
            admitted = self._processor.admitted_end(partition)
            if admitted != source.end:
                log.warning(
                    "bulk partition %d: slice %s was not applied as admitted (admission at "
                    "%d: a second copy); reading again from there",
                    partition, source.describe(), admitted,
                )
                raise _Restart()
            self.slices += 1
            self.records += taken
            self.commands += len(commands)
            await self._commit(consumer, tp, lane)

    def _take_slice(
        self, partition: int, lane: _Lane, shared: bool
    ) -> tuple[SliceSource, list[bytes], int]:
        """The next slice from the front of the lane: commands in order while they fit
        ``BULK_SLICE_COMMANDS`` (``BULK_SLICE_COMMANDS_SHARED`` when ``shared``) and
        ``BULK_SLICE_BYTES``, at least one; a record that does not fit whole is split,
        its rest left for the next slice. Returns (range, commands, whole records)."""
        max_commands = BULK_SLICE_COMMANDS_SHARED if shared else BULK_SLICE_COMMANDS
        head = lane.records[0]
        first = position(head.offset, head.index)
        commands: list[bytes] = []
        size = 0
        taken = 0
        while lane.records:
            read = lane.records[0]
            room = max_commands - len(commands)
            fits_whole = len(read.commands) <= room and size + read.size <= BULK_SLICE_BYTES
            if fits_whole or not commands and not read.commands:
                commands.extend(read.commands)
                size += read.size
                lane.size -= read.size
                del lane.records[0]
                taken += 1
                end = position(read.offset + 1)
                continue
            part = 0  # as many of its commands as fit, one at least in an empty slice
            while part < len(read.commands) and part < room and (
                not commands and not part or size + len(read.commands[part]) <= BULK_SLICE_BYTES
            ):
                size += len(read.commands[part])
                part += 1
            if part:
                commands.extend(read.commands[:part])
                del read.commands[:part]
                read.index += part
                end = position(read.offset, read.index)
                if not read.commands:  # it was the record's last command after all
                    lane.size -= read.size
                    del lane.records[0]
                    taken += 1
                    end = position(read.offset + 1)
            break
        return SliceSource(partition, first, end), commands, taken

    async def _send(self, partition: int, value: bytes, source: SliceSource) -> int:
        """Write a slice record; Kafka errors are retried (the slice is whole, and a
        second copy is skipped when applied)."""
        while True:
            producer = self._producer()
            try:
                if producer is None:
                    raise ConnectionError("the Kafka producer is not started yet")
                metadata = await producer.send_and_wait(
                    self._commands_topic, value=value, key=None, partition=partition
                )
                return metadata.offset
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if type(error).__name__ == "MessageSizeTooLargeError" and len(value) > 64:
                    # Only a bulk record the size of the topic's limit: admit the range
                    # without it, so the lane goes on (the record stays in eventq.bulk).
                    log.error("bulk commands %s are too large for %s (%s): admitted "
                              "without them", source.describe(), self._commands_topic, error)
                    value = encode_slice(source, [])
                    continue
                log.warning("bulk partition %d: writing a slice failed (%s); retrying",
                            partition, error)
                await asyncio.sleep(RETRY_AFTER_S)

    async def _commit(self, consumer: Any, tp: Any, lane: _Lane, force: bool = False) -> None:
        """Advisory: the first bulk record not wholly admitted, as the bulk group's
        committed offset."""
        admitted = offset_of(self._processor.admitted_end(tp.partition))
        now = time.monotonic()
        if admitted <= lane.committed or (
            not force and now - lane.committed_at < BULK_COMMIT_EVERY_S
        ):
            return
        try:
            await consumer.commit({tp: admitted})
            lane.committed, lane.committed_at = admitted, now
        except asyncio.CancelledError:
            raise
        except Exception as error:  # progress reporting only: admission goes on
            log.warning("could not commit the bulk offset of %s: %s", tp, error)
