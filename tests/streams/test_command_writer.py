"""Group commit (streams/command_writer.py) against a producer whose writes the test
completes by hand: what leaves together, and when."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from eventq.core.batch import MAX_BATCH_COMMANDS, split_record
from streams.command_writer import CommandWriter


class HeldProducer:
    """Records each write and holds it until ``release`` (Kafka's round trip)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes | None, list[bytes]]] = []
        self.gates: list[asyncio.Future] = []

    async def send_and_wait(self, topic, *, value, key, partition):
        self.sent.append((partition, key, split_record(value)))
        gate = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        await gate
        return SimpleNamespace(offset=len(self.sent) - 1)

    def release(self, error: Exception | None = None) -> None:
        for gate in self.gates:
            if not gate.done():
                gate.set_exception(error) if error else gate.set_result(None)


async def turn() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_lone_command_leaves_at_once_and_the_rest_together_after_it():
    async def main() -> None:
        producer = HeldProducer()
        writer = CommandWriter(lambda: producer, "t", partitions=2)
        first = writer.write(1, b"k0", b"\x80c0")
        await turn()
        assert producer.sent == [(1, b"k0", [b"\x80c0"])]  # no linger
        later = [writer.write(1, b"k%d" % i, b"\x80c%d" % i) for i in range(1, 4)]
        other = writer.write(0, b"o", b"\x80o")  # another partition: its own lane
        await turn()
        assert producer.sent[1:] == [(0, b"o", [b"\x80o"])]
        producer.release()
        await turn()
        assert first.done() and not any(f.done() for f in later)
        # the three that waited leave as one batch record, with no key
        assert producer.sent[2] == (1, None, [b"\x80c1", b"\x80c2", b"\x80c3"])
        producer.release()
        await asyncio.gather(*later, other)
        assert (writer.records, writer.commands) == (3, 5)

    asyncio.run(main())


def test_a_failed_write_fails_each_of_its_commands_and_the_lane_goes_on():
    async def main() -> None:
        producer = HeldProducer()
        writer = CommandWriter(lambda: producer, "t", partitions=1)
        first = writer.write(0, b"a", b"\x80a")
        await turn()
        doomed = [writer.write(0, b"b", b"\x80b"), writer.write(0, b"c", b"\x80c")]
        producer.release(ConnectionError("broker gone"))
        with pytest.raises(ConnectionError):
            await first
        await turn()
        producer.release(ConnectionError("still gone"))
        for future in doomed:
            with pytest.raises(ConnectionError):
                await future
        after = writer.write(0, b"d", b"\x80d")
        await turn()
        producer.release()
        await after

    asyncio.run(main())


def test_commands_whose_issuer_gave_up_are_not_sent_and_batches_are_bounded():
    async def main() -> None:
        producer = HeldProducer()
        writer = CommandWriter(lambda: producer, "t", partitions=1)
        writer.write(0, b"a", b"\x80a")
        await turn()
        given_up = writer.write(0, b"x", b"\x80x")
        given_up.cancel()  # the client's write timeout passed
        many = [writer.write(0, b"k", b"\x80") for _ in range(MAX_BATCH_COMMANDS + 1)]
        producer.release()
        await turn()
        assert len(producer.sent[1][2]) == MAX_BATCH_COMMANDS  # bounded, no b"\x80x"
        assert b"\x80x" not in producer.sent[1][2]
        producer.release()
        await turn()
        producer.release()
        await asyncio.gather(*many)
        assert len(producer.sent) == 3

    asyncio.run(main())


def test_a_busy_lane_waits_until_its_record_is_applied_so_batches_grow():
    async def main() -> None:
        producer = HeldProducer()
        applied = asyncio.Event()

        async def wait_applied(partition: int, offset: int) -> None:
            await applied.wait()

        writer = CommandWriter(lambda: producer, "t", partitions=1, applied=wait_applied)
        writer.write(0, b"a", b"\x80a")
        await turn()
        second = writer.write(0, b"b", b"\x80b")
        producer.release()
        await turn()
        assert len(producer.sent) == 1  # written, but not applied yet: the lane waits
        third = writer.write(0, b"c", b"\x80c")
        applied.set()
        await turn()
        assert producer.sent[1][2] == [b"\x80b", b"\x80c"]
        producer.release()
        await asyncio.gather(second, third)

    asyncio.run(main())


def test_no_producer_yet_is_an_error_for_the_waiting_commands():
    async def main() -> None:
        writer = CommandWriter(lambda: None, "t", partitions=1)
        with pytest.raises(ConnectionError):
            await writer.write(0, b"a", b"\x80a")

    asyncio.run(main())


def test_a_record_of_one_command_has_that_commands_key_even_after_a_skipped_one():
    async def main() -> None:
        producer = HeldProducer()
        writer = CommandWriter(lambda: producer, "t", partitions=1)
        writer.write(0, b"a", b"\x80a")
        await turn()
        kept = writer.write(0, b"kept", b"\x80k")
        writer.write(0, b"gone", b"\x80g").cancel()  # after it in the lane, given up
        producer.release()
        await turn()
        assert producer.sent[1] == (0, b"kept", [b"\x80k"])
        producer.release()
        await kept

    asyncio.run(main())
