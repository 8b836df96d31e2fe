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
aiokafka, which waits for the broker's acknowledgements. While the process runs it
waits as long as Kafka is away (no offset may be committed meanwhile, and the server
heals when Kafka returns); once the process is stopping it gives up after
``STOP_FLUSH_TIMEOUT_S`` and says so (``gave_up``), so the caller leaves the crash
marker and the next start rebuilds its state from the log.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import faust
from faust.transport.producer import ProducerBuffer
from faust.types import FutureMessage
from mode import Service

STOP_FLUSH_TIMEOUT_S = 10.0  # when stopping, give up on a Kafka that takes no records
WARN_EVERY_S = 30.0
RETRY_FIRST_S = 0.1  # a record the producer refused is offered again after this ...
RETRY_MAX_S = 5.0  # ... doubling up to this


class DurableProducerBuffer(ProducerBuffer):
    in_flight: int = 0
    stopping: bool = False  # set when the process begins to stop
    gave_up: bool = False  # a flush while stopping left records unwritten
    retried: int = 0  # records the producer refused at first (then offered again)
    # A changelog batch Kafka finally refused (streams/faust/transactions.py): nothing may be
    # committed any more in this run.
    lost: BaseException | None = None

    @Service.task
    async def _handle_pending(self) -> None:
        get_pending = self.pending.get
        send_pending = self._send_pending
        while not self.should_stop:
            message = await get_pending()
            self.in_flight += 1  # same step as the get: flush can never miss it
            try:
                await self._send_until_taken(send_pending, message)
            finally:
                self.in_flight -= 1
                self.message_sent.set()

    async def _send_until_taken(self, send_pending: Callable[[FutureMessage], Awaitable[None]],
                                message: FutureMessage) -> None:
        """Hand one record to the producer, retrying until it takes it.

        faust's own loop let the first error end this task, which crashed the worker
        (seen with a record over the producer's max_request_size) and, since the command
        is read again after a restart, every later start too. A record is never dropped
        (a commit must not pass it): it is offered again with a growing pause, while the
        record stays counted in flight, so no offset is committed past it meanwhile. Size
        errors cannot reach here any more (eventq/limits.py, the processor's check and
        `eventq serve`'s topic check); what remains is Kafka being away."""
        delay_s = RETRY_FIRST_S
        while True:
            try:
                await send_pending(message)
                return
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.retried += 1
                self.log.error(
                    "a changelog record could not be handed to Kafka (%s: %s); retrying "
                    "in %.1fs, and no offset is committed past it",
                    type(error).__name__, error, delay_s,
                )
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, RETRY_MAX_S)

    async def flush(self) -> None:
        waited_s = 0.0
        self._check_lost()
        while self.size or self.in_flight:
            if self.state != "running":
                raise RuntimeError("Cannot flush: producer buffer is not running")
            if self.stopping and waited_s >= STOP_FLUSH_TIMEOUT_S:
                self.gave_up = True
                raise RuntimeError(
                    f"stopping with {self.size + self.in_flight} changelog records unwritten "
                    "(Kafka takes none); the next start rebuilds state from the log"
                )
            self.message_sent.clear()
            step_s = 1.0 if self.stopping else WARN_EVERY_S
            try:
                await asyncio.wait_for(self.message_sent.wait(), step_s)
                waited_s = 0.0
                self._check_lost()
            except asyncio.TimeoutError:
                waited_s += step_s
                if not self.stopping:
                    self.log.warning(
                        "changelog records waiting for Kafka for %.0fs (%d buffered)",
                        waited_s, self.size + self.in_flight,
                    )


    def _check_lost(self) -> None:
        if self.lost is not None:
            self.gave_up = True
            raise RuntimeError(
                f"changelog records were lost ({type(self.lost).__name__}: {self.lost}); "
                "no offset is committed in this run"
            )


def install(app: faust.App) -> DurableProducerBuffer:
    """Give the app's producer a durable buffer (before the app starts)."""
    producer = app.producer
    # faust's ProducerBuffer: its ProducerBufferT declares neither app nor
    # threaded_producer, hence Any.
    old: Any = producer.buffer
    buffer = DurableProducerBuffer(loop=producer.loop, beacon=producer.beacon)
    buffer.app = old.app
    buffer.threaded_producer = getattr(old, "threaded_producer", None)
    producer.buffer = buffer
    return buffer
