"""The command log read in whole fetches on the main loop (streams/faust/command_fetch.py),
against a real broker: only the partitions served, from where they are placed, in
offset order; nothing of a stopped partition after ``stop`` returns, nor while a fetch
of it is being applied; read again from where the processor asks."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from eventq.kafka.topics import TopicSpec, ensure_topics
from streams.faust.command_fetch import CommandFetcher

pytestmark = [pytest.mark.kafka]

WAIT_S = 20.0


class Applied:
    """A processor's handle_batch that records each fetch handed over; ``gate`` (when
    set) holds an apply until the test opens it."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[int]]] = []
        self.errors: list = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def handle_batch(self, partition: int, records) -> None:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        self.batches.append((partition, [r.offset for r in records]))

    def offsets(self, partition: int) -> list[int]:
        return [o for p, batch in self.batches if p == partition for o in batch]

    async def until(self, partition: int, count: int) -> None:
        async with asyncio.timeout(WAIT_S):
            while len(self.offsets(partition)) < count:
                await asyncio.sleep(0.01)


def topic(bootstrap: str, prefix: str, partitions: int = 2) -> str:
    name = f"{prefix}.commands"
    ensure_topics(bootstrap, [TopicSpec(name, partitions, 1, {})])
    return name


async def produce(bootstrap: str, name: str, partition: int, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for n in range(count):
            await producer.send_and_wait(name, b"%d" % n, partition=partition)
    finally:
        await producer.stop()


def fetcher(bootstrap: str, name: str, applied: Applied, partitions: int = 2) -> CommandFetcher:
    return CommandFetcher(
        bootstrap=bootstrap, topic=name, partitions=partitions, client_id="test-fetch",
        handle_batch=applied.handle_batch,
        on_error=lambda partition, error: applied.errors.append((partition, error)),
        on_failure=lambda error: applied.errors.append((None, error)))


def test_only_served_partitions_are_read_in_order_from_where_they_are_placed(
        kafka_bootstrap, topic_prefix):
    name = topic(kafka_bootstrap, topic_prefix)

    async def scenario():
        await produce(kafka_bootstrap, name, 0, 10)
        await produce(kafka_bootstrap, name, 1, 10)
        applied = Applied()
        reader = fetcher(kafka_bootstrap, name, applied)
        reader.serve({0: 4})
        await applied.until(0, 6)
        await produce(kafka_bootstrap, name, 0, 5)  # read as they arrive
        await applied.until(0, 11)
        await asyncio.sleep(0.5)
        assert applied.offsets(1) == []  # not served: never fetched
        assert reader.highwater(0) == 15 and reader.highwater(1) is None
        await reader.close()
        return applied

    applied = asyncio.run(scenario())
    assert applied.offsets(0) == list(range(4, 15)) and not applied.errors


def test_stop_waits_for_the_fetch_being_applied_and_nothing_of_it_comes_after(
        kafka_bootstrap, topic_prefix):
    name = topic(kafka_bootstrap, topic_prefix)

    async def scenario():
        await produce(kafka_bootstrap, name, 0, 3)
        applied = Applied()
        applied.gate = asyncio.Event()
        reader = fetcher(kafka_bootstrap, name, applied)
        reader.serve({0: 0})
        async with asyncio.timeout(WAIT_S):
            await applied.entered.wait()  # a fetch of partition 0 is being applied
        stopping = asyncio.ensure_future(reader.stop([0]))
        await asyncio.sleep(0.2)
        assert not stopping.done()  # waits for that apply ...
        applied.gate.set()
        async with asyncio.timeout(WAIT_S):
            await stopping  # ... and returns once it is done
        handed = list(applied.batches)
        await produce(kafka_bootstrap, name, 0, 3)
        await asyncio.sleep(1.0)
        assert applied.batches == handed  # nothing of a stopped partition any more
        reader.serve({0: 2})  # taken again: from where the processor expects
        await applied.until(0, 3 + 4)
        await reader.close()
        return applied

    applied = asyncio.run(scenario())
    assert applied.offsets(0) == [0, 1, 2, 2, 3, 4, 5]


def test_a_partition_is_read_again_from_where_the_processor_asks(
        kafka_bootstrap, topic_prefix):
    name = topic(kafka_bootstrap, topic_prefix, partitions=1)

    async def scenario():
        await produce(kafka_bootstrap, name, 0, 6)
        applied = Applied()
        reader = fetcher(kafka_bootstrap, name, applied, partitions=1)
        reader.serve({0: 0})
        await applied.until(0, 6)
        reader.read_again(0, 3)
        await applied.until(0, 9)
        reader.drop([0])
        reader.read_again(0, 0)  # dropped: not read again until served
        await asyncio.sleep(0.5)
        await reader.close()
        return applied

    applied = asyncio.run(scenario())
    assert applied.offsets(0) == [0, 1, 2, 3, 4, 5, 3, 4, 5]


def test_a_failed_apply_drops_the_partition_and_reports_it(kafka_bootstrap, topic_prefix):
    name = topic(kafka_bootstrap, topic_prefix)

    async def scenario():
        await produce(kafka_bootstrap, name, 0, 2)
        await produce(kafka_bootstrap, name, 1, 2)
        applied = Applied()
        failing = applied.handle_batch

        async def handle_batch(partition, records):
            if partition == 0:
                raise OSError("the store failed")
            await failing(partition, records)

        reader = fetcher(kafka_bootstrap, name, applied)
        reader._handle_batch = handle_batch
        reader.serve({0: 0, 1: 0})
        await applied.until(1, 2)
        async with asyncio.timeout(WAIT_S):
            while not applied.errors:
                await asyncio.sleep(0.01)
        await produce(kafka_bootstrap, name, 0, 1)
        await asyncio.sleep(0.5)
        await reader.close()
        return applied

    applied = asyncio.run(scenario())
    assert [p for p, _ in applied.errors] == [0]  # once: the partition is not read on
    assert applied.offsets(1) == [0, 1]


def test_a_partition_never_served_is_never_reset_so_it_cannot_hold_the_served_ones(
        kafka_bootstrap, topic_prefix):
    """aiokafka looks up a position for every assigned partition that has none, paused
    or not, and sends no fetch to a broker while one awaits it; the fetcher gives each
    a position when it assigns them, so an unserved partition is never reset. Partition
    0's log starts at 3 here: a reset to earliest would have placed it there."""
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import AdminClient

    name = topic(kafka_bootstrap, topic_prefix)

    async def scenario():
        await produce(kafka_bootstrap, name, 0, 5)
        await produce(kafka_bootstrap, name, 1, 2)
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for future in admin.delete_records([ConfluentPartition(name, 0, 3)]).values():
            future.result(timeout=WAIT_S)
        applied = Applied()
        reader = fetcher(kafka_bootstrap, name, applied)
        reader.serve({1: 0})
        await applied.until(1, 2)
        await asyncio.sleep(0.5)  # several passes of aiokafka's fetch loop
        consumer = reader._consumer
        tp0 = next(tp for tp in consumer.assignment() if tp.partition == 0)
        state = consumer._subscription.subscription.assignment.state_value(tp0)
        placed = (state._position, state.awaiting_reset)
        # What a stalled partition's warning would say, read from the pinned aiokafka.
        said = reader._fetch_state(0)
        await reader.close()
        return applied, placed, said

    applied, (position, awaiting_reset), said = asyncio.run(scenario())
    assert applied.offsets(1) == [0, 1]
    assert applied.offsets(0) == []
    assert (position, awaiting_reset) == (0, False)
    assert said.startswith("position 0, paused True, awaiting reset False, leader "), said
    assert said.endswith("fetcher failed False"), said
