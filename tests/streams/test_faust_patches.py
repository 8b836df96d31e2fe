"""The drain-loop patch (streams/faust_patches.py) and its guard."""

from __future__ import annotations

import faust
import pytest
from faust.transport.consumer import Consumer

from streams import faust_patches


def test_faust_is_the_version_the_patch_was_written_for():
    """Fails when faust changes: read its new _drain_messages, re-check that the patch
    still does what it says, and pin the new hash."""
    assert faust.__version__ == "0.15.3"
    assert faust_patches.is_pinned_source(faust_patches.original_source())


def test_install_replaces_the_per_message_wait_first():
    assert faust_patches.install()
    assert faust_patches.install()  # twice is once
    patched = faust_patches.patched_source(faust_patches.original_source())
    assert "await callback(message)" in patched
    assert patched.count("wait_first") == 1  # kept for a suspended flow only
    method = Consumer._drain_messages
    assert method.__eventq_original__ is not None
    assert method.__code__.co_filename.endswith("faust/transport/consumer.py")
    assert "callback" in method.__code__.co_varnames


def test_a_changed_source_is_refused():
    source = faust_patches.original_source()
    assert not faust_patches.is_pinned_source(source + "\n")
    with pytest.raises(ValueError):
        faust_patches.patched_source(source.replace("wait_first", "wait_all"))



def _consumer_thread_with(position):
    """An AIOKafkaConsumerThread whose aiokafka consumer has one assigned partition,
    ``t[0]``, at ``position`` (None: still being looked up, as right after a rebalance).
    Built inside a running loop, as aiokafka requires."""
    import asyncio
    from types import SimpleNamespace

    from aiokafka.consumer.subscription_state import SubscriptionState
    from aiokafka.structs import TopicPartition
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    async def build():
        subscriptions = SubscriptionState()
        subscriptions.assign_from_user({TopicPartition("t", 0)})
        if position is not None:
            subscriptions.subscription.assignment.state_value(
                TopicPartition("t", 0)).seek(position)
        return subscriptions

    thread = AIOKafkaConsumerThread.__new__(AIOKafkaConsumerThread)
    thread._consumer = SimpleNamespace(
        _fetcher=SimpleNamespace(_subscriptions=asyncio.run(build())))
    return thread


def test_the_stall_check_skips_a_partition_whose_position_is_not_known_yet():
    """aiokafka 0.14.0 asserts on a position not yet looked up; faust's stall check read
    it and crashed the process at a start during a rebalance (campaign seed 3503)."""
    from aiokafka.structs import TopicPartition
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
    from faust.types import TP

    faust_patches.check_stalls_only_where_positioned()
    unpositioned, positioned = _consumer_thread_with(None), _consumer_thread_with(5)
    assert not faust_patches._has_position(unpositioned, TP("t", 0))
    assert faust_patches._has_position(positioned, TP("t", 0))
    assert not faust_patches._has_position(positioned, TP("other", 0))
    with pytest.raises(AssertionError):  # what faust's own check meets
        unpositioned._consumer._fetcher._subscriptions.subscription.assignment.state_value(
            TopicPartition("t", 0)).position
    # Skipped without looking further (the fake has nothing more to look at) ...
    assert AIOKafkaConsumerThread.verify_event_path(unpositioned, 0.0, TP("t", 0)) is None
    # ... while a positioned partition goes on to faust's own check.
    with pytest.raises(AttributeError):
        AIOKafkaConsumerThread.verify_event_path(positioned, 0.0, TP("t", 0))
