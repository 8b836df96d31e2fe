"""The changelog of one applied batch, sent in bulk through faust's own producer.

faust's ``Table.send_changelog`` costs ~37 us per record (a PendingMessage, a
FutureMessage, the producer buffer's queue, sensors, a per-record future and one more
RocksDB put of the offset on each ack: research/faust-levers.md, 2 and 3.3). The
processor instead hands all changelog records of one event to aiokafka's
``create_batch``/``send_batch`` on the producer faust itself runs (~1 us per record),
awaited inside the agent's body, before the event is acked (ARCHITECTURE.md, "The
changelog"). What keeps this as safe as faust's own path:

- **Commits wait for it.** faust flushes its producer before it commits an offset, and
  aiokafka's flush waits for every queued batch, ``send_batch`` ones included. Each
  batch is also counted in the durable buffer's ``in_flight`` (streams/durable_flush.py)
  from before it is queued until the broker acknowledges it, so that flush covers it too.
- **A failed batch is never skipped.** aiokafka retries a batch until its delivery
  timeout; if it still fails, records after it may already be in the log, so sending it
  again would reorder a job's states. Nothing is committed past it (the buffer refuses
  every later flush) and the process stops uncleanly: the next start rebuilds its state
  from `eventq.jobs` and re-applies the commands after the last commit.
- **The persisted offset** (faust's ``__faust\\x00offset__``, where a restore resumes)
  is written once per batch, after the broker's acknowledgement, and only ever after
  the records' effect is in RocksDB (it is written before the batch is sent).
"""

from __future__ import annotations

import logging
import os
import signal
from functools import partial
from typing import Callable

from faust.types import TP

from streams.durable_flush import DurableProducerBuffer

log = logging.getLogger(__name__)


def stop_process() -> None:
    """Stop this process as SIGTERM does (the stop leaves the crash marker: the buffer
    gave up, eventq/server.py)."""
    os.kill(os.getpid(), signal.SIGTERM)


class ChangelogWriter:
    def __init__(
        self, app, table, topic: str, buffer: DurableProducerBuffer,
        on_lost: Callable[[], None] = stop_process,
    ) -> None:
        self._on_lost = on_lost
        self._app = app
        self._table = table
        self._topic = topic
        self._buffer = buffer
        self.batches = 0
        self.records = 0

    def _producer(self):
        producer = self._app.producer._producer  # faust's AIOKafkaProducer
        if producer is None:
            raise RuntimeError("faust's producer is not started")
        return producer

    async def send(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Queue ``records`` (key, value or None for a tombstone) for changelog
        ``partition`` in this order. Returns once they are queued, not acknowledged."""
        producer = self._producer()
        batch = producer.create_batch()
        for key, value in records:
            if batch.append(key=key, value=value, timestamp=None) is None:
                await self._send(producer, batch, partition)
                batch = producer.create_batch()
                # The first record always fits a new batch, whatever its size.
                if batch.append(key=key, value=value, timestamp=None) is None:
                    raise RuntimeError(f"a changelog record for {key!r} fits no batch")
        await self._send(producer, batch, partition)

    async def _send(self, producer, batch, partition: int) -> None:
        count = batch.record_count()
        if not count:
            return
        batch.close()
        buffer = self._buffer
        buffer.in_flight += 1  # until the broker acknowledges it: no commit passes it
        try:
            future = await producer.send_batch(batch, self._topic, partition=partition)
        except BaseException as error:
            buffer.in_flight -= 1
            buffer.message_sent.set()
            if not isinstance(error, Exception):  # cancelled: the process is stopping
                buffer.gave_up = True
                raise
            self._lost(partition, error)
            raise
        self.batches += 1
        self.records += count
        future.add_done_callback(partial(self._acknowledged, partition, count))

    def _acknowledged(self, partition: int, count: int, future) -> None:
        buffer = self._buffer
        buffer.in_flight -= 1
        buffer.message_sent.set()
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            self._lost(partition, error)
            return
        metadata = future.result()
        if metadata is not None:
            self._table.data.set_persisted_offset(
                TP(self._topic, partition), metadata.offset + count - 1
            )

    def _lost(self, partition: int, error: BaseException | None) -> None:
        if self._buffer.lost is None:
            log.critical(
                "changelog records for %s[%d] could not be written (%s: %s): no offset "
                "will be committed past them; stopping, and the next start rebuilds "
                "state from the log",
                self._topic, partition, type(error).__name__, error,
            )
        self._buffer.lost = error or RuntimeError("cancelled")
        self._buffer.gave_up = True
        self._on_lost()
