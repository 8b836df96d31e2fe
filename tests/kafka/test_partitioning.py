"""Every producer puts a job id in the same partition (docs/architecture.md, "The topics": murmur2).

Records are really produced to a real broker and the partition each landed in is read
back from the delivery report, for thousands of random job ids.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Producer

from eventq.core.partitioner import CONFLUENT_PRODUCER_PARTITIONER, partition_for_key
from eventq.kafka.topics import TopicSpec, ensure_topics

pytestmark = pytest.mark.kafka

PARTITIONS = 8
KEY_COUNT = 3000


@pytest.fixture
def topic(kafka_bootstrap, topic_prefix):
    name = f"{topic_prefix}.keys"
    [report] = ensure_topics(kafka_bootstrap, [TopicSpec(name, PARTITIONS, 1)])
    assert report.ok
    return name


@pytest.fixture(scope="module")
def keys():
    return [str(uuid.uuid4()).encode() for _ in range(KEY_COUNT)]


def confluent_partitions(bootstrap, topic, keys, partitioner=None) -> dict[bytes, int]:
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if partitioner:
        config["partitioner"] = partitioner
    producer = Producer(config)
    landed: dict[bytes, int] = {}

    def report(error, message):
        assert error is None, error
        landed[message.key()] = message.partition()

    for key in keys:
        producer.produce(topic, key=key, value=b"x", on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    return landed


def aiokafka_partitions(bootstrap, topic, keys) -> dict[bytes, int]:
    from aiokafka import AIOKafkaProducer

    async def produce():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=key, value=b"x") for key in keys]
            return {key: (await f).partition for key, f in zip(keys, futures)}
        finally:
            await producer.stop()

    return asyncio.run(produce())


def faust_partitions(bootstrap, topic, keys, tmp_path) -> dict[bytes, int]:
    import faust

    async def produce():
        app = faust.App(
            "partition-test",
            broker=f"kafka://{bootstrap}",
            datadir=str(tmp_path),
            web_enabled=False,
        )
        producer = app.producer
        await producer.start()
        try:
            futures = [
                await producer.send(topic, key, b"x", partition=None, timestamp=None, headers=None)
                for key in keys
            ]
            return {key: (await f).partition for key, f in zip(keys, futures)}
        finally:
            await producer.stop()

    return asyncio.run(produce())


def test_all_producers_agree_on_the_partition_of_every_key(
    kafka_bootstrap, topic, keys, tmp_path
):
    expected = {key: partition_for_key(key, PARTITIONS) for key in keys}
    assert len(set(expected.values())) == PARTITIONS  # the keys really spread out

    confluent = confluent_partitions(
        kafka_bootstrap, topic, keys, CONFLUENT_PRODUCER_PARTITIONER
    )
    aiokafka = aiokafka_partitions(kafka_bootstrap, topic, keys)
    faust_landed = faust_partitions(kafka_bootstrap, topic, keys, tmp_path)

    assert confluent == expected
    assert aiokafka == expected
    assert faust_landed == expected


def test_confluent_default_partitioner_would_disagree(kafka_bootstrap, topic, keys):
    expected = {key: partition_for_key(key, PARTITIONS) for key in keys}
    default = confluent_partitions(kafka_bootstrap, topic, keys)
    disagreeing = sum(default[key] != expected[key] for key in keys)
    # CRC32 vs murmur2: about 7/8 of keys land elsewhere with 8 partitions.
    assert disagreeing > KEY_COUNT // 2
