"""A command producer over librdkafka (confluent-kafka), writing `eventq.commands` for
the gateway, the timers and the workflows' follow-ups with ``--command-producer
librdkafka`` (docs/architecture.md, "Batches").

What it changes: aiokafka (faust's producer, the default) keeps one produce request in
flight per broker, shared by everything that producer writes (the bulk lane's admitted
slices too); librdkafka pipelines requests (up to five per connection, still in order
per partition with idempotence), in C threads that do not hold the GIL. What it costs:
``produce`` keeps the GIL for the whole call (it wakes librdkafka's broker thread, which
on busy cores may run first), and every delivery comes back through a thread. On 2
busy cores that was about 7% more server CPU per command at 16 and 64 clients (the
median of 10 interleaved pairs), with no gain in throughput or latency
(bench/gateway_bench.py --also command-producer=librdkafka): hence not the default.

One ``confluent_kafka.Producer``: idempotent, ``acks=all`` (a command is acknowledged once
every in-sync replica has it: "+OK means the command is in the log and applied"), no
linger (``linger.ms=0``: librdkafka's default is 5 ms, and the command writer's lanes
already group what waits: streams/command_writer.py), every record to an explicit
partition (the partitioner is murmur2 anyway, as every eventq producer's:
eventq/core/partitioner.py).

librdkafka reports deliveries from ``poll``, which blocks; one thread of this module
polls, and hands every report a poll served to the event loop together, in one
``call_soon_threadsafe`` (a wake-up of the loop costs a system call or two, about
0.1 ms here: research/faust-roundtrip.md).

``send_and_wait`` is what the command writer calls on aiokafka's producer, with the
same meaning: the record's partition and offset once the broker has it, or the Kafka
error as an exception (every command of the record then failed).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from functools import partial
from typing import Any, Mapping, NamedTuple

from eventq.core.partitioner import CONFLUENT_PRODUCER_PARTITIONER
from eventq.kafka.security import KafkaTarget, confluent_config
from eventq.limits import KAFKA_MESSAGE_BYTES

log = logging.getLogger(__name__)

POLL_S = 0.2  # a poll returns at once with a report; this only bounds how soon a stop is seen
# A record Kafka has not acknowledged by then fails (its issuer has heard long before:
# write_timeout_ms); longer than a leader election, shorter than a transaction's commit
# could wait for a follow-up in vain (streams/faust/transactions.py SEND_TIMEOUT_S).
DELIVERY_TIMEOUT_MS = 30_000
# The local queue full (only with tens of thousands of records waiting): a send waits
# for deliveries to make room, at this pace, for at most the delivery timeout.
QUEUE_FULL_RETRY_S = 0.005
STOP_FLUSH_TIMEOUT_S = 5.0  # a stop waits this long for what is in flight, then fails it
THREAD_NAME = "eventq-command-producer"


class Delivered(NamedTuple):
    """Where Kafka put a record (what the command writer reads of aiokafka's
    RecordMetadata)."""

    topic: str
    partition: int
    offset: int


class ProducerStopped(ConnectionError):
    """The producer was stopped (or not started): nothing was sent."""


def producer_config(bootstrap: KafkaTarget, client_id: str,
                    delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS) -> dict[str, Any]:
    """librdkafka's settings for command records (the module's docstring says why each)."""
    return {
        **confluent_config(bootstrap),
        "client.id": client_id,
        "enable.idempotence": True,  # no duplicate from a retry: a second `fail` counts twice
        "acks": "all",
        "linger.ms": 0,
        "partitioner": CONFLUENT_PRODUCER_PARTITIONER,
        # Small requests go out at once (asyncio's sockets, aiokafka's, are TCP_NODELAY too).
        "socket.nagle.disable": True,
        # eventq/limits.py: a command record may carry a 1 MiB payload and result.
        "message.max.bytes": KAFKA_MESSAGE_BYTES,
        # The server's consumer (aiokafka) has no lz4/snappy/zstd codec installed.
        "compression.type": "none",
        "delivery.timeout.ms": delivery_timeout_ms,
        "log_level": 4,  # librdkafka's warnings and errors (into eventq's log)
        "logger": logging.getLogger("eventq.kafka.librdkafka"),
    }


class CommandProducer:
    """``send_and_wait`` over librdkafka, between ``start`` and ``stop``."""

    def __init__(self, bootstrap: KafkaTarget, client_id: str = "eventq-commands",
                 delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS,
                 stop_flush_timeout_s: float = STOP_FLUSH_TIMEOUT_S,
                 overrides: Mapping[str, Any] | None = None) -> None:
        # ``overrides``: librdkafka settings over producer_config's (tests, benchmarks).
        self._config = {**producer_config(bootstrap, client_id, delivery_timeout_ms),
                        **(overrides or {})}
        self._bootstrap = bootstrap
        self._delivery_timeout_s = delivery_timeout_ms / 1000
        self._stop_flush_timeout_s = stop_flush_timeout_s
        self._producer: Any = None  # confluent_kafka.Producer while running
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stopped: asyncio.Future | None = None  # set by the poll thread as it ends
        # Reports collected by the poll thread during one poll (only it touches this).
        self._served: list[tuple[asyncio.Future, Any, Any]] = []
        self.deliveries = 0  # delivery reports handed to the loop
        self.wakeups = 0  # call_soon_threadsafe hops that carried them
        self.unacknowledged_at_stop = 0

    @property
    def running(self) -> bool:
        return self._producer is not None and not self._stopping.is_set()

    # --- life ----------------------------------------------------------------------

    async def start(self) -> None:
        """Create the producer and its poll thread. librdkafka connects in the
        background: an absent Kafka shows in the first sends' errors."""
        from confluent_kafka import Producer

        if self._producer is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        self._stopping.clear()
        self._producer = Producer({**self._config, "error_cb": self._kafka_error})
        self._thread = threading.Thread(target=self._poll_until_stopped, name=THREAD_NAME,
                                        daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """No more sends; wait up to ``stop_flush_timeout_s`` for the records in flight,
        fail those still unacknowledged then (their commands may or may not be in the
        log: their issuers hear so), and close the producer."""
        if self._producer is None or self._stopped is None:
            return
        self._stopping.set()
        await self._stopped
        self._producer = None
        self._thread = None
        log.info("command producer stopped: %d deliveries handed to the loop in %d "
                 "wake-ups", self.deliveries, self.wakeups)

    # --- sending -------------------------------------------------------------------

    async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None, *,
                            partition: int) -> Delivered:
        """Write one record to ``partition`` and wait until every in-sync replica has
        it: where it is, or the Kafka error as an exception (KafkaException)."""
        loop = asyncio.get_running_loop()
        delivered = loop.create_future()
        report = partial(self._report, delivered)
        give_up_at = loop.time() + self._delivery_timeout_s
        while True:
            producer = self._producer
            if producer is None or self._stopping.is_set():
                raise ProducerStopped("eventq is stopping: the command was not sent")
            try:
                producer.produce(topic, value, key, partition, on_delivery=report)
                break
            except BufferError:  # librdkafka's queue is full: nothing was queued
                if loop.time() > give_up_at:
                    raise BufferError(
                        "librdkafka's queue stayed full for "
                        f"{self._delivery_timeout_s:g}s (Kafka takes no records): the "
                        "command was not sent; is Kafka reachable?") from None
                await asyncio.sleep(QUEUE_FULL_RETRY_S)
        return await delivered

    def _report(self, delivered: asyncio.Future, error, message) -> None:
        """librdkafka's delivery report, in the poll thread: kept for the loop."""
        self._served.append((delivered, error, message))

    def _kafka_error(self, error) -> None:
        """librdkafka's client-wide errors, in the poll thread. It retries by itself
        after those that are not fatal (a broker that went away), and each command they
        touch fails or succeeds on its own: INFO (docs/architecture.md, "Logging")."""
        if error.fatal():
            log.error(
                "the command producer failed for good (%s): eventq can write no command "
                "until it is restarted; if it happens again, check that Kafka at %s allows "
                "idempotent writes (IDEMPOTENT_WRITE on the cluster)", error, self._bootstrap)
        else:
            log.info("command producer: %s (librdkafka retries)", error)

    # --- the poll thread ---------------------------------------------------------

    def _poll_until_stopped(self) -> None:
        producer = self._producer
        try:
            while not self._stopping.is_set():
                producer.poll(POLL_S)
                self._hand_over()
            self._flush_and_close(producer)
        finally:
            self._stopping.set()  # ended by an error too: later sends fail, never wait
            self._hand_over()
            assert self._loop is not None and self._stopped is not None
            self._call_in_loop(_set_result, self._stopped, None)

    def _flush_and_close(self, producer) -> None:
        left = producer.flush(self._stop_flush_timeout_s)
        if left:
            # Still in flight: maybe in the log, maybe not. They fail, and their issuers
            # are told it may have taken effect (streams/engine.py _not_applied).
            self.unacknowledged_at_stop = left
            log.warning(
                "stopping: %d command records not acknowledged by Kafka at %s within %gs; "
                "they may or may not be in the log (their issuers were told to check with "
                "`inspect job` before retrying)", left, self._bootstrap,
                self._stop_flush_timeout_s)
            producer.purge()
            producer.poll(0)  # serves the purged records' reports
        self._hand_over()
        producer.close()

    def _hand_over(self) -> None:
        """Every report the last poll served, to the loop in one wake-up."""
        if not self._served:
            return
        served, self._served = self._served, []
        if self._call_in_loop(self._resolve, served):
            self.wakeups += 1

    def _call_in_loop(self, function, *args) -> bool:
        try:
            self._loop.call_soon_threadsafe(function, *args)  # type: ignore[union-attr]
            return True
        except RuntimeError:  # the loop is closed: nobody waits any more
            return False

    def _resolve(self, served: list) -> None:
        from confluent_kafka import KafkaException

        self.deliveries += len(served)
        for delivered, error, message in served:
            if delivered.done():  # its sender was cancelled
                continue
            if error is not None:
                delivered.set_exception(KafkaException(error))
            else:
                delivered.set_result(
                    Delivered(message.topic(), message.partition(), message.offset()))


def _set_result(future: asyncio.Future, value) -> None:
    if not future.done():
        future.set_result(value)
