"""The command producer (eventq/kafka/command_producer.py) against a real broker: every
acknowledged record is in the log where its acknowledgement says, in the order sent
per partition; a Kafka error is the send's exception; a stop flushes what is in flight,
and is bounded when Kafka is gone (docs/architecture.md, "Batches")."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaException

from eventq.core.batch import position, split_record
from eventq.kafka.command_producer import CommandProducer, Delivered, ProducerStopped
from eventq.kafka.logreader import read_topic
from eventq.kafka.topics import commands_topic, ensure_topics
from eventq.run.localkafka import broker
from streams.command_writer import CommandWriter

pytestmark = pytest.mark.kafka

PARTITIONS = 4
SHORT_DELIVERY_TIMEOUT_MS = 3000  # errors in seconds, not in the default 30


def create_topic(bootstrap: str, name: str) -> str:
    [report] = ensure_topics(bootstrap, [commands_topic(name, PARTITIONS)])
    assert report.ok, report.describe()
    return name


@pytest.fixture
def topic(kafka_bootstrap, topic_prefix):
    return create_topic(kafka_bootstrap, f"{topic_prefix}.commands")


def log_of(bootstrap: str, topic: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """{(partition, offset): (key, value)} of every record in the topic."""
    return {(r.partition, r.offset): (r.key, r.value) for r in read_topic(bootstrap, topic)}


async def started(bootstrap: str, **options) -> CommandProducer:
    producer = CommandProducer(bootstrap, **options)
    await producer.start()
    return producer


def test_concurrent_sends_are_in_the_log_where_acknowledged_in_the_order_sent(
        kafka_bootstrap, topic):
    per_partition = 50

    async def main() -> list[tuple[int, int, Delivered]]:
        producer = await started(kafka_bootstrap)
        try:
            sent = [(i, p) for i in range(per_partition) for p in range(PARTITIONS)]
            delivered = await asyncio.gather(*(
                producer.send_and_wait(topic, b"v%d-%d" % (p, i), b"k%d" % i, partition=p)
                for i, p in sent))
            return [(i, p, d) for (i, p), d in zip(sent, delivered)]
        finally:
            await producer.stop()

    results = asyncio.run(main())
    for partition in range(PARTITIONS):
        offsets = [d.offset for i, p, d in results if p == partition]
        assert offsets == list(range(per_partition))  # sent first, written first
    assert all(d.partition == p and d.topic == topic for _, p, d in results)
    log = log_of(kafka_bootstrap, topic)
    assert len(log) == PARTITIONS * per_partition
    for i, p, d in results:
        assert log[p, d.offset] == (b"k%d" % i, b"v%d-%d" % (p, i))


def test_a_partition_the_topic_does_not_have_fails_the_send_and_no_other(
        kafka_bootstrap, topic):
    async def main() -> None:
        producer = await started(kafka_bootstrap,
                                 delivery_timeout_ms=SHORT_DELIVERY_TIMEOUT_MS)
        try:
            with pytest.raises(KafkaException):
                await producer.send_and_wait(topic, b"nowhere", partition=PARTITIONS + 3)
            delivered = await producer.send_and_wait(topic, b"here", partition=1)
            assert (delivered.partition, delivered.offset) == (1, 0)
        finally:
            await producer.stop()

    asyncio.run(main())
    assert log_of(kafka_bootstrap, topic) == {(1, 0): (None, b"here")}


def test_a_topic_that_does_not_exist_fails_the_send(kafka_bootstrap, topic_prefix):
    async def main() -> float:
        producer = await started(kafka_bootstrap,
                                 delivery_timeout_ms=SHORT_DELIVERY_TIMEOUT_MS)
        began = time.monotonic()
        try:
            with pytest.raises(KafkaException):
                await producer.send_and_wait(f"{topic_prefix}.absent", b"x", partition=0)
            return time.monotonic() - began
        finally:
            await producer.stop()

    assert asyncio.run(main()) < 4 * SHORT_DELIVERY_TIMEOUT_MS / 1000


def test_stop_flushes_every_send_in_flight_then_refuses_more(kafka_bootstrap, topic):
    count = 200

    async def main() -> list[Delivered]:
        producer = await started(kafka_bootstrap)
        sends = [asyncio.ensure_future(
            producer.send_and_wait(topic, b"%d" % i, partition=i % PARTITIONS))
            for i in range(count)]
        await asyncio.sleep(0)  # each has handed its record to librdkafka
        await producer.stop()
        assert all(send.done() for send in sends)  # no acknowledgement waits after stop
        with pytest.raises(ProducerStopped):
            await producer.send_and_wait(topic, b"late", partition=0)
        return [send.result() for send in sends]

    delivered = asyncio.run(main())
    log = log_of(kafka_bootstrap, topic)
    assert len(log) == count
    for i, d in enumerate(delivered):
        assert log[d.partition, d.offset] == (None, b"%d" % i)


def test_a_full_local_queue_delays_sends_and_loses_none(kafka_bootstrap, topic):
    """librdkafka refuses a record when its queue is full (BufferError): the send is
    offered again, never dropped."""
    count = 300

    async def main() -> list[Delivered]:
        producer = await started(kafka_bootstrap,
                                 overrides={"queue.buffering.max.messages": 5})
        try:
            return await asyncio.gather(*(
                producer.send_and_wait(topic, b"%d" % i, partition=2) for i in range(count)))
        finally:
            await producer.stop()

    delivered = asyncio.run(main())
    assert sorted(d.offset for d in delivered) == list(range(count))
    log = log_of(kafka_bootstrap, topic)
    assert sorted(value for _, value in log.values()) == sorted(b"%d" % i for i in range(count))


def test_a_stopped_broker_fails_sends_and_a_stop_ends_within_its_bound(own_broker, topic_prefix):
    topic = create_topic(own_broker.bootstrap, f"{topic_prefix}.commands")
    stop_flush_s = 1.0

    async def main() -> None:
        producer = await started(own_broker.bootstrap,
                                 delivery_timeout_ms=SHORT_DELIVERY_TIMEOUT_MS,
                                 stop_flush_timeout_s=stop_flush_s)
        await producer.send_and_wait(topic, b"before", partition=0)
        broker.stop(own_broker)
        with pytest.raises(KafkaException):
            await producer.send_and_wait(topic, b"after", partition=0)
        in_flight = asyncio.ensure_future(producer.send_and_wait(topic, b"last", partition=1))
        await asyncio.sleep(0)
        began = time.monotonic()
        await producer.stop()
        assert time.monotonic() - began < stop_flush_s + 2.0
        assert producer.unacknowledged_at_stop == 1
        with pytest.raises(KafkaException):
            await in_flight

    asyncio.run(main())


def test_the_command_writer_writes_through_it(kafka_bootstrap, topic):
    """The command writer's lanes over this producer: the first command alone, what
    waited meanwhile as one batch record, each with its position."""
    async def main() -> list[int]:
        producer = await started(kafka_bootstrap)
        writer = CommandWriter(lambda: producer, topic, PARTITIONS)
        try:
            first = writer.write(3, b"job0", b"\x80c0")
            await asyncio.sleep(0)  # its lane sends it: the next ones wait for it
            later = [writer.write(3, b"job%d" % i, b"\x80c%d" % i) for i in range(1, 5)]
            return list(await asyncio.gather(first, *later))
        finally:
            await writer.stop()
            await producer.stop()

    positions = asyncio.run(main())
    assert positions == [position(0, 0), *(position(1, i) for i in range(4))]
    log = log_of(kafka_bootstrap, topic)
    assert log[3, 0] == (b"job0", b"\x80c0")
    key, value = log[3, 1]
    assert key is None and split_record(value) == [b"\x80c%d" % i for i in range(1, 5)]
