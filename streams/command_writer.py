"""Group commit: commands leave for `eventq.commands` together, per partition.

docs/architecture.md, "Batches": the gateway keeps one lane per partition. The first command
after an idle moment is sent at once, as a plain record; commands that arrive while a
write to that partition is in flight wait for it and leave together as the next record,
a batch (eventq/core/batch.py: at most ``MAX_BATCH_COMMANDS`` and about
``BATCH_RECORD_BYTES``). There is no linger: at low load a command waits for nothing,
at high load batches grow until one record carries everything that arrived while the
last one was written and applied. Every command of a record shares its fate: the record's
acknowledgement (or error) is each command's.

Timers use the same writer, so their commands batch too. Spark writes its own batch
records (eventq/spark/rows.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Awaitable, Callable, Protocol

from eventq.core.batch import BatchBuilder, position


class Written(Protocol):
    """Where Kafka put a record (what is read of aiokafka's RecordMetadata)."""

    @property
    def offset(self) -> int: ...


class RecordProducer(Protocol):
    """What is used of faust's AIOKafkaProducer (acks=all, idempotent): its
    ``send_and_wait`` gives the record's place in the log, or raises the Kafka error."""

    async def send_and_wait(self, topic: str, value: bytes | None = None,
                            key: bytes | None = None,
                            partition: int | None = None) -> Written: ...


class _Lane:
    __slots__ = ("pending", "busy")

    def __init__(self) -> None:
        self.pending: deque[tuple[bytes, bytes, asyncio.Future[int]]] = deque()
        self.busy = False


APPLY_WAIT_S = 1.0  # a lane waits at most this for its last record to be applied


async def _applied_at_once(partition: int, offset: int) -> None:
    return None


class CommandWriter:
    def __init__(
        self,
        producer: Callable[[], RecordProducer | None],
        topic: str,
        partitions: int,
        applied: Callable[[int, int], Awaitable[None]] = _applied_at_once,
    ) -> None:
        # Returns the producer to write with (acks=all, idempotent: its send_and_wait
        # gives the record's offset or raises the Kafka error), or None while it is not
        # started: faust's AIOKafkaProducer (docs/architecture.md, "Batches").
        self._producer = producer
        # Resolves once this process's processor has applied the record at (partition,
        # offset), or at once when it does not own the partition (see _drain).
        self._applied = applied
        self._topic = topic
        self._lanes = [_Lane() for _ in range(partitions)]
        self._tasks: set[asyncio.Task[None]] = set()
        self.records = 0
        self.commands = 0
        self.last_write_at = 0.0  # time.monotonic() of the last command queued

    def write(self, partition: int, key: bytes, data: bytes) -> asyncio.Future[int]:
        """Queue one encoded command; the future is done when its record is in the log,
        with the command's position there (eventq/core/batch.py), or holds the Kafka
        error. Cancelled before its record leaves, the command is not sent; after that,
        cancelling does not unsend it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self.last_write_at = time.monotonic()
        lane = self._lanes[partition]
        lane.pending.append((key, data, future))
        if not lane.busy:
            lane.busy = True
            task = asyncio.ensure_future(self._drain(partition, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return future

    def withdraw(self, partition: int, future: asyncio.Future[int]) -> bool:
        """Take a command back if it has not left its lane: True if it never will (its
        future is then cancelled), False if it is already on its way to Kafka."""
        lane = self._lanes[partition]
        for entry in lane.pending:
            if entry[2] is future:
                lane.pending.remove(entry)
                future.cancel()
                return True
        return False

    async def _drain(self, partition: int, lane: _Lane) -> None:
        try:
            while lane.pending:
                builder = BatchBuilder()
                futures = []
                keys = []
                while lane.pending and builder.fits(lane.pending[0][1]):
                    key, data, future = lane.pending.popleft()
                    if future.done():  # its issuer gave up waiting (told "may still be
                        continue  # applied"): a command nobody waits for is not sent late
                    builder.add(data)
                    futures.append(future)
                    keys.append(key)
                count = len(futures)
                if not count:
                    continue
                # A record of one command keeps its job's key; a batch has none (its
                # commands name their jobs, and its partition is stated).
                record_key = keys[0] if count == 1 else None
                try:
                    producer = self._producer()
                    if producer is None:
                        raise ConnectionError("the Kafka producer is not started yet")
                    metadata = await producer.send_and_wait(
                        self._topic, value=builder.take(), key=record_key, partition=partition
                    )
                except Exception as error:  # KafkaError: every command of it failed
                    for future in futures:
                        if not future.done():
                            future.set_exception(error)
                    continue
                self.records += 1
                self.commands += count
                for index, future in enumerate(futures):
                    if not future.done():
                        future.set_result(position(metadata.offset, index))
                # The lane stays busy until the record is applied, not only written:
                # its commands wait for that anyway, and what arrives meanwhile leaves
                # as one record, so batches grow with the processor's backlog, not just
                # with Kafka's round trip (measured at 64 clients: 1.5-2 commands per
                # record when a lane waited for the write only). Bounded, so a slow
                # processor never holds the writes of a partition for long.
                if lane.pending:
                    try:
                        async with asyncio.timeout(APPLY_WAIT_S):
                            await self._applied(partition, metadata.offset)
                    except TimeoutError:
                        pass
        finally:
            lane.busy = False
            # Cancelled while stopping: whoever still waits learns it now.
            while lane.pending:
                _, _, future = lane.pending.popleft()
                if not future.done():
                    future.set_exception(ConnectionError("eventq is stopping"))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
