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
