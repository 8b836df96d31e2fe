"""Kafka behaviours eventq relies on, checked on the real broker: LogAppendTime and
compaction down to the newest value per live key."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer

from eventq.core.partitioner import CONFLUENT_PRODUCER_PARTITIONER
from eventq.kafka.topics import TopicSpec, commands_topic, ensure_topics

pytestmark = pytest.mark.kafka


def read_all(bootstrap: str, topic: str, timeout_s: float = 10.0):
    """Every record of a topic from the beginning, as confluent Messages."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    messages, finished = [], set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if finished and len(finished) == len(consumer.assignment()):
                    break
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    finished.add(message.partition())
                    if len(finished) == len(consumer.assignment()):
                        break
                    continue
                raise AssertionError(message.error())
            messages.append(message)
    finally:
        consumer.close()
    return messages


def _by_key(record):
    key, value = record
    return key, value is None, value or b""


def producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": CONFLUENT_PRODUCER_PARTITIONER,
            "acks": "all",
        }
    )


def test_the_broker_stamps_commands_with_log_append_time(kafka_bootstrap, topic_prefix):
    topic = f"{topic_prefix}.commands"
    [report] = ensure_topics(kafka_bootstrap, [commands_topic(topic, partitions=1)])
    assert report.ok
    old_ms = 1_000_000_000_000  # 2001-09-09: a producer with a very wrong clock
    before_ms = int(time.time() * 1000)
    out = producer(kafka_bootstrap)
    out.produce(topic, key=b"k", value=b"v", timestamp=old_ms)
    assert out.flush(10) == 0

    [message] = read_all(kafka_bootstrap, topic)
    kind, stamped_ms = message.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert stamped_ms != old_ms
    assert before_ms - 1000 <= stamped_ms <= int(time.time() * 1000) + 1000


def test_compaction_keeps_only_the_newest_value_per_live_key(kafka_bootstrap, topic_prefix):
    topic = f"{topic_prefix}.compacted"
    spec = TopicSpec(
        topic,
        1,
        1,
        {
            "cleanup.policy": "compact",
            "segment.ms": "300",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "0",
        },
    )
    [report] = ensure_topics(kafka_bootstrap, [spec])
    assert report.ok

    out = producer(kafka_bootstrap)
    for version in range(5):
        for key in (b"a", b"b", b"c"):
            out.produce(topic, key=key, value=b"%s-%d" % (key, version))
    out.produce(topic, key=b"b", value=None)  # tombstone: b is deleted
    assert out.flush(10) == 0
    expected = {b"a": b"a-4", b"c": b"c-4"}

    # Compaction only touches closed segments and a segment rolls only on an append
    # after segment.ms; tombstones survive one cleaning. So keep appending a filler.
    deadline = time.monotonic() + 60
    filler = 0
    while True:
        time.sleep(0.4)
        filler += 1
        out.produce(topic, key=b"filler", value=b"%d" % filler)
        assert out.flush(10) == 0
        records = [(m.key(), m.value()) for m in read_all(kafka_bootstrap, topic)]
        data = [(k, v) for k, v in records if k != b"filler"]
        if sorted(data, key=_by_key) == sorted(expected.items()):
            break
        assert time.monotonic() < deadline, f"not compacted after 60s: {data}"
    # A key's newest value is still the one read; nothing of b remains.
    assert dict(data) == expected
