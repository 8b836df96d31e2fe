"""The processor applies a partition's records in offset order, each once, and only
while this process holds its partitions (streams/processor.py ``handle_batch``): a record
before the next one was applied already, one after it means records were skipped (the
partition is read again from the one expected), and an expired lease stops every apply
and reports the loss."""

from __future__ import annotations

import asyncio
import uuid

from eventq.core import Add, encode_command
from eventq.state.indexes import JobIndex
from eventq.state.waiters import Waiters
from streams.memory import MemoryStore
from streams.processor import Ownership, Processor

AT_MS = 1_800_000_000_000


class Held(Ownership):
    def __init__(self) -> None:
        self.held = True
        self.losses: list[str] = []
        self.reads_again: list[tuple[int, int]] = []

    def holds(self) -> bool:
        return self.held

    def lost(self, reason: str) -> None:
        self.losses.append(reason)

    async def log_start(self, partition: int) -> int | None:
        return 0

    async def read_again(self, partition: int, offset: int) -> None:
        self.reads_again.append((partition, offset))


def add_record(n: int) -> bytes:
    return encode_command(Add(uuid.UUID(int=n, version=4), "q", 1000, 60_000, b"p%d" % n))


def fetched(offset: int, partition: int = 0, value: bytes | None = None):
    """A record as the fetcher hands it over: aiokafka's, its timestamp in ms."""
    from aiokafka.structs import ConsumerRecord

    value = add_record(offset) if value is None else value
    return ConsumerRecord("c", partition, offset, AT_MS, 1, None, value, None, 0,
                          len(value), ())


def fetch(*offsets: int, partition: int = 0) -> list:
    return [fetched(offset, partition) for offset in offsets]


def processor(store: MemoryStore, ownership: Held) -> Processor:
    return Processor(store, JobIndex(), Waiters(), "node", lambda deadline: None,
                     store.persist, ownership=ownership)


def jobs(store: MemoryStore) -> int:
    return sum(1 for key in store.table(0) if len(key) == 36)


def run(coroutine):
    return asyncio.run(coroutine)


def test_records_apply_in_order_from_where_the_partition_resumed():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        await p.handle_batch(0, fetch(4))  # before any resume: not ours
        p.resumed_at({0: 5})
        for offset in (5, 6, 7):
            await p.handle_batch(0, fetch(offset))

    run(scenario())
    assert jobs(store) == 3 and p.next_offsets() == {0: 8}
    assert p.counters.skipped == 1


def test_a_record_delivered_again_is_not_applied_again():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        p.resumed_at({0: 0})
        await p.handle_batch(0, fetch(0))
        before = dict(store.table(0))
        await p.handle_batch(0, fetch(0))
        return before

    before = run(scenario())
    assert store.table(0) == before and p.counters.skipped == 1


def test_a_gap_is_never_applied_over_the_partition_is_read_again():
    """faust's fetcher moved past records it never handed over (the catch-up stall:
    docs/fencing.md, "What went wrong without it"): the record after the gap waits until
    the missing ones arrive."""
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        p.resumed_at({0: 10})
        await p.handle_batch(0, fetch(10))
        await p.handle_batch(0, fetch(13))  # 11 and 12 were skipped
        await p.handle_batch(0, fetch(14))  # fetched before the seek
        for offset in (11, 12, 13, 14):  # read again
            await p.handle_batch(0, fetch(offset))

    run(scenario())
    assert held.reads_again == [(0, 11)]  # once, not once per stale record
    assert jobs(store) == 5 and p.next_offsets() == {0: 15}


def test_records_deleted_by_retention_are_passed_over_with_an_error():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def log_start(partition: int) -> int:
        return 20

    held.log_start = log_start

    async def scenario():
        p.resumed_at({0: 3})
        await p.handle_batch(0, fetch(20))

    run(scenario())
    assert held.reads_again == [] and jobs(store) == 1


def test_an_expired_lease_stops_every_apply_until_resumed():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        p.resumed_at({0: 0})
        await p.handle_batch(0, fetch(0))
        held.held = False  # paused past the session: the partitions may be elsewhere
        await p.handle_batch(0, fetch(1))
        held.held = True  # a heartbeat got through: still, nothing until resumed
        await p.handle_batch(0, fetch(2))
        assert len(held.losses) == 1 and p.suspended
        p.resumed_at({0: 1})  # after the rebalance, from the committed offset
        await p.handle_batch(0, fetch(1))

    run(scenario())
    assert jobs(store) == 2 and not p.suspended


def test_a_forgotten_partition_applies_nothing_and_releases_its_waiters():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        p.resumed_at({0: 0})
        waiting = asyncio.ensure_future(p.applied(0, 5))
        await asyncio.sleep(0)
        p.forget([0])
        await asyncio.wait_for(waiting, 1)
        await p.handle_batch(0, fetch(0))

    run(scenario())
    assert jobs(store) == 0 and p.next_offsets() == {}


def test_a_partition_given_up_while_its_record_is_stored_resumes_where_it_is_taken_again():
    """Found by the fault campaign (seed 1011): a partition's transaction failed while
    a record of it was being stored, so it was given up (``forget``) and taken again
    from its committed offset; the apply that finished afterwards set the partition's
    next offset past records the retake had not read, and they were never applied."""
    store, held = MemoryStore(), Held()
    storing, proceed = asyncio.Event(), asyncio.Event()
    persist = store.persist

    async def slow_persist(partition, records):
        storing.set()
        await proceed.wait()
        await persist(partition, records)

    p = Processor(store, JobIndex(), Waiters(), "node", lambda deadline: None,
                   slow_persist, ownership=held)

    async def scenario():
        p.resumed_at({0: 0})
        applying = asyncio.ensure_future(p.handle_batch(0, fetch(0)))
        await storing.wait()
        p.forget([0])  # given up mid-apply ...
        proceed.set()
        await applying
        assert p.next_offsets() == {}  # ... so the finished apply counts for nothing
        p.resumed_at({0: 0})  # taken again from the committed offset
        for offset in (0, 1):
            await p.handle_batch(0, fetch(offset))
        return p.next_offsets()

    assert run(scenario()) == {0: 2} and jobs(store) == 2


def test_a_partition_set_aside_during_the_catch_up_does_not_hold_the_others_back():
    """Found by the fault campaign (seed 3024): two partitions' transactions failed
    while the process re-applied their uncommitted tails after an assignment; each was
    set aside to be taken again on its own and served again, but the catch-up of the
    assignment still waited for them and the process never served again."""
    store, held = MemoryStore(), Held()
    store.active = frozenset({0, 1})
    p = processor(store, held)
    serving = []

    async def scenario():
        p.resumed_at({0: 0, 1: 0})
        p.expect_catch_up({0: 1, 1: 1}, lambda: serving.append("all"))
        await p.handle_batch(0, fetch(0))
        await p.handle_batch(0, fetch(1))
        assert serving == []  # partition 1 is still behind
        p.set_aside(1)

    run(scenario())
    assert serving == ["all"]
    assert p.catch_up_status() == "done"


def test_a_partition_set_aside_after_the_catch_up_calls_nothing_again():
    store, held = MemoryStore(), Held()
    p = processor(store, held)
    serving = []

    async def scenario():
        p.resumed_at({0: 0})
        p.expect_catch_up({0: 0}, lambda: serving.append("all"))
        await p.handle_batch(0, fetch(0))
        p.set_aside(0)

    run(scenario())
    assert serving == ["all"]


# --- fetches of several records ----------------------------------------------------


def test_a_fetch_applies_in_order_from_where_the_partition_resumed():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        await p.handle_batch(0, fetch(3, 4))  # before any resume: not ours
        p.resumed_at({0: 5})
        await p.handle_batch(0, fetch(4, 5, 6))  # 4 was applied before 5
        await p.handle_batch(0, fetch(7))

    run(scenario())
    assert jobs(store) == 3 and p.next_offsets() == {0: 8}
    assert p.counters.skipped == 3 and p.counters.records == 3


def test_records_fetched_together_or_one_by_one_apply_alike():
    """The same records, each in a fetch of its own or several to a fetch: the same
    table."""
    def applied(together: bool) -> dict:
        store, held = MemoryStore(), Held()
        p = processor(store, held)

        async def scenario():
            p.resumed_at({0: 0})
            if together:
                await p.handle_batch(0, fetch(0, 1, 2))
                await p.handle_batch(0, fetch(3, 4))
            else:
                for offset in range(5):
                    await p.handle_batch(0, fetch(offset))

        run(scenario())
        return dict(store.table(0))

    assert applied(True) == applied(False)


def test_a_fetch_with_a_gap_reads_the_partition_again_once():
    store, held = MemoryStore(), Held()
    p = processor(store, held)

    async def scenario():
        p.resumed_at({0: 10})
        await p.handle_batch(0, fetch(10, 13, 14))  # 11 and 12 were skipped
        await p.handle_batch(0, fetch(11, 12, 13, 14))  # read again

    run(scenario())
    assert held.reads_again == [(0, 11)]
    assert jobs(store) == 5 and p.next_offsets() == {0: 15}


def test_a_lease_that_expires_within_a_fetch_stops_it_at_that_record():
    store, held = MemoryStore(), Held()
    persist = store.persist

    async def persist_then_expire(partition, records):
        await persist(partition, records)
        held.held = False  # paused past the session while the first record applied

    p = Processor(store, JobIndex(), Waiters(), "node", lambda deadline: None,
                  persist_then_expire, ownership=held)

    async def scenario():
        p.resumed_at({0: 0})
        await p.handle_batch(0, fetch(0, 1, 2))
        held.held = True
        await p.handle_batch(0, fetch(1, 2))  # nothing until resumed

    run(scenario())
    assert jobs(store) == 1 and p.suspended and len(held.losses) == 1
    assert p.next_offsets() == {0: 1}


def test_a_partition_given_up_within_a_fetch_applies_nothing_more_of_it():
    """A record's transaction failed while it was stored (streams/faust/ownership.py
    take_again: the processor forgets the partition): the rest of the fetch is not
    applied, and the partition resumes where it is taken again."""
    store, held = MemoryStore(), Held()
    persist = store.persist
    p: Processor

    async def persist_then_give_up(partition, records):
        await persist(partition, records)
        p.set_aside(partition)

    p = Processor(store, JobIndex(), Waiters(), "node", lambda deadline: None,
                  persist_then_give_up, ownership=held)

    async def scenario():
        p.resumed_at({0: 0})
        await p.handle_batch(0, fetch(0, 1, 2))

    run(scenario())
    assert jobs(store) == 1 and p.next_offsets() == {} and p.counters.skipped == 2


def test_a_fetch_answers_its_waiters_and_the_catch_up():
    store, held = MemoryStore(), Held()
    p = processor(store, held)
    serving = []

    async def scenario():
        p.resumed_at({0: 0})
        p.expect_catch_up({0: 2}, lambda: serving.append("all"))
        waiting = asyncio.ensure_future(p.applied(0, 1))
        await asyncio.sleep(0)
        await p.handle_batch(0, fetch(0, 1))
        await asyncio.wait_for(waiting, 1)
        assert serving == []
        await p.handle_batch(0, fetch(2))

    run(scenario())
    assert serving == ["all"]
