"""One patch of faust-streaming 0.15.3's consumer: no ``wait_first`` per message.

``Consumer._drain_messages`` hands every fetched message to the conductor through
``await self.wait_first(callback(message), self.suspend_flow.wait())``: mode's
``wait_first`` creates four tasks and cancels three of them per message, ~58 us of the
~92 us faust spends per consumed record (research/faust-levers.md, 2). It was added by
faust-streaming#223 ("Discard message after rebalance") so that a message whose delivery
is still pending when a rebalance stops the flow is dropped rather than delivered later.

The patched loop keeps that race only when it can matter, when the flow is already
suspended as the message is handed over; otherwise it awaits the callback directly
(the code before #223). A message whose delivery began before a suspension then waits
for the flow to resume and is delivered with its old generation, which the stream
discards (faust/_cython/streams.pyx ``_prepare_event``: stale generation), so the
outcome is #223's. One more thing differs: the original records the message's offset
as read when the race ends, before the rebalance seeks; a direct call returns after
it, so recording it then would undo the seek (`_read_offset` would skip the re-read
messages: seen as a restart whose catch-up never ended). So ``stop_flow`` and ``seek``
advance ``_eventq_flow_epoch``, and a message whose delivery spanned either leaves the
read offset to the seek.

The patch is applied to exactly the source it was written for: ``PINNED_SOURCE_SHA256``
is the hash of 0.15.3's method, and ``install`` refuses any other (a faust upgrade then
runs unpatched, slower and correct, and tests/streams/faust/test_patches.py fails to say
so).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import textwrap
import time
from typing import Any

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from faust.assignor import PartitionAssignor
from faust.types import TP

from streams.faust.monkeypatch import original_of, replace

log = logging.getLogger(__name__)

PINNED_SOURCE_SHA256 = "44a2500309e83c630493f6828af50166ec8d96a0b3e4fb2bab735f704ae93417"

RACED_CALLBACK = """\
                            await self.wait_first(
                                callback(message), self.suspend_flow.wait()
                            )
"""
DIRECT_CALLBACK = """\
                            if self.suspend_flow.is_set():  # eventq: race only then
                                await self.wait_first(
                                    callback(message), self.suspend_flow.wait()
                                )
                            else:
                                epoch = self._eventq_flow_epoch
                                await callback(message)
                                if self._eventq_flow_epoch != epoch:
                                    # A rebalance stopped the flow or a seek moved
                                    # this partition meanwhile: where to read next is
                                    # the seek's to say, not this stale message's.
                                    continue
"""


def original_source() -> str:
    from faust.transport.consumer import Consumer

    method = original_of(Consumer._drain_messages) or Consumer._drain_messages
    return inspect.getsource(method)


def is_pinned_source(source: str) -> bool:
    return hashlib.sha256(source.encode()).hexdigest() == PINNED_SOURCE_SHA256


def patched_source(source: str) -> str:
    if source.count(RACED_CALLBACK) != 1:
        raise ValueError("faust's _drain_messages does not call wait_first as expected")
    return source.replace(RACED_CALLBACK, DIRECT_CALLBACK)


def _count_flow_epochs(Consumer: Any) -> None:
    """``stop_flow`` and ``seek`` advance ``_eventq_flow_epoch`` (see the docstring).
    (``Consumer``, and each ``self`` below: faust's Consumer, whose methods are patched:
    streams/faust/monkeypatch.py.)"""
    Consumer._eventq_flow_epoch = 0
    stop_flow, seek = Consumer.stop_flow, Consumer.seek

    def counted_stop_flow(self: Any) -> None:
        self._eventq_flow_epoch += 1
        stop_flow(self)

    async def counted_seek(self: Any, partition: TP, offset: int) -> None:
        self._eventq_flow_epoch += 1
        await seek(self, partition, offset)
        self._eventq_flow_epoch += 1

    Consumer.stop_flow = counted_stop_flow
    Consumer.seek = counted_seek


def install() -> bool:
    """Patch faust's consumer drain loop; False (and a warning) if faust's code is not
    the version this patch was written for."""
    from faust.transport import consumer as module

    Consumer: Any = module.Consumer
    if original_of(Consumer._drain_messages) is not None:
        return True
    source = original_source()
    if not is_pinned_source(source):
        log.warning(
            "faust's Consumer._drain_messages is not faust-streaming 0.15.3's: running it "
            "unpatched (correct, ~58 us more per Kafka record); see streams/faust/patches.py"
        )
        return False
    _count_flow_epochs(Consumer)
    namespace: dict[str, Any] = {}
    code = compile(textwrap.dedent(patched_source(source)), module.__file__, "exec")
    exec(code, module.__dict__, namespace)  # the module's globals, as the original's
    patched = namespace["_drain_messages"]
    patched.__qualname__ = Consumer._drain_messages.__qualname__
    replace(Consumer, "_drain_messages", patched)
    return True


def commit_in_transactions() -> None:
    """faust's consumer commits nothing: eventq commits the command log's offsets in
    each partition's changelog transaction (streams/faust/transactions.py), so that an offset
    and the changelog records it covers become visible together. A commit through the
    group (aiokafka's OffsetCommit) could pass records whose changelog is not committed,
    and would race the transactional one. faust still thinks it committed, and still
    notes when (its livelock detector reads that)."""
    from faust.transport.drivers import aiokafka as driver

    Consumer = driver.AIOKafkaConsumerThread
    if original_of(Consumer._commit) is not None:
        return

    async def _commit(self: Any, offsets: Any) -> bool:  # (streams/faust/monkeypatch.py)
        now = time.monotonic()
        self.tp_last_committed_at.update({tp: now for tp in offsets})
        return True

    replace(Consumer, "_commit", _commit)


def check_stalls_only_where_positioned() -> None:
    """faust's stall check (``verify_event_path``, every few seconds) reads aiokafka's
    position of every assigned partition, and aiokafka 0.14.0 asserts that it has one:
    a partition assigned a moment ago, whose position is still being looked up, crashed
    the consumer and with it the whole process (`AssertionError` in ``position``; the
    fault campaign, seed 3503, at a start during a rebalance). faust's own code expects
    "no position yet" (it tests ``committed_offset is not None``), so such a partition
    is skipped until it has one, as faust meant."""
    from faust.transport.drivers import aiokafka as driver

    Consumer = driver.AIOKafkaConsumerThread
    if original_of(Consumer.verify_event_path) is not None:
        return
    original = Consumer.verify_event_path

    def verify_event_path(self: Any, now: float, tp: TP) -> None:  # (monkeypatch.py)
        if not _has_position(self, tp):
            return None
        return original(self, now, tp)

    replace(Consumer, "verify_event_path", verify_event_path)


def _has_position(consumer_thread: Any, tp: TP) -> bool:
    """Whether faust's consumer fetches ``tp`` from a known position: not when it is
    still being looked up, nor when the partition is paused in aiokafka (the command
    log, read by streams/faust/command_fetch.py: faust's check would report it as never
    fetched, an ERROR every few seconds once ``stream_processing_timeout`` passed).
    (``consumer_thread``: faust's AIOKafkaConsumerThread, whose aiokafka consumer and
    its fetcher are read: Any.)"""
    from aiokafka.structs import TopicPartition

    consumer = consumer_thread._consumer
    if consumer is None:
        return False
    subscription = consumer._fetcher._subscriptions.subscription
    if subscription is None or subscription.assignment is None:
        return False
    state = subscription.assignment.state_value(TopicPartition(tp.topic, tp.partition))
    return state is not None and state.has_valid_position and not state.paused


# aiokafka 0.14.0's GroupCoordinator._on_join_complete: it assigns the partitions and
# then calls the assignor's on_assignment, with no await between (so no fetch between).
PINNED_JOIN_COMPLETE_SHA256 = "0b0b3d204b408f3ce3c3cc7d2168d6425e442c5a074b3f3193a897a510d80594"


def join_complete_source() -> str:
    from aiokafka.consumer.group_coordinator import GroupCoordinator

    return inspect.getsource(GroupCoordinator._on_join_complete)


def commands_left_to_fetcher(commands_topic: str) -> type[PartitionAssignor]:
    """faust's assignor (faust.assignor.PartitionAssignor, its ``PartitionAssignor``
    setting) that also pauses ``commands_topic``'s partitions in faust's aiokafka
    consumer as they are assigned: streams/faust/command_fetch.py reads them on the main loop
    instead, so faust's consumer never fetches them (its agent gets no event).

    Where: aiokafka calls ``on_assignment`` in faust's consumer thread right after it
    assigned the partitions, with no await between (GroupCoordinator._on_join_complete,
    pinned: ``PINNED_JOIN_COMPLETE_SHA256``), so its fetcher (a task of that thread's
    loop) never sees them unpaused. faust never resumes a partition in aiokafka (its
    pause_partitions and resume_partitions keep sets of its own), and every new
    assignment pauses them again. faust keeps everything else: the group, the
    assignment, standbys, heartbeats."""

    class CommandsLeftToFetcher(PartitionAssignor):
        def on_assignment(self, assignment: ConsumerProtocolMemberMetadata) -> None:
            super().on_assignment(assignment)
            commands = [tp for tp in assignment.partitions() if tp.topic == commands_topic]
            # faust's consumer runs aiokafka's in a thread of its own: neither is in
            # faust's ConsumerT.
            faust_consumer: Any = self.app.consumer
            try:
                consumer = faust_consumer._thread._consumer  # aiokafka's, this thread's
                consumer.pause(*commands)
            except Exception:  # a faust change: correct still, every record read twice
                log.critical("could not pause %s in faust's consumer: it reads the "
                             "command log too, and its agent drops what it reads (see "
                             "streams/faust/patches.py)", commands, exc_info=True)

    CommandsLeftToFetcher.__qualname__ = "CommandsLeftToFetcher"
    return CommandsLeftToFetcher
