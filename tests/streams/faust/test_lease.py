"""The lease on this process's partitions (streams/faust/lease.py): renewed by the group
coordinator's answers, valid for the session timeout less a margin after the send of
the last one answered, and given up at once when ended."""

from __future__ import annotations

import pytest

from streams.faust.lease import LEASE_MARGIN_S, OwnershipLease


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_lease_never_renewed_is_not_held():
    assert not OwnershipLease(6.0, Clock()).valid()


def test_a_renewal_holds_for_the_session_less_the_margin_after_it_was_sent():
    clock = Clock()
    lease = OwnershipLease(6.0, clock)
    lease.renew(sent_at=99.0)  # answered at 100: the coordinator saw it at 99 or later
    clock.now = 99.0 + 6.0 - LEASE_MARGIN_S - 0.001
    assert lease.valid()
    clock.now = 99.0 + 6.0 - LEASE_MARGIN_S
    assert not lease.valid()


def test_an_older_answer_never_shortens_the_lease():
    clock = Clock()
    lease = OwnershipLease(6.0, clock)
    lease.renew(sent_at=100.0)
    lease.renew(sent_at=98.0)  # a slow answer to an earlier heartbeat
    clock.now = 104.5
    assert lease.valid()


def test_a_process_paused_past_its_session_finds_its_lease_expired():
    clock = Clock()
    lease = OwnershipLease(6.0, clock)
    lease.renew(sent_at=100.0)
    clock.now = 115.0  # SIGSTOP for 15 s, then SIGCONT
    assert not lease.valid() and lease.remaining_s() == 0.0


def test_an_ended_lease_is_not_held_until_renewed():
    clock = Clock()
    lease = OwnershipLease(6.0, clock)
    lease.renew(sent_at=100.0)
    lease.end()
    assert not lease.valid()
    lease.renew(sent_at=100.5)
    assert lease.valid()


def test_a_session_no_longer_than_the_margin_is_refused():
    with pytest.raises(ValueError):
        OwnershipLease(LEASE_MARGIN_S)


@pytest.mark.kafka
def test_the_group_coordinators_heartbeats_renew_the_lease(kafka_bootstrap, topic_prefix):
    """aiokafka's coordinator, patched by ``install``: the SyncGroup of the join and
    each heartbeat answered without error renew the registered group's lease; a group
    without a registered lease is left alone."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    from streams.faust import lease as hooks

    topic = f"{topic_prefix}.lease"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result()
    hooks.install()
    hooks.install()  # twice is once
    group = f"{topic_prefix}-group"
    lease = OwnershipLease(6.0)
    hooks.register(group, lease)

    async def scenario():
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group,
                                    session_timeout_ms=6000, heartbeat_interval_ms=300)
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=2500)
            await asyncio.sleep(1.5)
            return lease.renewals, lease.valid()
        finally:
            await consumer.stop()
            hooks.unregister(group)

    renewals, valid = asyncio.run(scenario())
    assert valid and renewals >= 3  # the join's SyncGroup, then heartbeats
