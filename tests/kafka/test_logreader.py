"""A watermark query while a partition's leader moves is asked again, not fatal (a
broker killed under load made `replay --from-commands` fail with OFFSET_NOT_AVAILABLE)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from eventq.kafka import logreader


class LeaderMoving:
    """A consumer whose first ``failures`` watermark queries fail with ``code``."""

    def __init__(self, failures: int, code: int) -> None:
        self.failures, self.code, self.calls = failures, code, 0

    def get_watermark_offsets(self, partition, timeout):
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code))
        return (0, 42)


def test_a_moving_leader_is_asked_again(monkeypatch):
    monkeypatch.setattr(logreader, "WATERMARK_RETRY_S", 0.001)
    consumer = LeaderMoving(3, KafkaError.OFFSET_NOT_AVAILABLE)
    assert logreader.watermarks(consumer, "tp") == (0, 42) and consumer.calls == 4


def test_other_errors_are_not_retried():
    consumer = LeaderMoving(1, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        logreader.watermarks(consumer, "tp")
    assert consumer.calls == 1


@pytest.mark.kafka
def test_a_read_that_stops_getting_nearer_its_end_raises(kafka_bootstrap, topic_prefix):
    """An end given by one broker that the reader's broker never reaches (a leader cut
    off from the cluster serves what it has, short of the new leader's end): the read
    stops after ``stall_s`` instead of waiting for good (docs/fencing.md, "Taking a
    partition")."""
    import time

    from confluent_kafka import Producer

    from eventq.kafka.topics import TopicSpec, ensure_topics

    topic = f"{topic_prefix}.log"
    ensure_topics(kafka_bootstrap, [TopicSpec(topic, 1, 1, {})])
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(3):
        producer.produce(topic, key=b"k", value=str(n).encode(), partition=0)
    producer.flush(10)
    began = time.monotonic()
    read = []
    with pytest.raises(logreader.ReadStalled):
        for batch in logreader.read_batches(kafka_bootstrap, topic, ends={0: (0, 5)},
                                            stall_s=1.0):
            read += [m.value() for m in batch]
    assert read == [b"0", b"1", b"2"]  # what there is, then the stop
    assert time.monotonic() - began < 10
