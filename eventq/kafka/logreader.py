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
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from eventq.core import CodecError, Input, Job, decode_input, decode_state, state_digest
from eventq.core.digest import input_entries
from eventq.core.recurrence import RECURRENCE_TABLE_PREFIX, recurrence_name_of
from eventq.core.workflow import INPUT_KEY_PREFIX, input_ids
from eventq.kafka.security import KafkaTarget, confluent_config
from eventq.limits import KAFKA_MESSAGE_BYTES

if TYPE_CHECKING:  # confluent_kafka is imported where it is used
    from confluent_kafka import Consumer, Message, TopicPartition
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

BATCH_MESSAGES = 50_000
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


def record_of(topic: str, message: Message) -> Record:
    """A consumed message as a Record (confluent-kafka types partition and offset
    Optional, for messages made by hand; a consumed one has both)."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None
    return Record(topic, partition, offset, message.timestamp()[1], message.key(),
                  message.value())


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


def reader_consumer(bootstrap: KafkaTarget, purpose: str = "reader") -> Consumer:
    """A consumer that reads whole topics fast and commits nothing (its group is
    throwaway: the partitions are assigned, never subscribed). It reads committed
    records only: `eventq.jobs` is written in transactions, and an aborted one was
    written by a process that no longer owned its partition (docs/fencing.md, "The three
    fences"); its watermarks' high end is then the last stable offset."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            **confluent_config(bootstrap),
            "group.id": f"eventq-{purpose}-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 4 * KAFKA_MESSAGE_BYTES,  # several records of the largest size
            "queued.max.messages.kbytes": 256 * 1024,
            "isolation.level": "read_committed",  # librdkafka's default, stated
        }
    )


WATERMARK_TIMEOUT_S = 30.0
WATERMARK_RETRY_S = 0.2


def end_offsets(bootstrap: KafkaTarget, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)} watermarks now."""
    from confluent_kafka import TopicPartition

    consumer = reader_consumer(bootstrap)
    try:
        metadata = consumer.list_topics(topic, timeout=WATERMARK_TIMEOUT_S)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            raise LookupError(f"topic {topic} does not exist")
        partitions = sorted(metadata.topics[topic].partitions)
        return {p: watermarks(consumer, TopicPartition(topic, p)) for p in partitions}
    finally:
        consumer.close()


def watermarks(consumer: Consumer, partition: TopicPartition) -> tuple[int, int]:
    """A partition's (low, high) watermarks, asked again while its leader is moving: a
    broker that just became leader answers OFFSET_NOT_AVAILABLE ("Leader high watermark
    is not caught up") until its followers report in (seen right after a broker was
    killed, in a CI run)."""
    from confluent_kafka import KafkaError, KafkaException

    transient = {
        KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._TRANSPORT,
        KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT,
        # A broker that died and left the metadata while the request waited on it.
        KafkaError._DESTROY_BROKER,
    }
    deadline = time.monotonic() + WATERMARK_TIMEOUT_S
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=WATERMARK_TIMEOUT_S)
        except KafkaException as error:
            if error.args[0].code() not in transient or time.monotonic() > deadline:
                raise
            time.sleep(WATERMARK_RETRY_S)


def read_batches(
    bootstrap: KafkaTarget,
    topic: str,
    progress: Progress | None = None,
    start: dict[int, int] | None = None,
    partitions: Iterable[int] | None = None,
    ends: dict[int, tuple[int, int]] | None = None,
    stall_s: float | None = None,
) -> Iterator[list[Message]]:
    """Every record from the beginning (or from ``start``: {partition: offset}) up to
    the end as of the call, as lists of confluent-kafka ``Message`` objects of up to
    ``BATCH_MESSAGES``, per partition in offset order (partitions interleave).

    The fast path of replay, restore and digest (docs/architecture.md, "Memory and
    restores"): records come as the client returns them, no object per record, and a reader
    that only copies them never decodes them. ``ends`` ({partition: (low, high)}, from
    ``end_offsets``) fixes where the read stops, for a caller that records it.
    ``stall_s``: raise ReadStalled once that long passes with no record and no
    partition reaching its end (a broker with a stale view can keep a read short of
    an end another broker gave: docs/fencing.md, "Taking a partition")."""
    from confluent_kafka import TopicPartition

    ends = end_offsets(bootstrap, topic) if ends is None else ends
    if partitions is not None:
        wanted = set(partitions)
        ends = {p: span for p, span in ends.items() if p in wanted}
    first = {p: max(low, (start or {}).get(p, low)) for p, (low, high) in ends.items()}
    remaining = {p: high for p, (low, high) in ends.items() if high > first[p]}
    total = sum(high - first[p] for p, high in remaining.items())
    if not remaining:
        if progress is not None:
            progress(0, 0)
        return
    consumer = reader_consumer(bootstrap)
    consumer.assign([TopicPartition(topic, p, first[p]) for p in remaining])
    done = 0
    last_report = 0.0
    moved = time.monotonic()
    try:
        while remaining:
            batch = []
            for message in consumer.consume(BATCH_MESSAGES, POLL_TIMEOUT_S):
                if message.error():
                    raise RuntimeError(f"reading {topic}: {message.error()}")
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None  # a consumed message's
                high = remaining.get(partition)
                if high is None:
                    continue
                if offset >= high:
                    continue
                batch.append(message)
                if offset + 1 >= high:
                    del remaining[partition]
            left = len(remaining)
            if batch:
                done += len(batch)
                yield batch
            _drop_read_to_end(consumer, topic, remaining)
            if batch or len(remaining) < left:
                moved = time.monotonic()
            elif stall_s is not None and time.monotonic() - moved > stall_s:
                raise ReadStalled(f"reading {topic}: nothing more for {stall_s:.0f}s, "
                                  f"short of the end of {sorted(remaining)}")
            if progress is not None and time.monotonic() - last_report > 0.2:
                progress(done, total)
                last_report = time.monotonic()
        if progress is not None:
            progress(done, total)
    finally:
        consumer.close()


class ReadStalled(Exception):
    """A read to a partition's end stopped getting nearer it."""


def _drop_read_to_end(consumer: Consumer, topic: str, remaining: dict[int, int]) -> None:
    """Forget the partitions whose read position reached their end. The last offsets of
    a transactional topic (`eventq.jobs`: streams/faust/transactions.py) are commit and abort
    markers, and an aborted transaction's records are never delivered (the reader is
    read_committed), so the end is where the position stands, not the offset of a
    record delivered."""
    from confluent_kafka import TopicPartition

    if not remaining:
        return
    asked = [TopicPartition(topic, p) for p in remaining]
    for tp in consumer.position(asked):
        if tp.offset >= 0 and tp.offset >= remaining.get(tp.partition, tp.offset + 1):
            del remaining[tp.partition]


def read_topic(
    bootstrap: KafkaTarget,
    topic: str,
    progress: Progress | None = None,
    start: dict[int, int] | None = None,
) -> Iterator[Record]:
    """``read_batches`` one ``Record`` at a time (for readers that decode each)."""
    for batch in read_batches(bootstrap, topic, progress, start):
        for message in batch:
            yield record_of(topic, message)


META_KEY_PREFIX = b"\x00"  # table keys that are not jobs (eventq/state/jobs_table.py)


def latest_jobs(
    bootstrap: KafkaTarget, topic: str, progress: Progress | None = None
) -> tuple[dict[uuid.UUID, Job], Undecodable]:
    """The live jobs of the state log: newest record per key, tombstones remove."""
    state = latest_state(bootstrap, topic, progress)
    return state.jobs, state.undecodable


@dataclass
class LoggedState:
    """The live jobs of a state log and the workflows' inputs beside them
    (docs/workflows.md, "Inputs": (dependent, upstream) -> what it handed on)."""

    jobs: dict[uuid.UUID, Job] = field(default_factory=dict)
    inputs: dict[tuple[uuid.UUID, uuid.UUID], Input] = field(default_factory=dict)
    undecodable: Undecodable = field(default_factory=Undecodable)
    # [eventq] The names of the live recurrences (docs/workflows.md, "Recurring jobs"): not state
    # the digest covers (docs/architecture.md, "Recurring jobs"), but
    # what an export must say it leaves behind.
    recurrences: list[str] = field(default_factory=list)

    def digest(self) -> str:
        """The state digest of jobs and inputs, as ``inspect digest`` computes it."""
        return state_digest(self.jobs.values(), input_entries(self.inputs))


def latest_state(bootstrap: KafkaTarget, topic: str, progress: Progress | None = None) -> LoggedState:
    """The state log's newest record per key (tombstones remove): its live jobs and
    inputs. The other records beside the jobs (registrations, pauses, watermarks) are
    passed over."""
    newest: dict[bytes, Message] = {}  # key -> its newest Message
    for batch in read_batches(bootstrap, topic, progress):
        for message in batch:
            key = message.key()
            if key is None or (key.startswith(META_KEY_PREFIX)
                               and not key.startswith(INPUT_KEY_PREFIX)
                               and not key.startswith(RECURRENCE_TABLE_PREFIX)):
                continue
            if message.value() is None:
                newest.pop(key, None)
            else:
                newest[key] = message
    state = LoggedState()
    for key, message in newest.items():
        if key.startswith(RECURRENCE_TABLE_PREFIX):
            state.recurrences.append(recurrence_name_of(key))
            continue
        value = message.value()
        assert value is not None  # tombstones were dropped above
        try:
            if key.startswith(INPUT_KEY_PREFIX):
                state.inputs[input_ids(key)] = decode_input(value)
                continue
            _, job = decode_state(value)
        except (CodecError, ValueError) as error:
            state.undecodable.note(record_of(topic, message), error)
            continue
        if job is not None:
            state.jobs[job.id] = job
    state.recurrences.sort(key=str.encode)
    return state


def committed_offsets(
    admin: AdminClient, group: str, topic: str, partitions: Sequence[int], timeout_s: float
) -> dict[int, int]:
    """{partition: next offset the group will process} as committed, -1 where nothing
    is. Raises confluent_kafka.KafkaException when Kafka does not answer. (Not their
    metadata: confluent-kafka 2.16.1 decodes it past its end, eventq/kafka/committed.py.)"""
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
    positions: dict[int, int]  # partition -> the offset it resumes reading at

    @property
    def starts(self) -> dict[int, int]:
        """Partitions with a target: the first offset to apply."""
        return {p: self.positions[p] for p in self.targets}


def catch_up_targets(
    bootstrap: KafkaTarget, group: str, topic: str, partitions: list[int],
    committed: dict[int, int] | None = None,
) -> CatchUp:
    """Where each owned partition's processing must resume and reach before serving.

    After a restart the uncommitted tail must be applied again before the state may be
    read (otherwise an acknowledged write looks missing for a moment). Partitions with
    no committed offset at all must be read from their first offset. ``committed``
    ({partition: offset}, -1 for none): the positions the partitions' tables were
    recovered for (streams/faust/ownership.py); asked of the group coordinator if not given."""
    from confluent_kafka.admin import AdminClient

    ends = end_offsets(bootstrap, topic)
    known = committed or {}
    unknown = [p for p in partitions if p not in known]
    if unknown:
        admin = AdminClient(confluent_config(bootstrap))
        known = {**known, **committed_offsets(admin, group, topic, unknown, timeout_s=30)}
    committed = known
    targets, uncommitted, positions = {}, {}, {}
    for partition in partitions:
        low, high = ends.get(partition, (0, 0))
        position = committed.get(partition, -1)
        if position < 0:  # nothing committed: the agent must start at the beginning
            position = uncommitted[partition] = low
        positions[partition] = position
        if position < high:
            targets[partition] = high - 1
    return CatchUp(targets, uncommitted, positions)
