"""Helpers shared by tests (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import socket

from eventq.kafka import broker

# Fast-test tuning of the throwaway broker (see issue 2): compaction and retention
# checks run often, and group joins do not wait for more members.
TEST_BROKER_TUNING = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "1000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "2",
    "log.segment.delete.delay.ms": "500",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_broker_config(home, **overrides) -> broker.BrokerConfig:
    """A broker on free loopback ports in ``home``, tuned for tests."""
    return broker.BrokerConfig(
        home=home,
        port=free_port(),
        controller_port=free_port(),
        heap_mb=512,
        overrides={**TEST_BROKER_TUNING, **overrides},
    )


test_broker_config.__test__ = False  # a helper, not a test
