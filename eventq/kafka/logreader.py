"""Read a topic from the beginning to its current end, partition by partition.

Used by replay, digests, export and tests: `eventq.jobs` (latest record per key,
tombstones remove) and `eventq.commands` (every command, in offset order per
partition). Undecodable records are counted and reported with topic/partition/offset,
never fatal.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator

from eventq.core import CodecError, Job, decode_state
from eventq.limits import KAFKA_MESSAGE_BYTES

log = logging.getLogger(__name__)

BATCH_MESSAGES = 10_000
POLL_TIMEOUT_S = 1.0
Progress = Callable[[int, int], None]  # (records read, records in total)


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


@dataclass
class Undecodable:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def note(self, record: Record, error: Exception) -> None:
        self.count += 1
        where = f"{record.topic}[{record.partition}]@{record.offset}"
        log.error("undecodable record at %s: %s (skipped)", where, error)
        if len(self.examples) < 20:
            self.examples.append(f"{where}: {error}")


def reader_consumer(bootstrap: str, purpose: str = "reader"):
    """A consumer that reads whole topics fast and commits nothing (its group is
    throwaway: the partitions are assigned, never subscribed)."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eventq-{purpose}-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 4 * KAFKA_MESSAGE_BYTES,  # several records of the largest size
            "queued.max.messages.kbytes": 256 * 1024,
        }
    )


def end_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)} watermarks now."""
    from confluent_kafka import TopicPartition

    consumer = reader_consumer(bootstrap)
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            raise LookupError(f"topic {topic} does not exist")
        partitions = sorted(metadata.topics[topic].partitions)
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            for p in partitions
        }
    finally:
        consumer.close()


def read_topic(
    bootstrap: str,
    topic: str,
    progress: Progress | None = None,
    start: dict[int, int] | None = None,
) -> Iterator[Record]:
    """Every record from the beginning (or from ``start``: {partition: offset}) up to
    the end as of the call, per partition in offset order (partitions interleave)."""
    from confluent_kafka import TopicPartition

    ends = end_offsets(bootstrap, topic)
    first = {p: max(low, (start or {}).get(p, low)) for p, (low, high) in ends.items()}
    remaining = {p: high for p, (low, high) in ends.items() if high > first[p]}
    total = sum(high - first[p] for p, (low, high) in ends.items() if high > first[p])
    if not remaining:
        return
    consumer = reader_consumer(bootstrap)
    consumer.assign([TopicPartition(topic, p, first[p]) for p in remaining])
    done = 0
    last_report = 0.0
    try:
        while remaining:
            for message in consumer.consume(BATCH_MESSAGES, POLL_TIMEOUT_S):
                if message.error():
                    raise RuntimeError(f"reading {topic}: {message.error()}")
                partition, offset = message.partition(), message.offset()
                high = remaining.get(partition)
                if high is None or offset >= high:
                    continue
                done += 1
                yield Record(
                    topic, partition, offset, message.timestamp()[1],
                    message.key(), message.value(),
                )
                if offset + 1 >= high:
                    del remaining[partition]
            if progress is not None and time.monotonic() - last_report > 0.2:
                progress(done, total)
                last_report = time.monotonic()
        if progress is not None:
            progress(done, total)
    finally:
        consumer.close()


META_KEY_PREFIX = b"\x00"  # table keys that are not jobs (streams/store.py)


def latest_jobs(
    bootstrap: str, topic: str, progress: Progress | None = None
) -> tuple[dict[uuid.UUID, Job], Undecodable]:
    """The live jobs of the state log: newest record per key, tombstones remove."""
    newest: dict[bytes, Record] = {}
    for record in read_topic(bootstrap, topic, progress):
        if record.key is None or record.key.startswith(META_KEY_PREFIX):
            continue
        if record.value is None:
            newest.pop(record.key, None)
        else:
            newest[record.key] = record
    jobs: dict[uuid.UUID, Job] = {}
    bad = Undecodable()
    for record in newest.values():
        try:
            _, job = decode_state(record.value)  # type: ignore[arg-type]
        except CodecError as error:
            bad.note(record, error)
            continue
        if job is not None:
            jobs[job.id] = job
    return jobs, bad


def committed_offsets(
    admin, group: str, topic: str, partitions, timeout_s: float
) -> dict[int, int]:
    """{partition: next offset the group will process} as committed, -1 where nothing
    is. Raises confluent_kafka.KafkaException when Kafka does not answer."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    future = admin.list_consumer_group_offsets(
        [request], request_timeout=timeout_s
    )[group]
    answer = future.result(timeout=timeout_s + 5)
    committed = {p: -1 for p in partitions}
    committed.update(
        {tp.partition: max(tp.offset, -1) for tp in answer.topic_partitions}
    )
    return committed


@dataclass(frozen=True)
class CatchUp:
    targets: dict[int, int]  # partition -> last offset to apply before serving
    uncommitted: dict[int, int]  # partition -> first offset, for partitions never committed
    starts: dict[int, int]  # partition -> first offset to apply, for partitions with a target


def catch_up_targets(
    bootstrap: str, group: str, topic: str, partitions: list[int]
) -> CatchUp:
    """Where each owned partition's processing must resume and reach before serving.

    After a restart the uncommitted tail must be applied again before the state may be
    read (otherwise an acknowledged write looks missing for a moment). Partitions with
    no committed offset at all must be read from their first offset."""
    from confluent_kafka.admin import AdminClient

    ends = end_offsets(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    committed = committed_offsets(admin, group, topic, partitions, timeout_s=30)
    targets, uncommitted, starts = {}, {}, {}
    for partition in partitions:
        low, high = ends.get(partition, (0, 0))
        position = committed.get(partition, -1)
        if position < 0:  # nothing committed: the agent must start at the beginning
            position = uncommitted[partition] = low
        if position < high:
            targets[partition] = high - 1
            starts[partition] = position
    return CatchUp(targets, uncommitted, starts)
