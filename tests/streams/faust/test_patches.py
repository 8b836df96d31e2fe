"""The drain-loop patch (streams/faust/patches.py) and its guard."""

from __future__ import annotations

import faust
import pytest
from faust.transport.consumer import Consumer

from streams.faust import patches as faust_patches


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


# --- the command log left to the fetcher (streams/faust/command_fetch.py) -------------------


def test_aiokafka_assigns_then_calls_on_assignment_with_no_await_between():
    """Fails when aiokafka changes: the assignor pauses the command log's partitions in
    on_assignment, which must run right after they are assigned, before any await (so
    before faust's fetcher, a task of the same loop, could fetch them). Re-check that
    and pin the new hash."""
    import aiokafka

    assert aiokafka.__version__ == "0.14.0"
    source = faust_patches.join_complete_source()
    import hashlib

    assert hashlib.sha256(source.encode()).hexdigest() == faust_patches.PINNED_JOIN_COMPLETE_SHA256
    between = source.split("assign_from_subscribed(")[1].split("assignor.on_assignment(")[0]
    code = [line.split("#")[0] for line in between.splitlines()]
    assert not any("await" in line for line in code)


def test_faust_gives_its_consumer_the_apps_assignor_and_keeps_it_in_consumer():
    """What CommandsLeftToFetcher relies on in faust: the worker consumer is created
    with app.assignor (eventq has tables) in the consumer thread's ``_consumer``."""
    import inspect

    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    method = AIOKafkaConsumerThread._create_worker_consumer
    # (streams/faust/fetch_wait.py wraps it, once installed)
    create = inspect.getsource(getattr(method, "__eventq_original__", method))
    assert "self.app.assignor" in create
    assert "partition_assignment_strategy=[self._assignor]" in create
    start = inspect.getsource(AIOKafkaConsumerThread.on_start)
    assert "self._consumer = self._create_consumer(" in start


def test_faust_never_pauses_or_resumes_a_partition_in_aiokafka():
    """faust's pause_partitions/resume_partitions keep sets of its own; nothing in faust
    calls aiokafka's pause or resume, so the command log stays paused in its consumer.
    (Its ``flow_control.resume()`` is faust's own flow control.)"""
    import pathlib
    import re

    root = pathlib.Path(faust.__file__).parent
    calls = [
        f"{path.relative_to(root)}: {line.strip()}"
        for path in root.rglob("*.py")
        for line in path.read_text().splitlines()
        if re.search(r"\.(pause|resume)\(", line) and "flow_control." not in line
    ]
    assert calls == []


class _Recorded:
    """An aiokafka consumer that records what it is asked to pause."""

    def __init__(self) -> None:
        self.paused: list = []

    def pause(self, *tps) -> None:
        self.paused.extend(tps)


def test_the_assignor_pauses_exactly_the_command_log_in_fausts_consumer(monkeypatch):
    from types import SimpleNamespace

    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
    from aiokafka.structs import TopicPartition
    from faust.assignor import PartitionAssignor

    told = []
    monkeypatch.setattr(PartitionAssignor, "on_assignment",
                        lambda self, assignment: told.append(assignment))
    assignor_class = faust_patches.commands_left_to_fetcher("t.commands")
    assert issubclass(assignor_class, PartitionAssignor)
    assignor = assignor_class.__new__(assignor_class)
    consumer = _Recorded()
    assignor.app = SimpleNamespace(
        consumer=SimpleNamespace(_thread=SimpleNamespace(_consumer=consumer)))
    assignment = ConsumerProtocolMemberAssignment(
        0, [("t.commands", [0, 3]), ("t.jobs", [0, 1, 3])], b"")
    assignor.on_assignment(assignment)
    assert told == [assignment]  # faust's own first
    assert sorted(consumer.paused) == [TopicPartition("t.commands", 0),
                                       TopicPartition("t.commands", 3)]


def test_the_stall_check_skips_a_partition_paused_in_aiokafka():
    """faust's stall check would report a paused partition as never fetched."""
    import asyncio

    from aiokafka.structs import TopicPartition
    from faust.types import TP

    positioned = _consumer_thread_with(5)
    assert faust_patches._has_position(positioned, TP("t", 0))

    async def pause():  # (aiokafka makes the resume future in a running loop)
        positioned._consumer._fetcher._subscriptions.pause(TopicPartition("t", 0))

    asyncio.run(pause())
    assert not faust_patches._has_position(positioned, TP("t", 0))
