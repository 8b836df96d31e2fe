"""The bulk changelog (streams/changelog.py) against aiokafka's real batch builder and a
producer whose acknowledgements the test gives: the persisted offset after each ack,
and a lost batch that stops all commits."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder

from streams.changelog import ChangelogWriter


class AckedByHand:
    def __init__(self, batch_bytes: int = 1 << 20) -> None:
        self.batch_bytes = batch_bytes
        self.sent: list[tuple[int, int, asyncio.Future]] = []

    def create_batch(self):
        return BatchBuilder(self.batch_bytes, 0)

    async def send_batch(self, batch, topic, *, partition):
        future = asyncio.get_running_loop().create_future()
        self.sent.append((partition, batch.record_count(), future))
        return future


class Buffer:  # what ChangelogWriter uses of streams.durable_flush.DurableProducerBuffer
    def __init__(self) -> None:
        self.in_flight, self.lost, self.gave_up = 0, None, False
        self.message_sent = asyncio.Event()


class Offsets:
    def __init__(self) -> None:
        self.persisted: dict[int, int] = {}

    def set_persisted_offset(self, tp, offset: int) -> None:
        self.persisted[tp.partition] = offset


def writer_with(producer, lost: list):
    app = SimpleNamespace(producer=SimpleNamespace(_producer=producer))
    table = SimpleNamespace(data=Offsets())
    buffer = Buffer()
    writer = ChangelogWriter(app, table, "jobs", buffer, on_lost=lambda: lost.append(1))
    return writer, buffer, table.data


def test_each_ack_persists_the_batch_last_offset_and_ends_its_flight():
    async def main() -> None:
        producer, lost = AckedByHand(), []
        writer, buffer, offsets = writer_with(producer, lost)
        await writer.send(3, [(b"a", b"A"), (b"b", None), (b"c", b"C")])
        [(partition, count, future)] = producer.sent
        assert (partition, count, buffer.in_flight) == (3, 3, 1)
        assert offsets.persisted == {}  # not before the broker's ack
        future.set_result(SimpleNamespace(offset=100))
        await asyncio.sleep(0)
        assert offsets.persisted == {3: 102} and buffer.in_flight == 0 and not lost

    asyncio.run(main())


def test_records_beyond_one_batch_go_in_several_in_order():
    async def main() -> None:
        producer, lost = AckedByHand(batch_bytes=1000), []
        writer, buffer, _ = writer_with(producer, lost)
        records = [(b"k%d" % i, b"v" * 300) for i in range(10)]
        await writer.send(0, records)
        assert sum(count for _, count, _ in producer.sent) == 10
        assert len(producer.sent) > 1 and buffer.in_flight == len(producer.sent)

    asyncio.run(main())


def test_a_lost_batch_stops_every_later_commit_and_the_process():
    async def main() -> None:
        producer, lost = AckedByHand(), []
        writer, buffer, offsets = writer_with(producer, lost)
        await writer.send(1, [(b"a", b"A")])
        producer.sent[0][2].set_exception(TimeoutError("delivery timed out"))
        await asyncio.sleep(0)
        assert lost == [1] and buffer.gave_up and isinstance(buffer.lost, TimeoutError)
        assert offsets.persisted == {} and buffer.in_flight == 0

    asyncio.run(main())


def test_the_durable_buffer_refuses_to_flush_after_a_loss():
    from streams.durable_flush import DurableProducerBuffer

    buffer = DurableProducerBuffer.__new__(DurableProducerBuffer)
    buffer.lost = TimeoutError("gone")
    with pytest.raises(RuntimeError, match="no offset is committed"):
        buffer._check_lost()
