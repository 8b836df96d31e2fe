"""The Kafka side of migration: publish commands, and watch the server apply them.

* ``Publisher``: confluent-kafka's ``Producer`` with ``partitioner=murmur2_random`` (the
  partitioner every eventq producer must agree on), the partition also given
  explicitly, ``acks=all`` and ``enable.idempotence=true``; delivery callbacks count
  successes and failures and keep each delivered command's partition, offset and
  broker timestamp (the topic uses LogAppendTime, so that is the time the processor
  decides at).
* How far the server has admitted the bulk topic: ``eventq.kafka.bulklane`` (committed
  only once applied, so its effect, if any, is in the state log by then).
* ``StateLogTail``: reads the state log (``eventq.jobs``) incrementally from the start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventq.kafka.logreader import (
    META_KEY_PREFIX,
    reader_consumer,
    watermarks,
)
from eventq.kafka.security import KafkaTarget, confluent_config
from eventq.kafka.topics import partition_count
from eventq.limits import KAFKA_MESSAGE_BYTES

if TYPE_CHECKING:  # only named: confluent_kafka is imported where it is used
    from confluent_kafka import KafkaError, Message
    from confluent_kafka.admin import AdminClient

# The commands topic allows records up to 2 MiB (eventq/kafka/topics.py).
MAX_MESSAGE_BYTES = KAFKA_MESSAGE_BYTES  # eventq/limits.py: an import carries payload and result
METADATA_TIMEOUT_S = 15.0
MAX_FAILURE_EXAMPLES = 20


class KafkaUnavailable(RuntimeError):
    """Kafka cannot be reached, or a topic the command needs is missing."""


def _admin(bootstrap: KafkaTarget) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient(confluent_config(bootstrap, {"log_level": 0}))


def topic_partitions(bootstrap: KafkaTarget, topics: Iterable[str]) -> dict[str, int]:
    """{topic: partition count}; ``KafkaUnavailable`` if Kafka does not answer or a
    topic does not exist (listing all topics never auto-creates one)."""
    from confluent_kafka import KafkaException

    try:
        metadata = _admin(bootstrap).list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as error:
        raise KafkaUnavailable(
            f"cannot reach Kafka at {bootstrap}: {error}. Is Kafka running "
            "(eventq kafka start), or is --bootstrap right?"
        ) from None
    found = {}
    for name in topics:
        partitions = partition_count(metadata, name)
        if partitions is None:
            raise KafkaUnavailable(
                f"topic {name} does not exist on {bootstrap}. Create eventq's topics with "
                "`eventq topics create` (with the same --commands-topic/--jobs-topic/"
                "--partitions as the server), or pass the topic names the server uses."
            )
        found[name] = partitions
    return found


@dataclass
class Delivery:
    partition: int
    offset: int
    timestamp_ms: int


@dataclass
class PublishResult:
    published: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (key, reason)
    failed_keys: set[bytes] = field(default_factory=set)
    deliveries: dict[bytes, Delivery] = field(default_factory=dict)
    seconds: float = 0.0


class Publisher:
    """Produces keyed records to one topic and counts what Kafka acknowledged."""

    def __init__(self, bootstrap: KafkaTarget, topic: str, *, keep_deliveries: bool = True) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.keep_deliveries = keep_deliveries
        self.result = PublishResult()
        self.producer = Producer(
            {
                **confluent_config(bootstrap),
                "partitioner": "murmur2_random",  # Java's murmur2, as every eventq producer
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 20,
                "batch.size": 1_000_000,
                # No compression: the server's consumer (aiokafka) has no lz4/snappy/zstd
                # codec installed and cannot read such batches.
                "compression.type": "none",
                "message.max.bytes": MAX_MESSAGE_BYTES,
                "queue.buffering.max.messages": 200_000,
                "queue.buffering.max.kbytes": 512 * 1024,
                "delivery.timeout.ms": 120_000,
                "on_delivery": self._delivered,
                "log_level": 3,
            }
        )

    def _fail(self, key: bytes, reason: str) -> None:
        r = self.result
        r.failed += 1
        r.failed_keys.add(key)
        if len(r.failures) < MAX_FAILURE_EXAMPLES:
            r.failures.append((key.decode(errors="replace"), reason))

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        key = message.key()
        assert isinstance(key, bytes), key  # every record is produced with its job's key
        if error is not None:
            self._fail(key, str(error))
            return
        self.result.published += 1
        if self.keep_deliveries:
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None  # a delivered record's
            self.result.deliveries[key] = Delivery(partition, offset, message.timestamp()[1])

    def publish(
        self,
        records: Iterable[tuple[bytes, int, bytes]],
        progress: Callable[[int, int], None] | None = None,
    ) -> PublishResult:
        """Produce ``(key, partition, value)`` records, then flush; ``progress(acked,
        produced)`` is called as deliveries come back."""
        from confluent_kafka import KafkaException

        began = time.monotonic()
        producer, topic = self.producer, self.topic
        produced = 0
        for key, partition, value in records:
            while True:
                try:
                    producer.produce(topic, value, key, partition)
                    produced += 1
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    producer.poll(0.05)
                    if progress is not None:
                        progress(self.result.published + self.result.failed, produced)
                except KafkaException as error:  # e.g. a record over the size limit
                    self._fail(key, str(error.args[0]) if error.args else str(error))
                    break
            if produced % 2048 == 0:
                producer.poll(0)
                if progress is not None:
                    progress(self.result.published + self.result.failed, produced)
        while len(producer) > 0:
            producer.flush(0.2)
            if progress is not None:
                progress(self.result.published + self.result.failed, produced)
        self.result.seconds = time.monotonic() - began
        return self.result


class StateLogTail:
    """Reads a state-log topic from the beginning, a little more on every ``read``.

    Only records whose key is in ``keys`` are passed to ``on_record(key, value)``
    (value None is a tombstone), in offset order per partition.
    """

    def __init__(self, bootstrap: KafkaTarget, topic: str, partitions: int) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.topic = topic
        self.partitions = partitions
        self.consumer = reader_consumer(bootstrap, "import-watch")
        self.consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        self.position = {p: 0 for p in range(partitions)}
        self.records = 0

    def ends(self) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        return {
            p: watermarks(self.consumer, TopicPartition(self.topic, p))[1]
            for p in range(self.partitions)
        }

    def read_to_end(
        self, keys: set[bytes] | dict, on_record: Callable[[bytes, bytes | None], None],
        timeout_s: float = 30.0,
    ) -> bool:
        """Read up to the end offsets as of now; False if that took over ``timeout_s``."""
        ends = self.ends()
        deadline = time.monotonic() + timeout_s
        while any(self.position[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                return False
            for message in self.consumer.consume(10_000, 0.5):
                if message.error():
                    continue  # transient (e.g. partition EOF); the position check decides
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None  # a consumed message's
                self.position[partition] = offset + 1
                self.records += 1
                key = message.key()
                if key is None or key.startswith(META_KEY_PREFIX) or key not in keys:
                    continue
                on_record(key, message.value())
            self._advance_past_markers()
        return True

    def _advance_past_markers(self) -> None:
        """The consumer's own position: past the transaction markers that end the
        state log's partitions (streams/faust/transactions.py), which are never delivered."""
        from confluent_kafka import TopicPartition

        asked = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        for tp in self.consumer.position(asked):
            if tp.offset > self.position.get(tp.partition, 0):
                self.position[tp.partition] = tp.offset

    def close(self) -> None:
        self.consumer.close()
