"""Group commit: commands leave for `eventq.commands` together, per partition.

ARCHITECTURE.md, "Batches": the gateway keeps one lane per partition. The first command
after an idle moment is sent at once, as a plain record; commands that arrive while a
write to that partition is in flight wait for it and leave together as the next record,
a batch (eventq/core/batch.py: at most ``MAX_BATCH_COMMANDS`` and about
``BATCH_RECORD_BYTES``). There is no linger: at low load a command waits for nothing,
at high load batches grow until one write's round trip carries everything that arrived
during the last one. Every command of a record shares its fate: the record's
acknowledgement (or error) is each command's.

Timers use the same writer, so their commands batch too. Spark writes its own batch
records (eventq/spark/rows.py).
"""

from __future__ import annotations

import asyncio
from collections import deque

from eventq.core.batch import BatchBuilder


class _Lane:
    __slots__ = ("pending", "busy")

    def __init__(self) -> None:
        self.pending: deque[tuple[bytes, bytes, asyncio.Future]] = deque()
        self.busy = False


class CommandWriter:
    def __init__(self, producer, topic: str, partitions: int) -> None:
        self._producer = producer  # an AIOKafkaProducer (acks=all, idempotent)
        self._topic = topic
        self._lanes = [_Lane() for _ in range(partitions)]
        self._tasks: set[asyncio.Task] = set()
        self.records = 0
        self.commands = 0

    def write(self, partition: int, key: bytes, data: bytes) -> asyncio.Future:
        """Queue one encoded command; the future is done when its record is in the log
        (or holds the Kafka error). Cancelling it does not unsend the command."""
        future = asyncio.get_running_loop().create_future()
        lane = self._lanes[partition]
        lane.pending.append((key, data, future))
        if not lane.busy:
            lane.busy = True
            task = asyncio.ensure_future(self._drain(partition, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return future

    async def _drain(self, partition: int, lane: _Lane) -> None:
        send = self._producer.send_and_wait
        try:
            while lane.pending:
                builder = BatchBuilder()
                futures = []
                key = None
                while lane.pending and builder.fits(lane.pending[0][1]):
                    key, data, future = lane.pending.popleft()
                    builder.add(data)
                    futures.append(future)
                count = len(futures)
                # A record of one command keeps its job's key; a batch has none (its
                # commands name their jobs, and its partition is stated).
                record_key = key if count == 1 else None
                try:
                    await send(
                        self._topic, value=builder.take(), key=record_key, partition=partition
                    )
                except Exception as error:  # KafkaError: every command of it failed
                    for future in futures:
                        if not future.done():
                            future.set_exception(error)
                    continue
                self.records += 1
                self.commands += count
                for future in futures:
                    if not future.done():
                        future.set_result(None)
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
