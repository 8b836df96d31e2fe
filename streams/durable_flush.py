"""A faust producer buffer whose ``flush`` really waits for every buffered record.

faust (at-least-once) flushes its producer before committing consumer offsets, so a
committed offset should never pass a changelog write that is not in Kafka. But
faust-streaming 0.15.3's ``ProducerBuffer.flush`` gives up as soon as one message takes
longer than 0.1 s to leave the buffer (``wait_for(message_sent.wait(), timeout=0.1)``
then ``return``), and it does not wait for the record its sender task has already taken
off the queue. Under load the commit then covers commands whose `eventq.jobs` record was
never written; after a ``kill -9`` those acknowledged commands are lost (seen in
tests/e2e/test_outage_and_restart.py: a complete at command offset 107 was acknowledged,
the consumer offset was committed past it, and `eventq.jobs` had no record of it).

This buffer counts the record in flight and ``flush`` returns only when the queue is
empty and nothing is in flight. The caller (faust's producer ``flush``) then flushes
aiokafka, which waits for the broker's acknowledgements.
"""

from __future__ import annotations

import asyncio

from faust.transport.producer import ProducerBuffer
from mode import Service

FLUSH_PROGRESS_TIMEOUT_S = 60.0  # no record left the buffer for this long: give up loudly


class DurableProducerBuffer(ProducerBuffer):
    in_flight: int = 0

    @Service.task
    async def _handle_pending(self) -> None:
        get_pending = self.pending.get
        send_pending = self._send_pending
        while not self.should_stop:
            message = await get_pending()
            self.in_flight += 1  # same step as the get: flush can never miss it
            try:
                await send_pending(message)
            finally:
                self.in_flight -= 1
                self.message_sent.set()

    async def flush(self) -> None:
        while self.size or self.in_flight:
            if self.state != "running":
                raise RuntimeError("Cannot flush: producer buffer is not running")
            self.message_sent.clear()
            try:
                await asyncio.wait_for(self.message_sent.wait(), FLUSH_PROGRESS_TIMEOUT_S)
            except asyncio.TimeoutError:
                raise RuntimeError(
                    f"changelog records made no progress for {FLUSH_PROGRESS_TIMEOUT_S:g}s"
                ) from None


def install(app) -> None:
    """Give the app's producer a durable buffer (before the app starts)."""
    producer = app.producer
    old = producer.buffer
    buffer = DurableProducerBuffer(loop=producer.loop, beacon=producer.beacon)
    buffer.app = old.app
    buffer.threaded_producer = getattr(old, "threaded_producer", None)
    producer.buffer = buffer
